// SPDX-License-Identifier: Apache-2.0
#include "ipam/backends/k8s_api.h"

#include <time.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <utility>

#include "ipam/claims/backend_support.h"
#include "ibcni/os/file_io.h"
#include "ibcni/os/text.h"
#include "ibcni/os/time_text.h"

namespace ibcni::ipam::k8s {

namespace {

using backend::excerpt;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxTokenBytes = 64U << 10U;

bool alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool validLabelValue(std::string_view v) {
  if (v.empty()) {
    return true;
  }
  const auto an = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  return v.size() <= 63 && an(v.front()) && an(v.back()) &&
         std::all_of(v.begin(), v.end(), [&an](char c) { return an(c) || c == '-' || c == '_' || c == '.'; });
}

BackendErrc transportKind(http::ErrorKind kind) {
  switch (kind) {
    case http::ErrorKind::kUnavailable:
      return BackendErrc::kUnavailable;
    case http::ErrorKind::kInvalidRequest:
      return BackendErrc::kInvalidArgument;
    case http::ErrorKind::kTls:
      return BackendErrc::kAuth;
    case http::ErrorKind::kTimeout:
      return BackendErrc::kTimeout;
    default:
      return BackendErrc::kUnreachable;
  }
}

std::string stringAt(const json& o, const char* key) {
  return o.is_object() && o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : std::string();
}

}  // namespace

std::string Answer::message() const {
  if (doc.is_object() && doc.contains("message") && doc["message"].is_string()) {
    return doc["message"].get<std::string>();
  }
  return excerpt(body);
}

BackendError Answer::unexpected(std::string_view what) const {
  return BackendError{BackendErrc::kBadAnswer, where,
                      std::string(what) + ": HTTP " + std::to_string(status) + ": " + message(),
                      static_cast<int>(status)};
}

bool Answer::namespaceMissing() const {
  return status == 404 && doc.is_object() && doc.contains("details") && stringAt(doc["details"], "kind") == "namespaces";
}

std::string LeaseView::annotation(const char* key) const { return stringAt(annotations, key); }

bool LeaseView::lapsed(SysClock::time_point now, std::chrono::seconds fallback) const {
  const auto last = renewTime ? renewTime : acquireTime;
  const auto d = duration ? std::chrono::seconds(*duration) : fallback;
  return !last || *last + d < now;
}

Call::Call(http::HttpClient& client, const Server& server, WriteMark* writes)
    : client_(client),
      server_(server),
      writes_(writes),
      deadline_(Clock::now() + server.timeout),
      token_(server.token) {
  if (server.tokenFile.empty()) {
    return;
  }
  auto t = os::readFile(server.tokenFile, kMaxTokenBytes);
  if (!t) {
    tokenError_ = BackendError{BackendErrc::kAuth, server.url, "the bearer token file: " + t.error().describe(), 0};
    return;
  }
  token_ = *t;
  while (!token_.empty() && (token_.back() == '\n' || token_.back() == '\r' || token_.back() == ' ')) {
    token_.pop_back();
  }
}

std::string Call::leasesPath() const {
  return "/apis/coordination.k8s.io/v1/namespaces/" + server_.namespace_ + "/leases";
}

BackendResult<Answer> Call::send(http::Method method, const std::string& path, const json* body) {
  if (tokenError_) {
    return std::unexpected(*tokenError_);
  }
  const std::string url = server_.url + path;
  const std::string where = std::string(http::methodName(method)) + " " + url;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
  if (left.count() <= 0) {
    return std::unexpected(BackendError{
        BackendErrc::kTimeout, where, "not sent: the timeout of " + std::to_string(server_.timeout.count()) + " ms passed",
        0});
  }
  http::Request req;
  req.method = method;
  req.url = url;
  req.timeout = left;
  req.tls = server_.tls;
  req.headers.push_back({"Accept", "application/json"});
  req.headers.push_back({"User-Agent", "ibcni-ipam"});
  if (!token_.empty()) {
    req.headers.push_back({"Authorization", "Bearer " + token_});
  }
  if (body != nullptr) {
    req.headers.push_back({"Content-Type", "application/json"});
    req.body = body->dump();
  }
  auto r = client_.send(req);
  if (!r) {
    return std::unexpected(BackendError{transportKind(r.error().kind), where, r.error().describe(), 0});
  }
  Answer a{r->status, json::parse(r->body, nullptr, false), where, std::move(r->body)};
  if (a.doc.is_discarded()) {
    a.doc = nullptr;
  }
  const std::string what = "HTTP " + std::to_string(a.status) + ": " + a.message();
  if (a.status == 401 || a.status == 403) {
    return std::unexpected(BackendError{BackendErrc::kAuth, where, what, static_cast<int>(a.status)});
  }
  if (a.status >= 500 || a.status == 429) {
    return std::unexpected(BackendError{BackendErrc::kUnreachable, where, what, static_cast<int>(a.status)});
  }
  if (a.status >= 200 && a.status < 300 && !a.doc.is_object()) {
    return std::unexpected(BackendError{BackendErrc::kBadAnswer, where,
                                        "HTTP " + std::to_string(a.status) +
                                            " with a body that is not a JSON object: " + excerpt(a.body),
                                        static_cast<int>(a.status)});
  }
  return a;
}

namespace {

/// The Lease a 2xx answer holds, as found (getLease, createLease and putLease answer it so).
BackendResult<std::optional<LeaseView>> foundLease(const Answer& a) {
  auto v = parseLease(a);
  if (!v) {
    return std::unexpected(std::move(v.error()));
  }
  return std::optional<LeaseView>(std::move(*v));
}

}  // namespace

void WriteMark::note(const std::string& resourceVersion) {
  std::uint64_t v = 0;
  const char* last = resourceVersion.data() + resourceVersion.size();
  const auto [end, ec] = std::from_chars(resourceVersion.data(), last, v);
  const bool decimal = !resourceVersion.empty() && ec == std::errc() && end == last;
  const std::lock_guard lock(mutex_);
  opaque_ = opaque_ || !decimal;
  newest_ = std::max(newest_, v);
}

std::string WriteMark::newest() const {
  const std::lock_guard lock(mutex_);
  return opaque_ || newest_ == 0 ? std::string() : std::to_string(newest_);
}

BackendResult<std::optional<LeaseView>> Call::getLease(const std::string& name) { return readLease(name, ""); }

BackendResult<std::optional<LeaseView>> Call::getLeaseAfterWrites(const std::string& name) {
  const std::string mark = writes_ != nullptr ? writes_->newest() : std::string();
  if (!mark.empty()) {
    if (auto cached = readLease(name, "?resourceVersion=" + mark); cached) {
      return cached;
    }
  }
  return getLease(name);
}

BackendResult<std::optional<LeaseView>> Call::written(BackendResult<std::optional<LeaseView>> v) {
  if (writes_ != nullptr && v && *v) {
    writes_->note((**v).resourceVersion);
  }
  return v;
}

BackendResult<std::optional<LeaseView>> Call::readLease(const std::string& name, const std::string& query) {
  auto a = send(http::Method::kGet, leasesPath() + "/" + name + query, nullptr);
  if (!a) {
    return std::unexpected(std::move(a.error()));
  }
  if (a->status == 404) {
    return std::optional<LeaseView>();
  }
  if (a->status != 200) {
    return std::unexpected(a->unexpected("reading Lease " + name));
  }
  return foundLease(*a);
}

BackendResult<std::optional<LeaseView>> Call::createLease(const json& body) {
  auto a = send(http::Method::kPost, leasesPath(), &body);
  if (!a) {
    return std::unexpected(std::move(a.error()));
  }
  if (a->status == 409) {
    return std::optional<LeaseView>();
  }
  if (a->namespaceMissing()) {
    return std::unexpected(BackendError{BackendErrc::kInvalidArgument, a->where,
                                        "namespace " + cni::quoted(server_.namespace_) +
                                            " does not exist (ipam.cluster.kubernetes.namespace): create it, or name "
                                            "the namespace the chart's Role is in (" + a->message() + ")",
                                        404});
  }
  if (a->status != 201 && a->status != 200) {
    return std::unexpected(a->unexpected("creating a Lease"));
  }
  return written(foundLease(*a));
}

BackendResult<std::optional<LeaseView>> Call::putLease(const std::string& name, const json& body) {
  auto a = send(http::Method::kPut, leasesPath() + "/" + name, &body);
  if (!a) {
    return std::unexpected(std::move(a.error()));
  }
  if (a->status == 404 || a->status == 409) {
    return std::optional<LeaseView>();
  }
  if (a->status != 200) {
    return std::unexpected(a->unexpected("updating Lease " + name));
  }
  return written(foundLease(*a));
}

BackendResult<Call::Deleted> Call::deleteLease(const std::string& name, const std::string& uid,
                                               const std::string& resourceVersion) {
  json pre = json::object();
  if (!uid.empty()) {
    pre["uid"] = uid;
  }
  if (!resourceVersion.empty()) {
    pre["resourceVersion"] = resourceVersion;
  }
  const json opts{{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"preconditions", pre}};
  auto a = send(http::Method::kDelete, leasesPath() + "/" + name, &opts);
  if (!a) {
    return std::unexpected(std::move(a.error()));
  }
  switch (a->status) {
    case 202:
      return Deleted::kPending;
    case 404:
      return Deleted::kGone;
    case 409:
      return Deleted::kConflict;
    case 200:
      break;
    default:
      return std::unexpected(a->unexpected("deleting Lease " + name));
  }
  // kube-apiserver answers a synchronous delete with a Status, and a delete that finalizers hold
  // up with the object, its deletionTimestamp set (handlers/delete.go: 202 only with
  // orphanDependents false).
  const json& md = a->doc.contains("metadata") ? a->doc["metadata"] : json();
  const bool deleting = stringAt(a->doc, "kind") != "Status" && md.is_object() && md.contains("deletionTimestamp") &&
                        !md["deletionTimestamp"].is_null();
  return deleting ? Deleted::kPending : Deleted::kDeleted;
}

BackendResult<std::vector<LeaseView>> Call::listLeases(const std::string& selector) {
  auto a = send(http::Method::kGet, leasesPath() + "?labelSelector=" + urlEncode(selector), nullptr);
  if (!a) {
    return std::unexpected(std::move(a.error()));
  }
  if (a->status != 200) {
    return std::unexpected(a->unexpected("listing Leases"));
  }
  if (!a->doc.contains("items") || !(a->doc["items"].is_array() || a->doc["items"].is_null())) {
    return std::unexpected(BackendError{BackendErrc::kBadAnswer, a->where, "a list without items: " + excerpt(a->body), 200});
  }
  std::vector<LeaseView> out;
  if (a->doc["items"].is_null()) {
    return out;
  }
  for (const auto& item : a->doc["items"]) {
    auto v = parseLease(Answer{200, item, a->where, item.dump()});
    if (!v) {
      return std::unexpected(std::move(v.error()));
    }
    out.push_back(std::move(*v));
  }
  return out;
}

BackendResult<bool> Call::nodeExists(const std::string& name) {
  auto a = send(http::Method::kGet, "/api/v1/nodes/" + urlEncode(name), nullptr);
  if (!a) {
    return std::unexpected(std::move(a.error()));
  }
  if (a->status == 200 || a->status == 404) {
    return a->status == 200;
  }
  return std::unexpected(a->unexpected("reading Node " + name));
}

BackendResult<LeaseView> parseLease(const Answer& a) {
  const json& o = a.doc;
  const auto bad = [&a](const std::string& why) {
    return std::unexpected(BackendError{BackendErrc::kBadAnswer, a.where, "not a Lease: " + why + ": " + excerpt(a.body),
                                        static_cast<int>(a.status)});
  };
  if (!o.is_object() || !o.contains("metadata") || !o["metadata"].is_object()) {
    return bad("no metadata");
  }
  const json& md = o["metadata"];
  LeaseView v;
  v.object = o;
  v.name = stringAt(md, "name");
  v.resourceVersion = stringAt(md, "resourceVersion");
  if (v.name.empty() || v.resourceVersion.empty()) {
    return bad("metadata.name or metadata.resourceVersion missing");
  }
  v.uid = stringAt(md, "uid");
  v.creationTimestamp = stringAt(md, "creationTimestamp");
  v.deleting = md.contains("deletionTimestamp") && !md["deletionTimestamp"].is_null();
  if (md.contains("annotations") && md["annotations"].is_object()) {
    v.annotations = md["annotations"];
  }
  if (md.contains("labels") && md["labels"].is_object()) {
    v.labels = md["labels"];
  }
  if (!o.contains("spec") || !o["spec"].is_object()) {
    return v;
  }
  const json& spec = o["spec"];
  v.holderIdentity = stringAt(spec, "holderIdentity");
  if (spec.contains("leaseDurationSeconds") && spec["leaseDurationSeconds"].is_number_integer()) {
    v.duration = spec["leaseDurationSeconds"].get<std::int64_t>();
  }
  if (spec.contains("leaseTransitions") && spec["leaseTransitions"].is_number_integer()) {
    v.transitions = spec["leaseTransitions"].get<std::int64_t>();
  }
  if (auto t = stringAt(spec, "acquireTime"); !t.empty()) {
    v.acquireTime = os::parseRfc3339(t);
  }
  if (auto t = stringAt(spec, "renewTime"); !t.empty()) {
    v.renewTime = os::parseRfc3339(t);
  }
  return v;
}


std::string encodeName(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    bool literal = alnum(c) && c != 'z';
    if (c == '.' || c == '-') {
      const bool afterAlnum = !out.empty() && alnum(out.back());
      const bool beforeAlnum = i + 1 < s.size() && s[i + 1] != '.' && s[i + 1] != '-';
      literal = afterAlnum && beforeAlnum;
    }
    if (literal) {
      out += c;
    } else {
      const auto b = static_cast<unsigned char>(c);
      out += 'z';
      out += kHex[b >> 4U];
      out += kHex[b & 0xfU];
    }
  }
  return out;
}

std::string labelValue(std::string_view value) {
  if (validLabelValue(value)) {
    return std::string(value);
  }
  std::uint64_t h = 14695981039346656037ULL;  // FNV-1a
  for (const char c : value) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return "h" + os::hex64(h);
}

bool dnsLabel(std::string_view v) {
  return !v.empty() && v.size() <= 63 && alnum(v.front()) && alnum(v.back()) &&
         std::all_of(v.begin(), v.end(), [](char c) { return alnum(c) || c == '-'; });
}

std::string urlEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[b >> 4U];
      out += kHex[b & 0xfU];
    }
  }
  return out;
}

}  // namespace ibcni::ipam::k8s
