// SPDX-License-Identifier: Apache-2.0
#include "etcd_block_backend.h"

#include "backend_support.h"

#include "ibcni/os/text.h"
#include "ibcni/os/time_text.h"

#include <time.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ibcni::ipam {

namespace {

using backend::badAnswer;
using backend::excerpt;
using backend::invalid;
using backend::printable;
using backend::validName;

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using SysClock = std::chrono::system_clock;


/// An int64 field of the gateway's JSON: a string or a number; absent means 0 (omitted zero).
/// std::nullopt when it is something else.
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


/// One key-value of a range answer, decoded.
struct Kv {
  std::string name;  // the key without its prefix
  std::string value;
  std::int64_t modRevision = 0;
  std::int64_t lease = 0;
  Holder holder;
};

BackendResult<Kv> parseKv(const json& kv, std::string_view prefix, const std::string& endpoint) {
  if (!kv.is_object()) {
    return std::unexpected(badAnswer(endpoint, "a kvs entry is not an object"));
  }
  Kv out;
  const auto key =
      kv.contains("key") && kv["key"].is_string() ? os::base64Decode(kv["key"].get<std::string>()) : std::nullopt;
  if (!key || key->substr(0, prefix.size()) != prefix) {
    return std::unexpected(badAnswer(endpoint, "a kvs entry has no key (base64) under " + cni::quoted(prefix)));
  }
  out.name = key->substr(prefix.size());
  const auto value = kv.contains("value") && kv["value"].is_string()
                         ? os::base64Decode(kv["value"].get<std::string>())
                         : std::optional<std::string>(std::string());
  const auto mod = int64Field(kv, "mod_revision");
  const auto lease = int64Field(kv, "lease");
  if (!value || !mod || *mod <= 0 || !lease) {
    return std::unexpected(badAnswer(endpoint, "key " + cni::quoted(*key) + ": value, mod_revision or lease unreadable"));
  }
  out.value = *value;
  out.modRevision = *mod;
  out.lease = *lease;
  const auto doc = json::parse(out.value, nullptr, false);
  if (!doc.is_object() || !doc.contains("node") || !doc["node"].is_string()) {
    return std::unexpected(badAnswer(endpoint, "key " + cni::quoted(*key) + " holds " + excerpt(out.value) +
                                                   ", not {\"node\":...}"));
  }
  out.holder.node = doc["node"].get<std::string>();
  if (doc.contains("owner") && doc["owner"].is_string()) {
    out.holder.owner = doc["owner"].get<std::string>();
  }
  if (doc.contains("claimedAt") && doc["claimedAt"].is_string()) {
    out.holder.claimedAt = os::parseRfc3339(doc["claimedAt"].get<std::string>());
  }
  out.holder.version = std::to_string(out.modRevision);
  return out;
}

/// responses[0].<field> of a txn answer (a null json when absent).
json txnResponse(const json& answer, const char* field) {
  if (answer.contains("responses") && answer["responses"].is_array() && !answer["responses"].empty() &&
      answer["responses"][0].is_object() && answer["responses"][0].contains(field)) {
    return answer["responses"][0][field];
  }
  return nullptr;
}

bool succeeded(const json& answer) {
  // Omitted when false.
  return answer.contains("succeeded") && answer["succeeded"].is_boolean() && answer["succeeded"].get<bool>();
}

}  // namespace

struct EtcdBlockBackend::Call {
  EtcdBlockBackend& self;
  Clock::time_point deadline;
  std::string lastEndpoint;  // the endpoint that gave the last answer

  explicit Call(EtcdBlockBackend& backend) : self(backend), deadline(Clock::now() + backend.options_.timeout) {}

