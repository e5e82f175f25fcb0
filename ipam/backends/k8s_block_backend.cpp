// SPDX-License-Identifier: Apache-2.0
#include "ipam/backends/k8s_block_backend.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipam/backends/backend_support.h"
#include "ipam/backends/k8s_api.h"
#include "ipam/backends/kubeconfig.h"
#include "ibcni/os/time_text.h"

namespace ibcni::ipam {

namespace {

using backend::checkNames;
using backend::invalid;
using backend::ours;
using backend::printable;
using k8s::json;
using k8s::LeaseView;
using k8s::SysClock;

constexpr const char* kApiVersion = "coordination.k8s.io/v1";
constexpr const char* kLabelPool = "ibcni.io/pool";
constexpr const char* kLabelKind = "ibcni.io/kind";
constexpr const char* kLabelNode = "ibcni.io/node";
constexpr const char* kAnnPool = "ibcni.io/pool";
constexpr const char* kAnnKey = "ibcni.io/key";
constexpr const char* kAnnOwner = "ibcni.io/owner";
constexpr const char* kAnnPod = "ibcni.io/pod";
constexpr const char* kAnnLender = "ibcni.io/lender";
constexpr const char* kAnnDefinition = "ibcni.io/definition";
constexpr const char* kAnnOrigin = "ibcni.io/origin";
constexpr const char* kAnnWanted = "ibcni.io/wanted";
constexpr const char* kAnnClosed = "ibcni.io/closed";
constexpr const char* kAnnPools = "ibcni.io/pools";
constexpr const char* kRegistryLease = "ibcni-pool-registry";

/// Round trips a changed Lease gets before the call gives up.
constexpr int kAttempts = 4;

std::string kindLabel(ClaimKind kind) { return std::string(claimKindName(kind)); }

json claimAnnotations(std::string_view pool, std::string_view key, const ClaimAttrs& attrs) {
  json an{{kAnnPool, pool}, {kAnnKey, key}};
  for (auto [k, v] : {std::pair{kAnnOwner, &attrs.owner}, std::pair{kAnnPod, &attrs.pod},
                      std::pair{kAnnLender, &attrs.lender}}) {
    if (!v->empty()) {
      an[k] = *v;
    }
  }
  return an;
}

json labels(std::string_view pool, const std::string& kind, std::string_view node) {
  json l{{kLabelPool, KubernetesBlockBackend::labelValue(pool)}, {kLabelKind, kind}};
  if (!node.empty()) {
    l[kLabelNode] = KubernetesBlockBackend::labelValue(node);
  }
  return l;
}

/// The body of a new Lease held by `node`.
json newLease(const std::string& name, const std::string& ns, json lbls, json annotations, std::string_view node,
              std::chrono::seconds duration) {
  const std::string t = os::rfc3339Micros(SysClock::now());
  json spec{{"acquireTime", t}, {"renewTime", t}, {"leaseTransitions", 0}, {"leaseDurationSeconds", duration.count()}};
  if (!node.empty()) {
    spec["holderIdentity"] = node;
  }
  return json{{"apiVersion", kApiVersion},
              {"kind", "Lease"},
              {"metadata", {{"name", name}, {"namespace", ns}, {"labels", std::move(lbls)}, {"annotations", annotations}}},
              {"spec", std::move(spec)}};
}

/// The body of an update of `v`: its metadata (name, namespace, resourceVersion, uid, labels,
/// annotations) and spec, for the caller to change.
json updateOf(const LeaseView& v, const std::string& ns) {
  json md{{"name", v.name}, {"namespace", ns}, {"resourceVersion", v.resourceVersion}};
  const json& old = v.object["metadata"];
  for (const char* k : {"uid", "labels", "annotations", "finalizers"}) {
    if (old.contains(k)) {
      md[k] = old[k];
    }
  }
  json spec = v.object.contains("spec") && v.object["spec"].is_object() ? v.object["spec"] : json::object();
  return json{{"apiVersion", kApiVersion}, {"kind", "Lease"}, {"metadata", md}, {"spec", spec}};
}

Holder holderOf(const LeaseView& v, std::chrono::seconds fallback) {
  Holder h;
  h.node = v.holderIdentity;
  h.attrs = ClaimAttrs{v.annotation(kAnnOwner), v.annotation(kAnnPod), v.annotation(kAnnLender)};
  h.identity = v.uid;
  h.version = v.resourceVersion;
  h.claimedAt = v.acquireTime;
  h.renewedAt = v.renewTime;
  h.lapsed = v.lapsed(SysClock::now(), fallback);
  h.deleting = v.deleting;
  return h;
}

/// A Lease read by name must be ibcni's claim of `key` in `pool`.
BackendResult<void> isClaimOf(const LeaseView& v, std::string_view pool, std::string_view key,
                              const k8s::Call& call) {
  if (v.annotation(kAnnPool) == pool && v.annotation(kAnnKey) == key) {
    return {};
  }
  return std::unexpected(BackendError{BackendErrc::kBadAnswer, call.server().url,
                                      "Lease " + v.name + " is not ibcni's claim of " + cni::quoted(key) +
                                          " in pool " + cni::quoted(pool) + " (its annotations " + kAnnPool + " and " +
                                          kAnnKey + " say " + cni::quoted(v.annotation(kAnnPool)) + ", " +
                                          cni::quoted(v.annotation(kAnnKey)) + ")",
                                      0});
}

ReleaseOutcome outcomeOf(k8s::Call::Deleted d) {
  switch (d) {
    case k8s::Call::Deleted::kDeleted:
      return ReleaseOutcome::kReleased;
    case k8s::Call::Deleted::kPending:
      return ReleaseOutcome::kPending;
    default:
      return ReleaseOutcome::kGone;
  }
}

BackendError changing(const std::string& name, const k8s::Call& call) {
  return BackendError{BackendErrc::kBadAnswer, call.server().url, "Lease " + name + " kept changing", 0};
}

}  // namespace

KubernetesBlockBackend::KubernetesBlockBackend(http::HttpClient& client, Options options)
    : options_(std::move(options)), client_(client) {}

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
  if (!k8s::dnsLabel(options.namespace_)) {
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
      "ibcni-" + k8s::encodeName(pool) + (kind == ClaimKind::kBlock ? "--b--" : "--a--") + k8s::encodeName(name);
  return out.size() <= 253 ? out : std::string();
}

std::string KubernetesBlockBackend::poolLeaseName(std::string_view pool) {
  std::string out = "ibcni-" + k8s::encodeName(pool) + "--pool";
  return out.size() <= 253 ? out : std::string();
}

std::string KubernetesBlockBackend::demandLeaseName(std::string_view pool, std::string_view node) {
  std::string out = "ibcni-" + k8s::encodeName(pool) + "--d--" + k8s::encodeName(node);
  return out.size() <= 253 ? out : std::string();
}

std::string KubernetesBlockBackend::labelValue(std::string_view value) { return k8s::labelValue(value); }

namespace {

/// One call's state: the server (built from the options) and the requests.
struct LeaseSession {
  k8s::Server server;
  k8s::Call call;
  explicit LeaseSession(http::HttpClient& client, const KubernetesBlockBackend::Options& o)
      : server{o.server, o.namespace_, o.tls, o.token, o.tokenFile, o.timeout}, call(client, server) {}
  LeaseSession(const LeaseSession&) = delete;
  LeaseSession& operator=(const LeaseSession&) = delete;
};

BackendResult<std::string> nameOf(ClaimKind kind, std::string_view pool, std::string_view key) {
  std::string name = KubernetesBlockBackend::leaseName(kind, pool, key);
  if (name.empty()) {
    return std::unexpected(invalid("the Lease name of " + cni::quoted(key) + " in pool " + cni::quoted(pool) +
                                   " would be longer than 253 characters"));
  }
  return name;
}

/// The claim `name` read back and checked to be ibcni's claim of `key`; nullopt when absent.
BackendResult<std::optional<LeaseView>> readClaim(k8s::Call& call, const std::string& name, std::string_view pool,
                                                  std::string_view key) {
  auto v = call.getLease(name);
  if (!v || !*v) {
    return v;
  }
  if (auto c = isClaimOf(**v, pool, key, call); !c) {
    return std::unexpected(c.error());
  }
  return v;
}

}  // namespace

namespace {

/// claim() within the call `call` (and its deadline); `name` is the Lease's.
BackendResult<ClaimOutcome> claimWith(k8s::Call& call, const KubernetesBlockBackend::Options& o, ClaimKind kind,
                                      std::string_view pool, std::string_view key, const std::string& name,
                                      std::string_view node, const ClaimAttrs& attrs) {
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    auto created = call.createLease(newLease(name, o.namespace_, labels(pool, kindLabel(kind), node),
                                             claimAnnotations(pool, key, attrs), node, o.leaseDuration));
    if (!created) {
      return std::unexpected(created.error());
    }
    if (*created) {
      return ClaimOutcome{ClaimState::kClaimed, holderOf(**created, o.leaseDuration)};
    }
    auto cur = readClaim(call, name, pool, key);
    if (!cur) {
      return std::unexpected(cur.error());
    }
    if (!*cur) {
      continue;  // deleted in between: create again
    }
    Holder h = holderOf(**cur, o.leaseDuration);
    if (!ours(kind, h, node, attrs) || h.deleting) {
      return ClaimOutcome{ClaimState::kHeldByOther, std::move(h)};
    }
    if (kind == ClaimKind::kBlock || h.attrs == attrs) {
      return ClaimOutcome{ClaimState::kAdopted, std::move(h)};
    }
    // The same pod's address for its new attachment: the owner rewritten on the version read.
    json body = updateOf(**cur, o.namespace_);
    body["metadata"]["annotations"] = claimAnnotations(pool, key, attrs);
    auto put = call.putLease(name, body);
    if (!put) {
      return std::unexpected(put.error());
    }
    if (*put) {
      return ClaimOutcome{ClaimState::kAdopted, holderOf(**put, o.leaseDuration)};
    }
  }
  return std::unexpected(changing(name, call));
}

}  // namespace

