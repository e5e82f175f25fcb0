// SPDX-License-Identifier: Apache-2.0
#include "k8s_block_backend.h"

#include "backend_support.h"

#include <time.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ibcni/cni/error.h"
#include "ibcni/os/file_io.h"
#include "kubeconfig.h"

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

constexpr const char* kApiVersion = "coordination.k8s.io/v1";
constexpr const char* kLabelPool = "ibcni.io/pool";
constexpr const char* kLabelKind = "ibcni.io/kind";
constexpr const char* kLabelNode = "ibcni.io/node";
constexpr const char* kAnnPool = "ibcni.io/pool";
constexpr const char* kAnnKey = "ibcni.io/key";
constexpr const char* kAnnOwner = "ibcni.io/owner";
constexpr const char* kAnnFingerprint = "ibcni.io/fingerprint";
constexpr const char* kAnnOrigin = "ibcni.io/origin";
constexpr std::size_t kMaxTokenBytes = 64U << 10U;

bool alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

/// The name encoding of leaseName(): injective, output in [a-z0-9.-], never "--", never starting
/// or ending with '.' or '-', never ".-", "-." or "..".
std::string encodeName(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool plain = alnum(c) && c != 'z';
    bool literal = plain;
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



bool validLabelValue(std::string_view v) {
  if (v.empty()) {
    return true;
  }
  const auto an = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  return v.size() <= 63 && an(v.front()) && an(v.back()) &&
         std::all_of(v.begin(), v.end(), [&an](char c) { return an(c) || c == '-' || c == '_' || c == '.'; });
}

bool dnsLabel(std::string_view v) {
  return !v.empty() && v.size() <= 63 && alnum(v.front()) && alnum(v.back()) &&
         std::all_of(v.begin(), v.end(), [](char c) { return alnum(c) || c == '-'; });
}



/// A MicroTime: RFC 3339 UTC with exactly six fractional digits.
std::string microTime(SysClock::time_point t) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::int64_t secs = us / 1000000;
  std::int64_t frac = us % 1000000;
  if (frac < 0) {
    frac += 1000000;
    --secs;
  }
  const auto tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[48];
  const auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[64];
  std::snprintf(out, sizeof out, "%.*s.%06lldZ", static_cast<int>(n), buf, static_cast<long long>(frac));
  return out;
}

/// RFC 3339 (any fractional digits, Z or an offset).
std::optional<SysClock::time_point> parseTime(const std::string& s) {
  std::tm tm{};
  const char* p = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (p == nullptr) {
    return std::nullopt;
  }
  std::int64_t micros = 0;
  if (*p == '.') {
    ++p;
    int digits = 0;
    while (*p >= '0' && *p <= '9') {
      if (digits < 6) {
        micros = micros * 10 + (*p - '0');
      }
      ++digits;
      ++p;
    }
    for (; digits < 6; ++digits) {
      micros *= 10;
    }
  }
  std::int64_t offset = 0;
  if (*p == 'Z' || *p == 'z') {
    ++p;
  } else if ((*p == '+' || *p == '-') && std::strlen(p) == 6 && p[3] == ':') {
    const int sign = *p == '-' ? -1 : 1;
    offset = sign * (((p[1] - '0') * 10 + (p[2] - '0')) * 3600 + ((p[4] - '0') * 10 + (p[5] - '0')) * 60);
    p += 6;
  } else {
    return std::nullopt;
  }
  if (*p != '\0') {
    return std::nullopt;
  }
  return SysClock::from_time_t(timegm(&tm) - offset) + std::chrono::microseconds(micros);
}

std::string kindLabel(ClaimKind kind) { return kind == ClaimKind::kBlock ? "block" : "address"; }

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

/// A Lease as read back.
struct LeaseView {
  json object;
  std::string name;
  std::string uid;
  std::string resourceVersion;
  std::string pool;   // annotation
  std::string key;    // annotation
  std::optional<std::int64_t> duration;
  std::int64_t transitions = 0;
  Holder holder;
};

/// An answer of the API server that passed the transport and the status checks of Call::send.
struct Answer {
  long status = 0;
  json doc;
  std::string where;  // "METHOD URL"
  std::string body;