  /// POSTs `body` to `path` on the first endpoint that answers; the JSON object of a 200 answer.
  BackendResult<json> post(std::string_view path, const json& body) {
    const auto& eps = self.options_.endpoints;
    const std::size_t n = eps.size();
    const std::size_t start = self.preferred_.load() % n;
    std::vector<std::string> failures;
    std::vector<std::string> tried;
    bool timedOut = false;
    const std::string text = body.dump();
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t idx = (start + i) % n;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        timedOut = true;
        failures.push_back(std::to_string(n - i) + " endpoint(s) not tried: the timeout of " +
                           std::to_string(self.options_.timeout.count()) + " ms passed");
        break;
      }
      http::Request req;
      req.method = http::Method::kPost;
      req.url = eps[idx] + std::string(path);
      req.headers.push_back({"Content-Type", "application/json"});
      req.body = text;
      req.timeout = std::max(std::chrono::milliseconds(1), left / static_cast<long>(n - i));
      req.tls = self.options_.tls;
      tried.push_back(eps[idx]);
      auto r = self.client_.send(req);
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
      const auto& resp = *r;
      const std::string where = "POST " + req.url;
      const json doc = json::parse(resp.body, nullptr, false);
      // The gateway's error object: {"error":"...","message":"...","code":N}; a streamed
      // answer (keepalive) carries {"error":{"grpc_code":N,"message":"..."}}.
      std::string message;
      std::int64_t code = 0;
      if (doc.is_object() && doc.contains("error")) {
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
      }
      if (resp.status == 200 && doc.is_object() && !doc.contains("error")) {
        self.preferred_.store(idx);
        lastEndpoint = eps[idx];
        return doc;
      }
      const std::string what = "HTTP " + std::to_string(resp.status) + ": " +
                               (message.empty() ? excerpt(resp.body) : message) +
                               (code != 0 ? " (code " + std::to_string(code) + ")" : "");
      if (resp.status == 200 && !doc.is_object()) {
        return std::unexpected(badAnswer(where, "HTTP 200 with a body that is not a JSON object: " + excerpt(resp.body)));
      }
      if (resp.status == 401 || resp.status == 403 || code == 16 || code == 7) {
        return std::unexpected(BackendError{BackendErrc::kAuth, where, what, static_cast<int>(code)});
      }
      // No leader, no quorum, or a member shutting down ("the client connection is closing": 408,
      // gRPC Canceled): another member may do. A retried write is safe: a claim that was applied
      // comes back adopted, a conditional delete gone or changed.
      if (resp.status == 408 || resp.status == 502 || resp.status == 503 || resp.status == 504 || code == 14 ||
          code == 4 || code == 1) {
        failures.push_back(where + ": " + what);
        continue;
      }
      return std::unexpected(BackendError{BackendErrc::kBadAnswer, where, what, static_cast<int>(code)});
    }
    std::string endpoints;
    for (const auto& t : tried) {
      endpoints += (endpoints.empty() ? "" : ", ") + t;
    }
    std::string message;
    for (const auto& f : failures) {
      message += (message.empty() ? "" : "; ") + f;
    }
    return std::unexpected(BackendError{timedOut ? BackendErrc::kTimeout : BackendErrc::kUnreachable,
                                        endpoints.empty() ? eps[start] : endpoints, message, 0});
  }
};

EtcdBlockBackend::EtcdBlockBackend(http::HttpClient& client, Options options)
    : client_(client), options_(std::move(options)), leaseId_(options_.leaseId) {}

EtcdBlockBackend::Options EtcdBlockBackend::optionsFor(const config::ClusterConf& cluster, std::int64_t leaseId,
                                                      std::function<void(std::int64_t)> onLeaseGranted) {
  Options o;
  o.endpoints = cluster.etcd.endpoints;
  o.prefix = cluster.etcd.prefix;
  o.timeout = cluster.timeout;
  o.tls.caFile = cluster.etcd.caFile;
  o.tls.certFile = cluster.etcd.certFile;
  o.tls.keyFile = cluster.etcd.keyFile;
  o.leaseTtl = cluster.leaseDuration;
  o.leaseId = leaseId;
  o.onLeaseGranted = std::move(onLeaseGranted);
  return o;
}

BackendResult<void> EtcdBlockBackend::validate(const Options& options) {
  if (options.endpoints.empty()) {
    return std::unexpected(invalid("etcd.endpoints is empty: give at least one \"http(s)://host:port\""));
  }
  for (const auto& e : options.endpoints) {
    const bool scheme = e.starts_with("http://") || e.starts_with("https://");
    const auto host = e.substr(e.find("://") == std::string::npos ? 0 : e.find("://") + 3);
    if (!scheme || host.empty() || !printable(e) || e.find(' ') != std::string::npos || e.ends_with("/")) {
      return std::unexpected(invalid("etcd endpoint " + cni::quoted(e) +
                                     " is not \"http://host:port\" or \"https://host:port\" (no path)"));
    }
  }
  if (options.prefix.empty() || !options.prefix.ends_with("/") || !printable(options.prefix)) {
    return std::unexpected(invalid("etcd prefix " + cni::quoted(options.prefix) + " must be printable and end in '/'"));
  }
  if (options.timeout.count() <= 0 || options.leaseTtl.count() <= 0) {
    return std::unexpected(invalid("timeout and lease TTL must be positive"));
  }
  return {};
}