BackendResult<ClaimOutcome> KubernetesBlockBackend::claim(ClaimKind kind, std::string_view pool, std::string_view key,
                                                          std::string_view node, const ClaimAttrs& attrs) {
  if (auto v = checkNames({pool, key, node}); !v) {
    return std::unexpected(v.error());
  }
  auto name = nameOf(kind, pool, key);
  if (!name) {
    return std::unexpected(name.error());
  }
  LeaseSession s(client_, options_);
  return claimWith(s.call, options_, kind, pool, key, *name, node, attrs);
}

BackendResult<std::vector<Claim>> KubernetesBlockBackend::list(ClaimKind kind, std::string_view pool,
                                                               std::optional<std::string_view> node) {
  if (auto v = checkNames({pool}); !v) {
    return std::unexpected(v.error());
  }
  LeaseSession s(client_, options_);
  std::string selector = std::string(kLabelPool) + "=" + labelValue(pool) + "," + kLabelKind + "=" + kindLabel(kind);
  if (node) {
    selector += std::string(",") + kLabelNode + "=" + labelValue(*node);
  }
  auto leases = s.call.listLeases(selector);
  if (!leases) {
    return std::unexpected(leases.error());
  }
  std::vector<Claim> out;
  for (const auto& v : *leases) {
    if (v.annotation(kAnnPool) != pool || (node && v.holderIdentity != *node)) {
      continue;  // a label value's hash shared with another pool or node
    }
    if (v.annotation(kAnnKey).empty()) {
      return std::unexpected(BackendError{BackendErrc::kBadAnswer, options_.server,
                                          "Lease " + v.name + " has ibcni's labels but no " + kAnnKey + " annotation",
                                          0});
    }
    out.push_back(Claim{kind, v.annotation(kAnnKey), holderOf(v, options_.leaseDuration)});
  }
  std::sort(out.begin(), out.end(), [](const Claim& x, const Claim& y) { return x.name < y.name; });
  return out;
}