  /// The Status's message (or an excerpt of the body).
  [[nodiscard]] std::string message() const {
    if (doc.is_object() && doc.contains("message") && doc["message"].is_string()) {
      return doc["message"].get<std::string>();
    }
    return excerpt(body);
  }
  [[nodiscard]] BackendError unexpected(std::string_view what) const {
    return BackendError{BackendErrc::kBadAnswer, where,
                        std::string(what) + ": HTTP " + std::to_string(status) + ": " + message(),
                        static_cast<int>(status)};
  }
};

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
  if (!md.contains("name") || !md["name"].is_string() || !md.contains("resourceVersion") ||
      !md["resourceVersion"].is_string() || md["resourceVersion"].get<std::string>().empty()) {
    return bad("metadata.name or metadata.resourceVersion missing");
  }
  v.name = md["name"].get<std::string>();
  v.resourceVersion = md["resourceVersion"].get<std::string>();
  v.uid = md.contains("uid") && md["uid"].is_string() ? md["uid"].get<std::string>() : "";
  if (md.contains("annotations") && md["annotations"].is_object()) {
    const json& an = md["annotations"];
    const auto str = [&an](const char* k) {
      return an.contains(k) && an[k].is_string() ? an[k].get<std::string>() : std::string();
    };
    v.pool = str(kAnnPool);
    v.key = str(kAnnKey);
    v.holder.owner = str(kAnnOwner);
  }
  v.holder.version = v.resourceVersion;
  if (o.contains("spec") && o["spec"].is_object()) {
    const json& spec = o["spec"];
    if (spec.contains("holderIdentity") && spec["holderIdentity"].is_string()) {
      v.holder.node = spec["holderIdentity"].get<std::string>();
    }
    if (spec.contains("leaseDurationSeconds") && spec["leaseDurationSeconds"].is_number_integer()) {
      v.duration = spec["leaseDurationSeconds"].get<std::int64_t>();
    }
    if (spec.contains("leaseTransitions") && spec["leaseTransitions"].is_number_integer()) {
      v.transitions = spec["leaseTransitions"].get<std::int64_t>();
    }
    for (const auto& [field, out] : {std::pair{"acquireTime", &v.holder.claimedAt},
                                     std::pair{"renewTime", &v.holder.renewedAt}}) {
      if (spec.contains(field) && spec[field].is_string()) {
        *out = parseTime(spec[field].get<std::string>());
      }
    }
  }
  return v;
}

}  // namespace

struct KubernetesBlockBackend::Call {
  KubernetesBlockBackend& self;
  Clock::time_point deadline;
  std::string token;
  std::optional<BackendError> tokenError;