std::string EtcdBlockBackend::blockKey(std::string_view pool, std::string_view block) const {
  return options_.prefix + "pools/" + std::string(pool) + "/blocks/" + std::string(block);
}

std::string EtcdBlockBackend::addressKey(std::string_view pool, std::string_view address) const {
  return options_.prefix + "pools/" + std::string(pool) + "/addresses/" + std::string(address);
}

std::int64_t EtcdBlockBackend::leaseId() const {
  const std::lock_guard lock(leaseMutex_);
  return leaseId_;
}

void EtcdBlockBackend::setLeaseId(std::int64_t id) {
  const std::lock_guard lock(leaseMutex_);
  leaseId_ = id;
}

BackendResult<std::int64_t> EtcdBlockBackend::grantLease(Call& call, std::int64_t replacing) {
  const std::lock_guard lock(leaseMutex_);
  if (leaseId_ != 0 && leaseId_ != replacing) {
    return leaseId_;  // another thread granted one meanwhile
  }
  auto r = call.post("/v3/lease/grant", json{{"TTL", std::to_string(options_.leaseTtl.count())}});
  if (!r) {
    return std::unexpected(std::move(r.error()));
  }
  const auto id = int64Field(*r, "ID");
  const std::string err = r->contains("error") && (*r)["error"].is_string() ? (*r)["error"].get<std::string>() : "";
  if (!id || *id <= 0 || !err.empty()) {
    return std::unexpected(badAnswer(call.lastEndpoint, "lease grant answered no lease ID: " + excerpt(r->dump())));
  }
  leaseId_ = *id;
  if (options_.onLeaseGranted) {
    options_.onLeaseGranted(*id);
  }
  return *id;
}

BackendResult<std::int64_t> EtcdBlockBackend::ensureLease(Call& call) {
  {
    const std::lock_guard lock(leaseMutex_);
    if (leaseId_ != 0) {
      return leaseId_;
    }
  }
  return grantLease(call, 0);
}