BackendResult<ReleaseOutcome> KubernetesBlockBackend::release(ClaimKind kind, std::string_view pool,
                                                              std::string_view key, std::string_view node,
                                                              std::string_view owner) {
  if (auto v = checkNames({pool, key, node}); !v) {
    return std::unexpected(v.error());
  }
  auto name = nameOf(kind, pool, key);
  if (!name) {
    return ReleaseOutcome::kGone;  // never created
  }
  LeaseSession s(client_, options_);
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    auto cur = readClaim(s.call, *name, pool, key);
    if (!cur) {
      return std::unexpected(cur.error());
    }
    if (!*cur) {
      return ReleaseOutcome::kGone;
    }
    const LeaseView& v = **cur;
    if (v.holderIdentity != node || (!owner.empty() && v.annotation(kAnnOwner) != owner)) {
      return ReleaseOutcome::kNotOurs;
    }
    if (v.deleting) {
      return ReleaseOutcome::kPending;
    }
    auto status = s.call.deleteLease(*name, v.uid, v.resourceVersion);
    if (!status) {
      return std::unexpected(status.error());
    }
    if (*status != k8s::Call::Deleted::kConflict) {
      return outcomeOf(*status);
    }
    // 409: changed since read; read again.
  }
  return std::unexpected(changing(*name, s.call));
}