  explicit Call(KubernetesBlockBackend& backend)
      : self(backend), deadline(Clock::now() + backend.options_.timeout), token(backend.options_.token) {
    const auto& file = backend.options_.tokenFile;
    if (!file.empty()) {
      auto t = os::readFile(file, kMaxTokenBytes);
      if (!t) {
        tokenError = BackendError{BackendErrc::kAuth, backend.options_.server,
                                  "the bearer token file: " + t.error().describe(), 0};
      } else {
        token = *t;
        while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
          token.pop_back();
        }
      }
    }
  }

  [[nodiscard]] std::string leases() const {
    return "/apis/coordination.k8s.io/v1/namespaces/" + self.options_.namespace_ + "/leases";
  }

  /// One request; transport failures, 401/403, 429 and 5xx, and a 2xx without a JSON object
  /// are errors, any other status is the caller's to judge.
  BackendResult<Answer> send(http::Method method, const std::string& path, const json* body) {
    if (tokenError) {
      return std::unexpected(*tokenError);
    }
    const std::string url = self.options_.server + path;
    const std::string where = std::string(http::methodName(method)) + " " + url;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return std::unexpected(BackendError{BackendErrc::kTimeout, where,
                                          "not sent: the timeout of " +
                                              std::to_string(self.options_.timeout.count()) + " ms passed",
                                          0});
    }
    http::Request req;
    req.method = method;
    req.url = url;
    req.timeout = left;
    req.tls = self.options_.tls;
    req.headers.push_back({"Accept", "application/json"});
    req.headers.push_back({"User-Agent", "ibcni-ipam"});
    if (!token.empty()) {
      req.headers.push_back({"Authorization", "Bearer " + token});
    }
    if (body != nullptr) {
      req.headers.push_back({"Content-Type", "application/json"});
      req.body = body->dump();
    }
    auto r = self.client_.send(req);
    if (!r) {
      const auto& e = r.error();
      BackendErrc kind = BackendErrc::kUnreachable;
      switch (e.kind) {
        case http::ErrorKind::kUnavailable:
          kind = BackendErrc::kUnavailable;
          break;
        case http::ErrorKind::kInvalidRequest:
          kind = BackendErrc::kInvalidArgument;
          break;
        case http::ErrorKind::kTls:
          kind = BackendErrc::kAuth;
          break;
        case http::ErrorKind::kTimeout:
          kind = BackendErrc::kTimeout;
          break;
        default:
          kind = BackendErrc::kUnreachable;
          break;
      }
      return std::unexpected(BackendError{kind, where, e.describe(), 0});
    }
    Answer a;
    a.status = r->status;
    a.where = where;
    a.body = std::move(r->body);
    a.doc = json::parse(a.body, nullptr, false);
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
                                          "HTTP " + std::to_string(a.status) + " with a body that is not a JSON object: " +
                                              excerpt(a.body),
                                          static_cast<int>(a.status)});
    }
    return a;
  }

  BackendResult<Answer> getLease(const std::string& name) { return send(http::Method::kGet, leases() + "/" + name, nullptr); }

  /// A Lease read back by name: 200 (parsed, and checked to be the claim of `pool`/`key`), or
  /// std::nullopt on 404.
  BackendResult<std::optional<LeaseView>> readLease(const std::string& name, std::string_view pool,
                                                    std::string_view key) {
    auto a = getLease(name);
    if (!a) {
      return std::unexpected(std::move(a.error()));
    }
    if (a->status == 404) {
      return std::optional<LeaseView>();
    }
    if (a->status != 200) {
      return std::unexpected(a->unexpected("reading Lease " + name));
    }
    auto v = parseLease(*a);
    if (!v) {
      return std::unexpected(std::move(v.error()));
    }
    if (v->pool != pool || v->key != key) {
      return std::unexpected(BackendError{BackendErrc::kBadAnswer, a->where,
                                          "Lease " + name + " is not ibcni's claim of " + cni::quoted(key) +
                                              " in pool " + cni::quoted(pool) + " (its annotations " + kAnnPool +
                                              " and " + kAnnKey + " say " + cni::quoted(v->pool) + ", " +
                                              cni::quoted(v->key) + ")",
                                          0});
    }
    return std::optional<LeaseView>(std::move(*v));
  }

  [[nodiscard]] json newLease(ClaimKind kind, const std::string& name, std::string_view pool, std::string_view key,
                              std::string_view node, std::string_view owner, SysClock::time_point now) const {
    json annotations{{kAnnPool, pool}, {kAnnKey, key}};
    if (kind == ClaimKind::kAddress) {
      annotations[kAnnOwner] = owner;
    }
    const std::string t = microTime(now);
    return json{{"apiVersion", kApiVersion},
                {"kind", "Lease"},
                {"metadata",
                 {{"name", name},
                  {"namespace", self.options_.namespace_},
                  {"labels",
                   {{kLabelPool, labelValue(pool)}, {kLabelKind, kindLabel(kind)}, {kLabelNode, labelValue(node)}}},
                  {"annotations", annotations}}},
                {"spec",
                 {{"holderIdentity", node},
                  {"leaseDurationSeconds", self.options_.leaseDuration.count()},
                  {"acquireTime", t},
                  {"renewTime", t},
                  {"leaseTransitions", 0}}}};
  }

  /// The body of an update of `v`: its metadata (name, namespace, resourceVersion, uid, labels,
  /// annotations) and spec, for the caller to change.
  [[nodiscard]] json updateOf(const LeaseView& v) const {
    json md{{"name", v.name}, {"namespace", self.options_.namespace_}, {"resourceVersion", v.resourceVersion}};
    const json& old = v.object["metadata"];
    for (const char* k : {"uid", "labels", "annotations"}) {
      if (old.contains(k)) {
        md[k] = old[k];
      }
    }
    json spec = v.object.contains("spec") && v.object["spec"].is_object() ? v.object["spec"] : json::object();
    return json{{"apiVersion", kApiVersion}, {"kind", "Lease"}, {"metadata", md}, {"spec", spec}};
  }

  static bool ours(const Holder& h, ClaimKind kind, std::string_view node, std::string_view owner) {
    return h.node == node && (kind == ClaimKind::kBlock || h.owner == owner);
  }

  BackendResult<ClaimOutcome> claimLease(ClaimKind kind, std::string_view pool, std::string_view key,
                                         std::string_view node, std::string_view owner) {
    const std::string name = leaseName(kind, pool, key);
    if (name.empty()) {
      return std::unexpected(invalid("the Lease name of " + cni::quoted(key) + " in pool " + cni::quoted(pool) +
                                     " would be longer than 253 characters"));
    }
    for (int attempt = 0; attempt < 4; ++attempt) {
      const json body = newLease(kind, name, pool, key, node, owner, SysClock::now());
      auto a = send(http::Method::kPost, leases(), &body);
      if (!a) {
        return std::unexpected(std::move(a.error()));
      }
      if (a->status == 201 || a->status == 200) {
        auto v = parseLease(*a);
        if (!v) {
          return std::unexpected(std::move(v.error()));
        }
        return ClaimOutcome{ClaimState::kClaimed, std::move(v->holder)};
      }
      if (a->status != 409) {
        return std::unexpected(a->unexpected("creating Lease " + name));
      }
      auto cur = readLease(name, pool, key);
      if (!cur) {
        return std::unexpected(std::move(cur.error()));
      }
      if (!*cur) {
        continue;  // deleted in between: create again
      }
      auto& v = **cur;
      return ClaimOutcome{ours(v.holder, kind, node, owner) ? ClaimState::kAdopted : ClaimState::kHeldByOther,
                          std::move(v.holder)};
    }
    return std::unexpected(BackendError{BackendErrc::kBadAnswer, self.options_.server,
                                        "Lease " + name + " kept appearing and disappearing during the claim", 0});
  }

  BackendResult<ReleaseOutcome> releaseLease(ClaimKind kind, std::string_view pool, std::string_view key,
                                             std::string_view node, std::string_view version) {
    const std::string name = leaseName(kind, pool, key);
    if (name.empty()) {
      return ReleaseOutcome::kGone;  // never created
    }
    auto cur = readLease(name, pool, key);
    if (!cur) {
      return std::unexpected(std::move(cur.error()));
    }
    if (!*cur) {
      return ReleaseOutcome::kGone;
    }
    if ((*cur)->holder.node != node) {
      return ReleaseOutcome::kNotOurs;
    }
    if ((*cur)->resourceVersion != version) {
      return ReleaseOutcome::kChanged;
    }
    json pre{{"resourceVersion", std::string(version)}};
    if (!(*cur)->uid.empty()) {
      pre["uid"] = (*cur)->uid;
    }
    const json opts{{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"preconditions", pre}};
    auto a = send(http::Method::kDelete, leases() + "/" + name, &opts);
    if (!a) {
      return std::unexpected(std::move(a.error()));
    }
    if (a->status == 200 || a->status == 202) {
      return ReleaseOutcome::kReleased;
    }
    if (a->status == 404) {
      return ReleaseOutcome::kGone;
    }
    if (a->status != 409) {
      return std::unexpected(a->unexpected("deleting Lease " + name));
    }
    auto again = readLease(name, pool, key);
    if (!again) {
      return std::unexpected(std::move(again.error()));
    }
    if (!*again) {
      return ReleaseOutcome::kGone;
    }
    return (*again)->holder.node == node ? ReleaseOutcome::kChanged : ReleaseOutcome::kNotOurs;
  }

  BackendResult<std::vector<Claim>> listLeases(ClaimKind kind, std::string_view pool,
                                               std::optional<std::string_view> node) {
    std::string selector = std::string(kLabelPool) + "=" + labelValue(pool) + "," + kLabelKind + "=" + kindLabel(kind);
    if (node) {
      selector += std::string(",") + kLabelNode + "=" + labelValue(*node);
    }
    auto a = send(http::Method::kGet, leases() + "?labelSelector=" + urlEncode(selector), nullptr);
    if (!a) {
      return std::unexpected(std::move(a.error()));
    }
    if (a->status != 200) {
      return std::unexpected(a->unexpected("listing Leases"));
    }
    if (!a->doc.contains("items") || !(a->doc["items"].is_array() || a->doc["items"].is_null())) {
      return std::unexpected(BackendError{BackendErrc::kBadAnswer, a->where,
                                          "a list without items: " + excerpt(a->body), 200});
    }
    std::vector<Claim> out;
    if (a->doc["items"].is_null()) {
      return out;
    }
    for (const auto& item : a->doc["items"]) {
      Answer one{200, item, a->where, item.dump()};
      auto v = parseLease(one);
      if (!v) {
        return std::unexpected(std::move(v.error()));
      }
      if (v->pool != pool || (node && v->holder.node != *node)) {
        continue;  // a label value's hash shared with another pool or node
      }
      if (v->key.empty()) {
        return std::unexpected(BackendError{BackendErrc::kBadAnswer, a->where,
                                            "Lease " + v->name + " has ibcni's labels but no " + kAnnKey + " annotation",
                                            0});
      }
      out.push_back(Claim{std::move(v->key), std::move(v->holder)});
    }
    std::sort(out.begin(), out.end(), [](const Claim& x, const Claim& y) { return x.name < y.name; });
    return out;
  }

  /// PUT of `body` (an update of Lease `name`); the answer as is for 200/404/409.
  BackendResult<Answer> put(const std::string& name, const json& body) {
    auto a = send(http::Method::kPut, leases() + "/" + name, &body);
    if (!a) {
      return std::unexpected(std::move(a.error()));
    }
    if (a->status != 200 && a->status != 404 && a->status != 409) {
      return std::unexpected(a->unexpected("updating Lease " + name));
    }
    return a;
  }
};