BackendResult<ClaimOutcome> EtcdBlockBackend::claimKey(Call& call, const std::string& key, std::string_view node,
                                                       std::string_view owner, bool address) {
  const auto now = SysClock::now();
  json value{{"node", node}, {"claimedAt", os::rfc3339(now)}};
  if (address) {
    value["owner"] = owner;
  }
  const std::string k64 = os::base64Encode(key);
  const std::string v64 = os::base64Encode(value.dump());
  const std::string prefix = key.substr(0, key.rfind('/') + 1);
  bool regranted = false;
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto lease = ensureLease(call);
    if (!lease) {
      return std::unexpected(std::move(lease.error()));
    }
    const json txn{
        {"compare", json::array({{{"key", k64}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}}})},
        {"success", json::array({{{"request_put", {{"key", k64}, {"value", v64}, {"lease", std::to_string(*lease)}}}}})},
        {"failure", json::array({{{"request_range", {{"key", k64}}}}})}};
    auto r = call.post("/v3/kv/txn", txn);
    if (!r) {
      if (leaseNotFound(r.error()) && !regranted) {
        regranted = true;
        if (auto g = grantLease(call, *lease); !g) {
          return std::unexpected(std::move(g.error()));
        }
        continue;
      }
      return std::unexpected(std::move(r.error()));
    }
    if (succeeded(*r)) {
      const auto rev = r->contains("header") ? int64Field((*r)["header"], "revision") : std::nullopt;
      if (!rev || *rev <= 0) {
        return std::unexpected(badAnswer(call.lastEndpoint, "txn succeeded without a header.revision: " +
                                                                excerpt(r->dump())));
      }
      return ClaimOutcome{ClaimState::kClaimed, Holder{std::string(node), std::string(owner), std::to_string(*rev),
                                                       SysClock::from_time_t(SysClock::to_time_t(now)), std::nullopt}};
    }
    const json range = txnResponse(*r, "response_range");
    if (!range.is_object()) {
      return std::unexpected(badAnswer(call.lastEndpoint, "failed txn without responses[0].response_range: " +
                                                              excerpt(r->dump())));
    }
    if (!range.contains("kvs") || !range["kvs"].is_array() || range["kvs"].empty()) {
      continue;  // cannot happen within one txn; try again
    }
    auto kv = parseKv(range["kvs"][0], prefix, call.lastEndpoint);
    if (!kv) {
      return std::unexpected(std::move(kv.error()));
    }
    const bool ours = kv->holder.node == node && (!address || kv->holder.owner == owner);
    if (!ours) {
      return ClaimOutcome{ClaimState::kHeldByOther, std::move(kv->holder)};
    }
    if (kv->lease == *lease) {
      return ClaimOutcome{ClaimState::kAdopted, std::move(kv->holder)};
    }
    // Ours, on another lease (an older one of this node): move it to the current lease.
    const json move{
        {"compare", json::array({{{"key", k64},
                                  {"target", "MOD"},
                                  {"result", "EQUAL"},
                                  {"mod_revision", std::to_string(kv->modRevision)}}})},
        {"success",
         json::array({{{"request_put",
                        {{"key", k64}, {"value", os::base64Encode(kv->value)}, {"lease", std::to_string(*lease)}}}}})},
        {"failure", json::array({{{"request_range", {{"key", k64}}}}})}};
    auto m = call.post("/v3/kv/txn", move);
    if (!m) {
      if (leaseNotFound(m.error()) && !regranted) {
        regranted = true;
        if (auto g = grantLease(call, *lease); !g) {
          return std::unexpected(std::move(g.error()));
        }
        continue;
      }
      return std::unexpected(std::move(m.error()));
    }
    if (succeeded(*m)) {
      const auto rev = m->contains("header") ? int64Field((*m)["header"], "revision") : std::nullopt;
      if (!rev || *rev <= 0) {
        return std::unexpected(badAnswer(call.lastEndpoint, "txn succeeded without a header.revision"));
      }
      kv->holder.version = std::to_string(*rev);
      return ClaimOutcome{ClaimState::kAdopted, std::move(kv->holder)};
    }
    // Changed meanwhile: look again.
  }
  return std::unexpected(badAnswer(call.lastEndpoint, "key " + cni::quoted(key) + " kept changing during the claim"));
}

BackendResult<ReleaseOutcome> EtcdBlockBackend::releaseKey(Call& call, const std::string& key, std::string_view node,
                                                           std::string_view version) {
  std::int64_t rev = 0;
  const auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), rev);
  if (ec != std::errc() || end != version.data() + version.size() || rev <= 0) {
    return std::unexpected(invalid("version " + cni::quoted(version) + " is not an etcd mod_revision"));
  }
  const std::string k64 = os::base64Encode(key);
  const std::string prefix = key.substr(0, key.rfind('/') + 1);
  // The holder is in the value, which a txn compare cannot read: look first, then delete on the
  // mod_revision seen (so the state judged ours is exactly the one deleted).
  auto current = call.post("/v3/kv/range", json{{"key", k64}});
  if (!current) {
    return std::unexpected(std::move(current.error()));
  }
  if (!current->contains("kvs") || !(*current)["kvs"].is_array() || (*current)["kvs"].empty()) {
    return ReleaseOutcome::kGone;
  }
  auto seen = parseKv((*current)["kvs"][0], prefix, call.lastEndpoint);
  if (!seen) {
    return std::unexpected(std::move(seen.error()));
  }
  if (seen->holder.node != node) {
    return ReleaseOutcome::kNotOurs;
  }
  if (seen->modRevision != rev) {
    return ReleaseOutcome::kChanged;
  }
  const json txn{
      {"compare",
       json::array({{{"key", k64}, {"target", "MOD"}, {"result", "EQUAL"}, {"mod_revision", std::string(version)}}})},
      {"success", json::array({{{"request_delete_range", {{"key", k64}}}}})},
      {"failure", json::array({{{"request_range", {{"key", k64}}}}})}};
  auto r = call.post("/v3/kv/txn", txn);
  if (!r) {
    return std::unexpected(std::move(r.error()));
  }
  if (succeeded(*r)) {
    return ReleaseOutcome::kReleased;
  }
  const json range = txnResponse(*r, "response_range");
  if (!range.is_object()) {
    return std::unexpected(badAnswer(call.lastEndpoint, "failed txn without responses[0].response_range: " +
                                                            excerpt(r->dump())));
  }
  if (!range.contains("kvs") || !range["kvs"].is_array() || range["kvs"].empty()) {
    return ReleaseOutcome::kGone;
  }
  auto kv = parseKv(range["kvs"][0], prefix, call.lastEndpoint);
  if (!kv) {
    return std::unexpected(std::move(kv.error()));
  }
  return kv->holder.node == node ? ReleaseOutcome::kChanged : ReleaseOutcome::kNotOurs;
}