BackendResult<RenewOutcome> KubernetesBlockBackend::renew(std::string_view node, std::string_view pool,
                                                          const std::vector<HeldClaim>& held) {
  if (auto v = checkNames({pool, node}); !v) {
    return std::unexpected(v.error());
  }
  for (const auto& ref : held) {
    if (auto v = checkNames({ref.name}); !v) {
      return std::unexpected(v.error());
    }
  }
  LeaseSession s(client_, options_);
  RenewOutcome out;
  for (const auto& ref : held) {
    auto name = nameOf(ref.kind, pool, ref.name);
    if (!name) {
      return std::unexpected(name.error());
    }
    HoldCheck check;
    bool done = false;
    for (int attempt = 0; attempt < kAttempts && !done; ++attempt) {
      auto cur = readClaim(s.call, *name, pool, ref.name);
      if (!cur) {
        return std::unexpected(cur.error());
      }
      if (!*cur) {
        done = true;  // kGone
        break;
      }
      check.now = holderOf(**cur, options_.leaseDuration);
      const bool same = check.now.node == node && (ref.identity.empty() || ref.identity == check.now.identity);
      if (!same || (**cur).deleting) {
        check.state = same ? HoldCheck::State::kKept : HoldCheck::State::kLost;
        done = true;
        break;
      }
      json body = updateOf(**cur, options_.namespace_);
      body["spec"]["renewTime"] = os::rfc3339Micros(SysClock::now());
      body["spec"]["leaseDurationSeconds"] = options_.leaseDuration.count();
      auto put = s.call.putLease(*name, body);
      if (!put) {
        return std::unexpected(put.error());
      }
      if (*put) {
        check.state = HoldCheck::State::kKept;
        check.now = holderOf(**put, options_.leaseDuration);
        done = true;
      }
      // 404 or 409: changed meanwhile; read again.
    }
    if (!done) {
      return std::unexpected(changing(*name, s.call));
    }
    out.claims.push_back(std::move(check));
  }
  return out;
}

namespace {

/// Whether the holder of `v` (as `seen`) is certainly gone: the Lease is still as seen, it lapsed
/// and its holder's Node object is absent.
BackendResult<bool> certainlyGone(k8s::Call& call, const LeaseView& v, const Holder& seen,
                                  std::chrono::seconds fallback) {
  if (v.resourceVersion != seen.version || !v.lapsed(SysClock::now(), fallback)) {
    return false;
  }
  auto exists = call.nodeExists(v.holderIdentity);
  if (!exists) {
    return std::unexpected(exists.error());
  }
  return !*exists;
}

}  // namespace