KubernetesBlockBackend::KubernetesBlockBackend(http::HttpClient& client, Options options)
    : client_(client), options_(std::move(options)) {}

cni::Result<KubernetesBlockBackend::Options> KubernetesBlockBackend::optionsFor(const config::ClusterConf& cluster) {
  auto kc = loadKubeconfig(cluster.kubernetes.kubeconfig, cluster.kubernetes.context);
  if (!kc) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     "ipam.cluster.kubernetes.kubeconfig: " + kc.error().describe() +
                         "; the DaemonSet's installer writes " + std::string(config::kDefaultKubeconfig) +
                         " (README \"IPAM\")");
  }
  Options o = optionsFrom(*kc);
  o.namespace_ = cluster.kubernetes.leaseNamespace;
  o.timeout = cluster.timeout;
  o.leaseDuration = cluster.leaseDuration;
  if (auto v = validate(o); !v) {
    return std::unexpected(toCniError(v.error(), "ipam.cluster.kubernetes (kubeconfig " + cluster.kubernetes.kubeconfig + ")"));
  }
  return o;
}

KubernetesBlockBackend::Options KubernetesBlockBackend::optionsFrom(const Kubeconfig& kubeconfig) {
  Options o;
  o.server = kubeconfig.server;
  o.tls = kubeconfig.tls;
  o.token = kubeconfig.token;
  o.tokenFile = kubeconfig.tokenFile;
  return o;
}