BackendResult<std::vector<Claim>> EtcdBlockBackend::listPrefix(Call& call, const std::string& prefix) {
  std::string end = prefix;
  end.back() = static_cast<char>(end.back() + 1);  // prefix ends in '/': never 0xff
  auto r = call.post("/v3/kv/range", json{{"key", os::base64Encode(prefix)}, {"range_end", os::base64Encode(end)}});
  if (!r) {
    return std::unexpected(std::move(r.error()));
  }
  std::vector<Claim> out;
  if (!r->contains("kvs")) {
    return out;  // omitted when empty
  }
  if (!(*r)["kvs"].is_array()) {
    return std::unexpected(badAnswer(call.lastEndpoint, "range answer's kvs is not an array"));
  }
  for (const auto& item : (*r)["kvs"]) {
    auto kv = parseKv(item, prefix, call.lastEndpoint);
    if (!kv) {
      return std::unexpected(std::move(kv.error()));
    }
    out.push_back(Claim{std::move(kv->name), std::move(kv->holder)});
  }
  return out;
}

BackendResult<ClaimOutcome> EtcdBlockBackend::claim(std::string_view pool, std::string_view block,
                                                    std::string_view node) {
  if (!validName(pool) || !validName(block) || !validName(node)) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + ", block " + cni::quoted(block) + " and node " +
                                   cni::quoted(node) + " must be non-empty printable names without '/'"));
  }
  Call call(*this);
  return claimKey(call, blockKey(pool, block), node, {}, false);
}

BackendResult<ClaimOutcome> EtcdBlockBackend::takeOver(std::string_view pool, std::string_view block,
                                                       std::string_view node, const Holder& seen) {
  (void)seen;  // a key outlives its holder only while the holder's lease lives
  return claim(pool, block, node);
}

BackendResult<PoolDefinition> EtcdBlockBackend::definePool(std::string_view pool, const PoolDefinition& def) {
  if (!validName(pool)) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + " must be a non-empty printable name without '/'"));
  }
  Call call(*this);
  const std::string k64 = os::base64Encode(options_.prefix + "pools/" + std::string(pool) + "/definition");
  const json value{{"fingerprint", def.fingerprint}, {"origin", def.origin}};
  const json txn{
      {"compare", json::array({{{"key", k64}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}}})},
      {"success", json::array({{{"request_put", {{"key", k64}, {"value", os::base64Encode(value.dump())}}}}})},
      {"failure", json::array({{{"request_range", {{"key", k64}}}}})}};
  auto r = call.post("/v3/kv/txn", txn);
  if (!r) {
    return std::unexpected(std::move(r.error()));
  }
  if (succeeded(*r)) {
    return def;
  }
  const json range = txnResponse(*r, "response_range");
  if (!range.is_object() || !range.contains("kvs") || !range["kvs"].is_array() || range["kvs"].empty() ||
      !range["kvs"][0].is_object() || !range["kvs"][0].contains("value") || !range["kvs"][0]["value"].is_string()) {
    return std::unexpected(badAnswer(call.lastEndpoint, "failed txn without the definition's key: " + excerpt(r->dump())));
  }
  auto text = os::base64Decode(range["kvs"][0]["value"].get<std::string>());
  const json stored = text ? json::parse(*text, nullptr, false) : json();
  if (!stored.is_object() || !stored.contains("fingerprint") || !stored["fingerprint"].is_string()) {
    return std::unexpected(badAnswer(call.lastEndpoint, "pool definition of " + cni::quoted(pool) + " is not {\"fingerprint\": ...}"));
  }
  return PoolDefinition{stored["fingerprint"].get<std::string>(), stored.value("origin", std::string())};
}