BackendResult<ClaimOutcome> KubernetesBlockBackend::takeOver(ClaimKind kind, std::string_view pool,
                                                             std::string_view key, std::string_view node,
                                                             const Holder& seen, const ClaimAttrs& attrs) {
  if (auto v = checkNames({pool, key, node}); !v) {
    return std::unexpected(v.error());
  }
  auto name = nameOf(kind, pool, key);
  if (!name) {
    return std::unexpected(name.error());
  }
  LeaseSession s(client_, options_);
  auto cur = readClaim(s.call, *name, pool, key);
  if (!cur) {
    return std::unexpected(cur.error());
  }
  if (!*cur) {
    return claimWith(s.call, options_, kind, pool, key, *name, node, attrs);  // released meanwhile: free
  }
  const LeaseView& v = **cur;
  if (ours(kind, holderOf(v, options_.leaseDuration), node, attrs)) {
    return ClaimOutcome{ClaimState::kAdopted, holderOf(v, options_.leaseDuration)};
  }
  auto gone = certainlyGone(s.call, v, seen, options_.leaseDuration);
  if (!gone) {
    return std::unexpected(gone.error());
  }
  if (!*gone || v.deleting) {
    return ClaimOutcome{ClaimState::kHeldByOther, holderOf(v, options_.leaseDuration)};
  }
  json body = updateOf(v, options_.namespace_);
  const std::string t = os::rfc3339Micros(SysClock::now());
  body["metadata"]["labels"] = labels(pool, kindLabel(kind), node);
  body["metadata"]["annotations"] = claimAnnotations(pool, key, attrs);
  body["spec"]["holderIdentity"] = node;
  body["spec"]["acquireTime"] = t;
  body["spec"]["renewTime"] = t;
  body["spec"]["leaseDurationSeconds"] = options_.leaseDuration.count();
  body["spec"]["leaseTransitions"] = v.transitions + 1;
  auto put = s.call.putLease(*name, body);
  if (!put) {
    return std::unexpected(put.error());
  }
  if (*put) {
    return ClaimOutcome{ClaimState::kClaimed, holderOf(**put, options_.leaseDuration)};
  }
  // 409 (another taker, or a late renewal) or 404 (released): who holds it now.
  auto again = readClaim(s.call, *name, pool, key);
  if (!again) {
    return std::unexpected(again.error());
  }
  if (!*again) {
    return claimWith(s.call, options_, kind, pool, key, *name, node, attrs);
  }
  Holder h = holderOf(**again, options_.leaseDuration);
  const bool mine = ours(kind, h, node, attrs);
  return ClaimOutcome{mine ? ClaimState::kAdopted : ClaimState::kHeldByOther, std::move(h)};
}

BackendResult<ReleaseOutcome> KubernetesBlockBackend::removeGone(ClaimKind kind, std::string_view pool,
                                                                 std::string_view key, const Holder& seen) {
  if (auto v = checkNames({pool, key}); !v) {
    return std::unexpected(v.error());
  }
  auto name = nameOf(kind, pool, key);
  if (!name) {
    return ReleaseOutcome::kGone;
  }
  LeaseSession s(client_, options_);
  auto cur = readClaim(s.call, *name, pool, key);
  if (!cur) {
    return std::unexpected(cur.error());
  }
  if (!*cur) {
    return ReleaseOutcome::kGone;
  }
  auto gone = certainlyGone(s.call, **cur, seen, options_.leaseDuration);
  if (!gone) {
    return std::unexpected(gone.error());
  }
  if (!*gone) {
    return ReleaseOutcome::kNotOurs;
  }
  auto status = s.call.deleteLease(*name, (**cur).uid, (**cur).resourceVersion);
  if (!status) {
    return std::unexpected(status.error());
  }
  return *status == k8s::Call::Deleted::kConflict ? ReleaseOutcome::kNotOurs : outcomeOf(*status);
}

namespace {

BackendResult<PoolDefinition> definitionOf(const LeaseView& v, std::string_view pool, const k8s::Call& call) {
  const std::string fields = v.annotation(kAnnDefinition);
  if (fields.empty() || v.annotation(kAnnPool) != pool) {
    return std::unexpected(BackendError{BackendErrc::kBadAnswer, call.server().url,
                                        "Lease " + v.name + " is not the definition of pool " + cni::quoted(pool) +
                                            " (no " + kAnnDefinition + " annotation)",
                                        0});
  }
  return PoolDefinition{std::string(pool), fields, v.annotation(kAnnOrigin), v.resourceVersion,
                        v.annotation(kAnnClosed) == "true"};
}

json definitionAnnotations(const PoolDefinition& def) {
  json an{{kAnnPool, def.pool}, {kAnnDefinition, def.fields}, {kAnnOrigin, def.origin}};
  if (def.closed) {
    an[kAnnClosed] = "true";
  }
  return an;
}

}  // namespace

namespace {

// The name of the Lease that holds pool `pool`'s definition, the pool's name checked first.
BackendResult<std::string> definitionLease(std::string_view pool) {
  if (auto v = checkNames({pool}); !v) {
    return std::unexpected(v.error());
  }
  std::string name = KubernetesBlockBackend::poolLeaseName(pool);
  if (name.empty()) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + ": its Lease name would pass 253 characters"));
  }
  return name;
}

}  // namespace