BackendResult<void> KubernetesBlockBackend::validate(const Options& options) {
  const auto& s = options.server;
  const bool scheme = s.starts_with("http://") || s.starts_with("https://");
  if (!scheme || s.size() <= s.find("://") + 3 || !printable(s) || s.find(' ') != std::string::npos ||
      s.ends_with("/")) {
    return std::unexpected(invalid("Kubernetes API server " + cni::quoted(s) +
                                   " is not \"https://host:port\" (no trailing '/')"));
  }
  if (!dnsLabel(options.namespace_)) {
    return std::unexpected(invalid("namespace " + cni::quoted(options.namespace_) +
                                   " is not a DNS-1123 label (lower case letters, digits, '-')"));
  }
  if (options.timeout.count() <= 0 || options.leaseDuration.count() <= 0) {
    return std::unexpected(invalid("timeout and lease duration must be positive"));
  }
  return {};
}

std::string KubernetesBlockBackend::leaseName(ClaimKind kind, std::string_view pool, std::string_view name) {
  std::string out =
      "ibcni-" + encodeName(pool) + (kind == ClaimKind::kBlock ? "--b--" : "--a--") + encodeName(name);
  return out.size() <= 253 ? out : std::string();
}

std::string KubernetesBlockBackend::poolLeaseName(std::string_view pool) {
  std::string out = "ibcni-" + encodeName(pool) + "--pool";
  return out.size() <= 253 ? out : std::string();
}