BackendResult<std::vector<Claim>> EtcdBlockBackend::list(std::string_view pool) {
  if (!validName(pool)) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + " must be a non-empty printable name without '/'"));
  }
  Call call(*this);
  return listPrefix(call, blockKey(pool, ""));
}

BackendResult<ReleaseOutcome> EtcdBlockBackend::release(std::string_view pool, std::string_view block,
                                                        std::string_view node, std::string_view version) {
  if (!validName(pool) || !validName(block) || !validName(node)) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + ", block " + cni::quoted(block) + " and node " +
                                   cni::quoted(node) + " must be non-empty printable names without '/'"));
  }
  Call call(*this);
  return releaseKey(call, blockKey(pool, block), node, version);
}

BackendResult<ClaimOutcome> EtcdBlockBackend::claimAddress(std::string_view pool, std::string_view address,
                                                           std::string_view node, std::string_view owner) {
  if (!validName(pool) || !validName(address) || !validName(node) || owner.empty() || !printable(owner)) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + ", address " + cni::quoted(address) + ", node " +
                                   cni::quoted(node) + " and owner " + cni::quoted(owner) +
                                   " must be non-empty printable names (no '/' but in the owner)"));
  }
  Call call(*this);
  return claimKey(call, addressKey(pool, address), node, owner, true);
}

BackendResult<std::vector<Claim>> EtcdBlockBackend::listAddresses(std::string_view pool) {
  if (!validName(pool)) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + " must be a non-empty printable name without '/'"));
  }
  Call call(*this);
  return listPrefix(call, addressKey(pool, ""));
}

BackendResult<ReleaseOutcome> EtcdBlockBackend::releaseAddress(std::string_view pool, std::string_view address,
                                                               std::string_view node, std::string_view version) {
  if (!validName(pool) || !validName(address) || !validName(node)) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + ", address " + cni::quoted(address) + " and node " +
                                   cni::quoted(node) + " must be non-empty printable names without '/'"));
  }
  Call call(*this);
  return releaseKey(call, addressKey(pool, address), node, version);
}

BackendResult<RenewOutcome> EtcdBlockBackend::renew(std::string_view node, const std::vector<ClaimRef>& held) {
  if (!validName(node)) {
    return std::unexpected(invalid("node " + cni::quoted(node) + " must be a non-empty printable name without '/'"));
  }
  Call call(*this);
  RenewOutcome out;
  const std::int64_t lease = leaseId();
  if (lease != 0) {
    auto r = call.post("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}});
    if (!r) {
      return std::unexpected(std::move(r.error()));
    }
    // A streamed answer: {"result":{"header":...,"ID":"..","TTL":".."}}; TTL omitted (0) once
    // the lease has expired.
    const json& result = r->contains("result") ? (*r)["result"] : *r;
    const auto ttl = int64Field(result, "TTL");
    if (!ttl) {
      return std::unexpected(badAnswer(call.lastEndpoint, "keepalive answer without a readable TTL: " +
                                                              excerpt(r->dump())));
    }
    if (*ttl > 0) {
      out.renewed = true;
      out.kept = held;
      return out;
    }
  }
  // Expired (or never granted): a new lease, and every held claim claimed again on it.
  if (auto g = grantLease(call, lease); !g) {
    return std::unexpected(std::move(g.error()));
  }
  out.reestablished = true;
  for (const auto& ref : held) {
    const bool address = ref.kind == ClaimKind::kAddress;
    if (!validName(ref.pool) || !validName(ref.name) || (address && (ref.owner.empty() || !printable(ref.owner)))) {
      return std::unexpected(invalid("held claim " + cni::quoted(ref.pool) + "/" + cni::quoted(ref.name) +
                                     " is not a valid name"));
    }
    auto c = claimKey(call, address ? addressKey(ref.pool, ref.name) : blockKey(ref.pool, ref.name), node, ref.owner,
                      address);
    if (!c) {
      return std::unexpected(std::move(c.error()));
    }
    if (c->state == ClaimState::kHeldByOther) {
      out.lost.push_back(LostClaim{ref, std::move(c->holder)});
    } else {
      out.kept.push_back(ref);
    }
  }
  return out;
}

}  // namespace ibcni::ipam