BackendResult<PoolDefinition> KubernetesBlockBackend::definePool(const PoolDefinition& def) {
  auto defLease = definitionLease(def.pool);
  if (!defLease) {
    return std::unexpected(defLease.error());
  }
  const std::string& name = *defLease;
  LeaseSession s(client_, options_);
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    const json annotations = definitionAnnotations(def);
    auto created = s.call.createLease(
        newLease(name, options_.namespace_, labels(def.pool, "pool", ""), annotations, "", options_.leaseDuration));
    if (!created) {
      return std::unexpected(created.error());
    }
    if (*created) {
      return definitionOf(**created, def.pool, s.call);
    }
    auto cur = s.call.getLease(name);
    if (!cur) {
      return std::unexpected(cur.error());
    }
    if (*cur) {
      return definitionOf(**cur, def.pool, s.call);
    }
  }
  return std::unexpected(changing(name, s.call));
}

BackendResult<std::optional<PoolDefinition>> KubernetesBlockBackend::definition(std::string_view pool) {
  auto defLease = definitionLease(pool);
  if (!defLease) {
    return std::unexpected(defLease.error());
  }
  const std::string& name = *defLease;
  LeaseSession s(client_, options_);
  auto cur = s.call.getLease(name);
  if (!cur) {
    return std::unexpected(cur.error());
  }
  if (!*cur) {
    return std::optional<PoolDefinition>();
  }
  auto d = definitionOf(**cur, pool, s.call);
  if (!d) {
    return std::unexpected(d.error());
  }
  return std::optional<PoolDefinition>(std::move(*d));
}

BackendResult<PoolRegistry> KubernetesBlockBackend::registry() {
  LeaseSession s(client_, options_);
  auto cur = s.call.getLease(kRegistryLease);
  if (!cur) {
    return std::unexpected(cur.error());
  }
  PoolRegistry out;
  if (!*cur) {
    return out;
  }
  const json pools = json::parse((**cur).annotation(kAnnPools), nullptr, false);
  if (!pools.is_object()) {
    return std::unexpected(BackendError{BackendErrc::kBadAnswer, options_.server,
                                        std::string("Lease ") + kRegistryLease + " has no " + kAnnPools +
                                            " annotation holding a JSON object",
                                        0});
  }
  for (const auto& [pool, fields] : pools.items()) {
    if (fields.is_string()) {
      out.pools[pool] = fields.get<std::string>();
    }
  }
  out.version = (**cur).resourceVersion;
  return out;
}

BackendResult<bool> KubernetesBlockBackend::writeRegistry(const PoolRegistry& registry) {
  json pools = json::object();
  for (const auto& [pool, fields] : registry.pools) {
    pools[pool] = fields;
  }
  const json annotations{{kAnnPools, pools.dump()}};
  LeaseSession s(client_, options_);
  if (registry.version.empty()) {
    json body = newLease(kRegistryLease, options_.namespace_, json{{kLabelKind, "registry"}}, annotations, "",
                         options_.leaseDuration);
    auto created = s.call.createLease(body);
    if (!created) {
      return std::unexpected(created.error());
    }
    return created->has_value();
  }
  auto cur = s.call.getLease(kRegistryLease);
  if (!cur) {
    return std::unexpected(cur.error());
  }
  if (!*cur || (**cur).resourceVersion != registry.version) {
    return false;
  }
  json body = updateOf(**cur, options_.namespace_);
  body["metadata"]["annotations"] = annotations;
  auto put = s.call.putLease(kRegistryLease, body);
  if (!put) {
    return std::unexpected(put.error());
  }
  return put->has_value();
}

BackendResult<std::optional<PoolDefinition>> KubernetesBlockBackend::replaceDefinition(const PoolDefinition& def,
                                                                                        std::string_view seen) {
  auto defLease = definitionLease(def.pool);
  if (!defLease) {
    return std::unexpected(defLease.error());
  }
  const std::string& name = *defLease;
  LeaseSession s(client_, options_);
  auto cur = s.call.getLease(name);
  if (!cur) {
    return std::unexpected(cur.error());
  }
  if (!*cur || (**cur).resourceVersion != seen) {
    return std::optional<PoolDefinition>();
  }
  json body = updateOf(**cur, options_.namespace_);
  body["metadata"]["annotations"] = definitionAnnotations(def);
  auto put = s.call.putLease(name, body);
  if (!put) {
    return std::unexpected(put.error());
  }
  if (!*put) {
    return std::optional<PoolDefinition>();
  }
  auto d = definitionOf(**put, def.pool, s.call);
  if (!d) {
    return std::unexpected(d.error());
  }
  return std::optional<PoolDefinition>(std::move(*d));
}

