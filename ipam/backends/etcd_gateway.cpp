// SPDX-License-Identifier: Apache-2.0
#include "ipam/backends/etcd_gateway.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "ipam/claims/backend_support.h"
#include "ibcni/os/text.h"

namespace ibcni::ipam::etcd {

namespace {

using backend::badAnswer;
using backend::excerpt;
using Clock = std::chrono::steady_clock;

/// The gateway's error object: {"error":"...","message":"...","code":N}; a streamed answer
/// (keepalive) carries {"error":{"grpc_code":N,"message":"..."}}.
std::pair<std::string, std::int64_t> gatewayError(const json& doc) {
  std::string message;
  std::int64_t code = 0;
  if (!doc.is_object() || !doc.contains("error")) {
    return {message, code};
  }
  const json& err = doc["error"];
  if (err.is_string()) {
    message = err.get<std::string>();
    code = int64Field(doc, "code").value_or(0);
  } else if (err.is_object()) {
    message = err.value("message", std::string());
    code = int64Field(err, "grpc_code").value_or(0);
  }
  if (message.empty() && doc.contains("message") && doc["message"].is_string()) {
    message = doc["message"].get<std::string>();
  }
  return {message, code};
}

/// No leader, no quorum, or a member shutting down ("the client connection is closing": 408, gRPC
/// Canceled): another member may do. A retried write is safe: a claim that was applied comes back
/// adopted, a conditional delete gone.
bool anotherMemberMayDo(long status, std::int64_t code) {
  return status == 408 || status == 502 || status == 503 || status == 504 || code == 14 || code == 4 || code == 1;
}

std::string joined(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) {
    out += (out.empty() ? "" : sep) + p;
  }
  return out;
}

std::string prefixEnd(std::string_view prefix) {
  std::string end(prefix);
  end.back() = static_cast<char>(end.back() + 1);  // prefixes end in '/': never 0xff
  return end;
}

}  // namespace

std::optional<std::int64_t> int64Field(const json& obj, const char* name) {
  if (!obj.is_object()) {
    return std::nullopt;
  }
  const auto it = obj.find(name);
  if (it == obj.end()) {
    return 0;
  }
  if (it->is_number_integer()) {
    return it->get<std::int64_t>();
  }
  if (it->is_string()) {
    const auto& s = it->get_ref<const std::string&>();
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) {
      return v;
    }
  }
  return std::nullopt;
}

bool leaseNotFound(const BackendError& e) {
  return e.backendCode == 5 && e.message.find("lease not found") != std::string::npos;
}

Call::Call(http::HttpClient& client, const Endpoints& endpoints, std::atomic<std::size_t>& preferred)
    : client_(client), endpoints_(endpoints), preferred_(preferred), deadline_(Clock::now() + endpoints.timeout) {}

BackendError Call::bad(const std::string& what) const { return badAnswer(lastEndpoint_, what); }

BackendResult<json> Call::post(std::string_view path, const json& body) {
  const auto& eps = endpoints_.urls;
  const std::size_t n = eps.size();
  const std::size_t start = preferred_.load() % n;
  std::vector<std::string> failures;
  std::vector<std::string> tried;
  bool timedOut = false;
  const std::string text = body.dump();
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t idx = (start + i) % n;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
    if (left.count() <= 0) {
      timedOut = true;
      failures.push_back(std::to_string(n - i) + " endpoint(s) not tried: the timeout of " +
                         std::to_string(endpoints_.timeout.count()) + " ms passed");
      break;
    }
    http::Request req;
    req.method = http::Method::kPost;
    req.url = eps[idx] + std::string(path);
    req.headers.push_back({"Content-Type", "application/json"});
    req.body = text;
    req.timeout = std::max(std::chrono::milliseconds(1), left / static_cast<long>(n - i));
    req.tls = endpoints_.tls;
    tried.push_back(eps[idx]);
    auto r = client_.send(req);
    if (!r) {
      const auto& e = r.error();
      switch (e.kind) {
        case http::ErrorKind::kUnavailable:
          return std::unexpected(BackendError{BackendErrc::kUnavailable, eps[idx], e.describe(), 0});
        case http::ErrorKind::kInvalidRequest:
          return std::unexpected(BackendError{BackendErrc::kInvalidArgument, eps[idx], e.describe(), 0});
        case http::ErrorKind::kTls:
          return std::unexpected(BackendError{BackendErrc::kAuth, eps[idx], e.describe(), 0});
        case http::ErrorKind::kTimeout:
          timedOut = true;
          failures.push_back(e.describe());
          continue;
        default:
          failures.push_back(e.describe());
          continue;
      }
    }
    const std::string where = "POST " + req.url;
    const json doc = json::parse(r->body, nullptr, false);
    const auto [message, code] = gatewayError(doc);
    if (r->status == 200 && doc.is_object() && !doc.contains("error")) {
      preferred_.store(idx);
      lastEndpoint_ = eps[idx];
      return doc;
    }
    const std::string what = "HTTP " + std::to_string(r->status) + ": " +
                             (message.empty() ? excerpt(r->body) : message) +
                             (code != 0 ? " (code " + std::to_string(code) + ")" : "");
    if (r->status == 200 && !doc.is_object()) {
      return std::unexpected(badAnswer(where, "HTTP 200 with a body that is not a JSON object: " + excerpt(r->body)));
    }
    if (r->status == 401 || r->status == 403 || code == 16 || code == 7) {
      return std::unexpected(BackendError{BackendErrc::kAuth, where, what, static_cast<int>(code)});
    }
    if (anotherMemberMayDo(r->status, code)) {
      failures.push_back(where + ": " + what);
      continue;
    }
    return std::unexpected(BackendError{BackendErrc::kBadAnswer, where, what, static_cast<int>(code)});
  }
  return std::unexpected(BackendError{timedOut ? BackendErrc::kTimeout : BackendErrc::kUnreachable,
                                      tried.empty() ? eps[start] : joined(tried, ", "), joined(failures, "; "), 0});
}