std::string KubernetesBlockBackend::labelValue(std::string_view value) {
  if (validLabelValue(value)) {
    return std::string(value);
  }
  std::uint64_t h = 14695981039346656037ULL;  // FNV-1a
  for (const char c : value) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  char buf[24];
  std::snprintf(buf, sizeof buf, "h%016llx", static_cast<unsigned long long>(h));
  return buf;
}

BackendResult<ClaimOutcome> KubernetesBlockBackend::claim(std::string_view pool, std::string_view block,
                                                          std::string_view node) {
  if (!validName(pool) || !validName(block) || !validName(node)) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + ", block " + cni::quoted(block) + " and node " +
                                   cni::quoted(node) + " must be non-empty printable names without '/'"));
  }
  Call call(*this);
  return call.claimLease(ClaimKind::kBlock, pool, block, node, {});
}

BackendResult<std::vector<Claim>> KubernetesBlockBackend::list(std::string_view pool) {
  if (!validName(pool)) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + " must be a non-empty printable name without '/'"));
  }
  Call call(*this);
  return call.listLeases(ClaimKind::kBlock, pool, std::nullopt);
}

BackendResult<std::vector<Claim>> KubernetesBlockBackend::listNode(std::string_view pool, std::string_view node) {
  if (!validName(pool) || !validName(node)) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + " and node " + cni::quoted(node) +
                                   " must be non-empty printable names without '/'"));
  }
  Call call(*this);
  return call.listLeases(ClaimKind::kBlock, pool, node);
}

BackendResult<ReleaseOutcome> KubernetesBlockBackend::release(std::string_view pool, std::string_view block,
                                                              std::string_view node, std::string_view version) {
  if (!validName(pool) || !validName(block) || !validName(node) || version.empty()) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + ", block " + cni::quoted(block) + ", node " +
                                   cni::quoted(node) + " and version " + cni::quoted(version) +
                                   " must be non-empty printable names without '/'"));
  }
  Call call(*this);
  return call.releaseLease(ClaimKind::kBlock, pool, block, node, version);
}

BackendResult<ClaimOutcome> KubernetesBlockBackend::claimAddress(std::string_view pool, std::string_view address,
                                                                 std::string_view node, std::string_view owner) {
  if (!validName(pool) || !validName(address) || !validName(node) || owner.empty() || !printable(owner)) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + ", address " + cni::quoted(address) + ", node " +
                                   cni::quoted(node) + " and owner " + cni::quoted(owner) +
                                   " must be non-empty printable names (no '/' but in the owner)"));
  }
  Call call(*this);
  return call.claimLease(ClaimKind::kAddress, pool, address, node, owner);
}

BackendResult<std::vector<Claim>> KubernetesBlockBackend::listAddresses(std::string_view pool) {
  if (!validName(pool)) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + " must be a non-empty printable name without '/'"));
  }
  Call call(*this);
  return call.listLeases(ClaimKind::kAddress, pool, std::nullopt);
}

BackendResult<ReleaseOutcome> KubernetesBlockBackend::releaseAddress(std::string_view pool, std::string_view address,
                                                                     std::string_view node, std::string_view version) {
  if (!validName(pool) || !validName(address) || !validName(node) || version.empty()) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + ", address " + cni::quoted(address) + ", node " +
                                   cni::quoted(node) + " and version " + cni::quoted(version) +
                                   " must be non-empty printable names without '/'"));
  }
  Call call(*this);
  return call.releaseLease(ClaimKind::kAddress, pool, address, node, version);
}