BackendResult<bool> KubernetesBlockBackend::removeDefinition(std::string_view pool, std::string_view seen) {
  auto defLease = definitionLease(pool);
  if (!defLease) {
    return std::unexpected(defLease.error());
  }
  const std::string& name = *defLease;
  LeaseSession s(client_, options_);
  auto cur = s.call.getLease(name);
  if (!cur) {
    return std::unexpected(cur.error());
  }
  if (!*cur) {
    return true;
  }
  if ((**cur).resourceVersion != seen) {
    return false;
  }
  auto status = s.call.deleteLease(name, (**cur).uid, (**cur).resourceVersion);
  if (!status) {
    return std::unexpected(status.error());
  }
  return *status == k8s::Call::Deleted::kDeleted || *status == k8s::Call::Deleted::kGone;
}

BackendResult<void> KubernetesBlockBackend::demand(std::string_view pool, std::string_view node, int wanted) {
  if (auto v = checkNames({pool, node}); !v) {
    return std::unexpected(v.error());
  }
  const std::string name = demandLeaseName(pool, node);
  if (name.empty()) {
    return std::unexpected(invalid("the demand Lease of node " + cni::quoted(node) + " would pass 253 characters"));
  }
  LeaseSession s(client_, options_);
  const json annotations{{kAnnPool, pool}, {kAnnWanted, std::to_string(wanted)}};
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    auto created = s.call.createLease(newLease(name, options_.namespace_, labels(pool, "demand", node), annotations,
                                               node, options_.leaseDuration));
    if (!created) {
      return std::unexpected(created.error());
    }
    if (*created) {
      return {};
    }
    auto cur = s.call.getLease(name);
    if (!cur) {
      return std::unexpected(cur.error());
    }
    if (!*cur) {
      continue;
    }
    json body = updateOf(**cur, options_.namespace_);
    body["metadata"]["annotations"] = annotations;
    body["spec"]["renewTime"] = os::rfc3339Micros(SysClock::now());
    auto put = s.call.putLease(name, body);
    if (!put) {
      return std::unexpected(put.error());
    }
    if (*put) {
      return {};
    }
  }
  return std::unexpected(changing(name, s.call));
}

BackendResult<std::vector<Demand>> KubernetesBlockBackend::demands(std::string_view pool) {
  if (auto v = checkNames({pool}); !v) {
    return std::unexpected(v.error());
  }
  LeaseSession s(client_, options_);
  auto leases = s.call.listLeases(std::string(kLabelPool) + "=" + labelValue(pool) + "," + kLabelKind + "=demand");
  if (!leases) {
    return std::unexpected(leases.error());
  }
  std::vector<Demand> out;
  for (const auto& v : *leases) {
    if (v.annotation(kAnnPool) != pool) {
      continue;
    }
    Demand d;
    d.node = v.holderIdentity;
    d.requestedAt = v.renewTime;
    d.wanted = std::max(1, std::atoi(v.annotation(kAnnWanted).c_str()));
    d.lapsed = v.lapsed(SysClock::now(), options_.leaseDuration);
    out.push_back(std::move(d));
  }
  return out;
}

BackendResult<void> KubernetesBlockBackend::withdraw(std::string_view pool, std::string_view node) {
  if (auto v = checkNames({pool, node}); !v) {
    return std::unexpected(v.error());
  }
  const std::string name = demandLeaseName(pool, node);
  if (name.empty()) {
    return std::unexpected(invalid("the demand Lease of node " + cni::quoted(node) + " would pass 253 characters"));
  }
  LeaseSession s(client_, options_);
  auto status = s.call.deleteLease(name, "", "");
  if (!status) {
    return std::unexpected(status.error());
  }
  return {};
}

BackendResult<void> KubernetesBlockBackend::forgetNode(std::string_view node) {
  return std::unexpected(invalid("with the kubernetes backend a node is gone when its Node object is: `kubectl delete "
                                 "node " +
                                 std::string(node) + "` once it is drained; its claims are then taken over"));
}

}  // namespace ibcni::ipam