BackendResult<std::vector<Kv>> kvsOf(const json& response, const Call& call) {
  std::vector<Kv> out;
  if (!response.is_object()) {
    return std::unexpected(call.bad("a range answer that is not an object: " + excerpt(response.dump())));
  }
  if (!response.contains("kvs")) {
    return out;  // omitted when empty
  }
  if (!response["kvs"].is_array()) {
    return std::unexpected(call.bad("a range answer whose kvs is not an array"));
  }
  for (const auto& item : response["kvs"]) {
    const auto key = item.is_object() && item.contains("key") && item["key"].is_string()
                         ? os::base64Decode(item["key"].get<std::string>())
                         : std::nullopt;
    if (!key) {
      return std::unexpected(call.bad("a kvs entry without a key (base64): " + excerpt(item.dump())));
    }
    const auto value = item.contains("value") && item["value"].is_string()
                           ? os::base64Decode(item["value"].get<std::string>())
                           : std::optional<std::string>(std::string());
    const auto created = int64Field(item, "create_revision");
    const auto mod = int64Field(item, "mod_revision");
    const auto lease = int64Field(item, "lease");
    if (!value || !created || !mod || *mod <= 0 || !lease) {
      return std::unexpected(
          call.bad("key " + cni::quoted(*key) + ": value, create_revision, mod_revision or lease unreadable"));
    }
    out.push_back(Kv{*key, *value, *created, *mod, *lease});
  }
  return out;
}

json compareCreate(std::string_view key, std::int64_t createRevision) {
  return json{{"key", os::base64Encode(key)},
              {"target", "CREATE"},
              {"result", "EQUAL"},
              {"create_revision", std::to_string(createRevision)}};
}

json compareMod(std::string_view key, std::int64_t modRevision) {
  return json{
      {"key", os::base64Encode(key)}, {"target", "MOD"}, {"result", "EQUAL"}, {"mod_revision", std::to_string(modRevision)}};
}

json putOp(std::string_view key, std::string_view value, std::int64_t lease) {
  json put{{"key", os::base64Encode(key)}, {"value", os::base64Encode(value)}};
  if (lease != 0) {
    put["lease"] = std::to_string(lease);
  }
  return json{{"request_put", put}};
}

json deleteOp(std::string_view key) { return json{{"request_delete_range", {{"key", os::base64Encode(key)}}}}; }

json rangeOp(std::string_view key) { return json{{"request_range", {{"key", os::base64Encode(key)}}}}; }

json rangePrefixBody(std::string_view prefix, bool keysOnly) {
  json body{{"key", os::base64Encode(prefix)}, {"range_end", os::base64Encode(prefixEnd(prefix))}};
  if (keysOnly) {
    body["keys_only"] = true;
  }
  return body;
}

json rangePrefixOp(std::string_view prefix, bool keysOnly) {
  return json{{"request_range", rangePrefixBody(prefix, keysOnly)}};
}

namespace {

BackendResult<std::vector<Kv>> rangeWith(Call& call, const json& body) {
  auto r = call.post("/v3/kv/range", body);
  if (!r) {
    return std::unexpected(std::move(r.error()));
  }
  return kvsOf(*r, call);
}

}  // namespace

BackendResult<std::vector<Kv>> range(Call& call, std::string_view key) {
  return rangeWith(call, json{{"key", os::base64Encode(key)}});
}

BackendResult<std::vector<Kv>> rangePrefix(Call& call, std::string_view prefix) {
  return rangeWith(call, rangePrefixBody(prefix));
}

BackendResult<TxnAnswer> txn(Call& call, json compare, json success, json failure) {
  const json body{{"compare", std::move(compare)}, {"success", std::move(success)}, {"failure", std::move(failure)}};
  auto r = call.post("/v3/kv/txn", body);
  if (!r) {
    return std::unexpected(std::move(r.error()));
  }
  TxnAnswer a;
  // "succeeded" is omitted when false.
  a.succeeded = r->contains("succeeded") && (*r)["succeeded"].is_boolean() && (*r)["succeeded"].get<bool>();
  const auto rev = r->contains("header") ? int64Field((*r)["header"], "revision") : std::nullopt;
  if (!rev || *rev <= 0) {
    return std::unexpected(call.bad("a txn answer without a header.revision: " + excerpt(r->dump())));
  }
  a.revision = *rev;
  if (r->contains("responses")) {
    if (!(*r)["responses"].is_array()) {
      return std::unexpected(call.bad("a txn answer whose responses is not an array"));
    }
    for (const auto& item : (*r)["responses"]) {
      a.responses.push_back(item);
    }
  }
  return a;
}

BackendResult<std::vector<Kv>> rangeResult(const TxnAnswer& answer, std::size_t i, const Call& call) {
  if (i >= answer.responses.size() || !answer.responses[i].is_object() ||
      !answer.responses[i].contains("response_range")) {
    return std::unexpected(call.bad("a txn answer without responses[" + std::to_string(i) + "].response_range"));
  }
  return kvsOf(answer.responses[i]["response_range"], call);
}

}  // namespace ibcni::ipam::etcd