BackendResult<RenewOutcome> KubernetesBlockBackend::renew(std::string_view node, const std::vector<ClaimRef>& held) {
  if (!validName(node)) {
    return std::unexpected(invalid("node " + cni::quoted(node) + " must be a non-empty printable name without '/'"));
  }
  for (const auto& ref : held) {
    const bool address = ref.kind == ClaimKind::kAddress;
    if (!validName(ref.pool) || !validName(ref.name) || (address && (ref.owner.empty() || !printable(ref.owner)))) {
      return std::unexpected(invalid("held claim " + cni::quoted(ref.pool) + "/" + cni::quoted(ref.name) +
                                     " is not a valid name"));
    }
  }
  Call call(*this);
  RenewOutcome out;
  for (const auto& ref : held) {
    const std::string name = leaseName(ref.kind, ref.pool, ref.name);
    bool done = false;
    for (int attempt = 0; attempt < 3 && !done; ++attempt) {
      auto cur = call.readLease(name, ref.pool, ref.name);
      if (!cur) {
        return std::unexpected(std::move(cur.error()));
      }
      if (!*cur) {
        // Expired and deleted (or never made): claim it again.
        auto c = call.claimLease(ref.kind, ref.pool, ref.name, node, ref.owner);
        if (!c) {
          return std::unexpected(std::move(c.error()));
        }
        if (c->state == ClaimState::kHeldByOther) {
          out.lost.push_back(LostClaim{ref, std::move(c->holder)});
        } else {
          out.reestablished = true;
          out.kept.push_back(ref);
        }
        done = true;
        break;
      }
      const LeaseView& v = **cur;
      if (!Call::ours(v.holder, ref.kind, node, ref.owner)) {
        out.lost.push_back(LostClaim{ref, v.holder});
        done = true;
        break;
      }
      json body = call.updateOf(v);
      body["spec"]["renewTime"] = microTime(SysClock::now());
      body["spec"]["leaseDurationSeconds"] = options_.leaseDuration.count();
      auto a = call.put(name, body);
      if (!a) {
        return std::unexpected(std::move(a.error()));
      }
      if (a->status == 200) {
        out.kept.push_back(ref);
        done = true;
      }
      // 404 or 409: changed meanwhile; read again.
    }
    if (!done) {
      return std::unexpected(BackendError{BackendErrc::kBadAnswer, options_.server,
                                          "Lease " + name + " kept changing during its renewal", 0});
    }
  }
  out.renewed = out.lost.empty() && !out.reestablished;
  return out;
}

BackendResult<PoolDefinition> KubernetesBlockBackend::definePool(std::string_view pool, const PoolDefinition& def) {
  if (!validName(pool)) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + " must be a non-empty printable name without '/'"));
  }
  const std::string name = poolLeaseName(pool);
  if (name.empty()) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + ": its Lease name would pass 253 characters"));
  }
  Call call(*this);
  for (int attempt = 0; attempt < 4; ++attempt) {
    const json body{
        {"apiVersion", kApiVersion},
        {"kind", "Lease"},
        {"metadata",
         {{"name", name},
          {"namespace", options_.namespace_},
          {"labels", {{kLabelPool, labelValue(pool)}, {kLabelKind, "pool"}}},
          {"annotations", {{kAnnPool, pool}, {kAnnFingerprint, def.fingerprint}, {kAnnOrigin, def.origin}}}}},
        {"spec", {{"acquireTime", microTime(SysClock::now())}}}};
    auto a = call.send(http::Method::kPost, call.leases(), &body);
    if (!a) {
      return std::unexpected(std::move(a.error()));
    }
    if (a->status == 201 || a->status == 200) {
      return def;
    }
    if (a->status != 409) {
      return std::unexpected(a->unexpected("creating Lease " + name));
    }
    auto g = call.getLease(name);
    if (!g) {
      return std::unexpected(std::move(g.error()));
    }
    if (g->status == 404) {
      continue;
    }
    if (g->status != 200) {
      return std::unexpected(g->unexpected("reading Lease " + name));
    }
    const json& md = g->doc.contains("metadata") ? g->doc["metadata"] : json();
    const json an = md.is_object() && md.contains("annotations") ? md["annotations"] : json();
    if (!an.is_object() || !an.contains(kAnnFingerprint) || !an[kAnnFingerprint].is_string() ||
        !an.contains(kAnnPool) || an[kAnnPool] != pool) {
      return std::unexpected(BackendError{BackendErrc::kBadAnswer, g->where,
                                          "Lease " + name + " is not the definition of pool " + cni::quoted(pool) +
                                              " (no " + kAnnFingerprint + " annotation)",
                                          0});
    }
    return PoolDefinition{an[kAnnFingerprint].get<std::string>(),
                          an.contains(kAnnOrigin) && an[kAnnOrigin].is_string() ? an[kAnnOrigin].get<std::string>()
                                                                                 : std::string()};
  }
  return std::unexpected(BackendError{BackendErrc::kBadAnswer, options_.server,
                                      "Lease " + name + " kept appearing and disappearing", 0});
}

BackendResult<ClaimOutcome> KubernetesBlockBackend::takeOver(std::string_view pool, std::string_view block,
                                                             std::string_view node, const Holder& seen) {
  if (!validName(pool) || !validName(block) || !validName(node) || seen.version.empty()) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + ", block " + cni::quoted(block) + ", node " +
                                   cni::quoted(node) + " and the seen version " + cni::quoted(seen.version) +
                                   " must be non-empty printable names without '/'"));
  }
  const std::string name = leaseName(ClaimKind::kBlock, pool, block);
  Call call(*this);
  auto cur = call.readLease(name, pool, block);
  if (!cur) {
    return std::unexpected(std::move(cur.error()));
  }
  if (!*cur) {
    return call.claimLease(ClaimKind::kBlock, pool, block, node, {});  // released meanwhile: free
  }
  LeaseView& v = **cur;
  if (v.holder.node == node) {
    return ClaimOutcome{ClaimState::kAdopted, std::move(v.holder)};
  }
  if (v.resourceVersion != seen.version) {
    return ClaimOutcome{ClaimState::kHeldByOther, std::move(v.holder)};  // renewed or taken meanwhile
  }
  // Expired: its last renewal (or its acquisition) is older than its duration.
  const auto last = v.holder.renewedAt ? v.holder.renewedAt : v.holder.claimedAt;
  const std::int64_t duration = v.duration.value_or(options_.leaseDuration.count());
  if (!last || *last + std::chrono::seconds(duration) >= SysClock::now()) {
    return ClaimOutcome{ClaimState::kHeldByOther, std::move(v.holder)};
  }
  // Gone: its Node object no longer exists.
  auto n = call.send(http::Method::kGet, "/api/v1/nodes/" + urlEncode(v.holder.node), nullptr);
  if (!n) {
    return std::unexpected(std::move(n.error()));
  }
  if (n->status == 200) {
    return ClaimOutcome{ClaimState::kHeldByOther, std::move(v.holder)};
  }
  if (n->status != 404) {
    return std::unexpected(n->unexpected("reading Node " + v.holder.node));
  }
  json body = call.updateOf(v);
  const std::string t = microTime(SysClock::now());
  body["metadata"]["resourceVersion"] = seen.version;
  if (!body["metadata"].contains("labels") || !body["metadata"]["labels"].is_object()) {
    body["metadata"]["labels"] = json::object();
  }
  body["metadata"]["labels"][kLabelPool] = labelValue(pool);
  body["metadata"]["labels"][kLabelKind] = "block";
  body["metadata"]["labels"][kLabelNode] = labelValue(node);
  body["spec"]["holderIdentity"] = node;
  body["spec"]["acquireTime"] = t;
  body["spec"]["renewTime"] = t;
  body["spec"]["leaseDurationSeconds"] = options_.leaseDuration.count();
  body["spec"]["leaseTransitions"] = v.transitions + 1;
  auto a = call.put(name, body);
  if (!a) {
    return std::unexpected(std::move(a.error()));
  }
  if (a->status == 200) {
    auto taken = parseLease(*a);
    if (!taken) {
      return std::unexpected(std::move(taken.error()));
    }
    return ClaimOutcome{ClaimState::kClaimed, std::move(taken->holder)};
  }
  // 409 (another taker, or a late renewal) or 404 (released): who holds it now.
  auto again = call.readLease(name, pool, block);
  if (!again) {
    return std::unexpected(std::move(again.error()));
  }
  if (!*again) {
    return call.claimLease(ClaimKind::kBlock, pool, block, node, {});
  }
  const bool mine = (*again)->holder.node == node;
  return ClaimOutcome{mine ? ClaimState::kAdopted : ClaimState::kHeldByOther, std::move((*again)->holder)};
}

}  // namespace ibcni::ipam
