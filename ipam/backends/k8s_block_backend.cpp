// SPDX-License-Identifier: Apache-2.0
// The Kubernetes block backend's options and its claims (claim, list, release, renew, takeOver,
// removeGone); k8s_block_backend_pools.cpp has the pools' definitions, registry and demands.
#include "ipam/backends/k8s_block_backend.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipam/backends/backend_support.h"
#include "ipam/backends/k8s_api.h"
#include "ipam/backends/k8s_lease_codec.h"
#include "ipam/backends/kubeconfig.h"
#include "ibcni/os/time_text.h"

namespace ibcni::ipam {

namespace {

using backend::checkNames;
using backend::invalid;
using backend::ours;
using backend::printable;
using k8s::SysClock;
using k8s_leases::LeaseSession;
using k8s_leases::LeaseView;
using k8s_leases::changing;
using k8s_leases::claimAnnotations;
using k8s_leases::holderOf;
using k8s_leases::isClaimOf;
using k8s_leases::json;
using k8s_leases::kAnnKey;
using k8s_leases::kAnnOwner;
using k8s_leases::kAnnPool;
using k8s_leases::kAttempts;
using k8s_leases::kLabelKind;
using k8s_leases::kLabelNode;
using k8s_leases::kLabelPool;
using k8s_leases::kindLabel;
using k8s_leases::labels;
using k8s_leases::nameOf;
using k8s_leases::newLease;
using k8s_leases::outcomeOf;
using k8s_leases::updateOf;

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

/// The Lease name of `node`'s claim of `key` in `pool`, the three names checked first.
BackendResult<std::string> claimLease(ClaimKind kind, std::string_view pool, std::string_view key,
                                      std::string_view node) {
  if (auto v = checkNames({pool, key, node}); !v) {
    return std::unexpected(v.error());
  }
  return nameOf(kind, pool, key);
}

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

KubernetesBlockBackend::KubernetesBlockBackend(http::HttpClient& client, Options options)
    : options_(std::move(options)), client_(client) {}

cni::Result<KubernetesBlockBackend::Options> KubernetesBlockBackend::optionsFor(const config::ClusterConf& cluster) {
  auto kc = loadKubeconfig(cluster.kubernetes.kubeconfig, cluster.kubernetes.context);
  if (!kc) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     cluster.path + ".kubernetes.kubeconfig: " + kc.error().describe() +
                         "; the DaemonSet's installer writes " + std::string(config::kDefaultKubeconfig) +
                         " (docs/cluster-ipam.md, RBAC)");
  }
  Options o = optionsFrom(*kc);
  o.namespace_ = cluster.kubernetes.leaseNamespace;
  o.timeout = cluster.timeout;
  o.leaseDuration = cluster.leaseDuration;
  if (auto v = validate(o); !v) {
    return std::unexpected(
        toCniError(v.error(), cluster.path + ".kubernetes (kubeconfig " + cluster.kubernetes.kubeconfig + ")"));
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

BackendResult<ClaimOutcome> KubernetesBlockBackend::claim(ClaimKind kind, std::string_view pool, std::string_view key,
                                                          std::string_view node, const ClaimAttrs& attrs) {
  auto name = claimLease(kind, pool, key, node);
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

namespace {

/// One held claim renewed within `call`: read, and when it is still `node`'s (with the identity
/// held), its renewTime put on the version read.
BackendResult<HoldCheck> renewClaim(k8s::Call& call, const KubernetesBlockBackend::Options& o, std::string_view node,
                                    std::string_view pool, const HeldClaim& ref) {
  auto name = nameOf(ref.kind, pool, ref.name);
  if (!name) {
    return std::unexpected(name.error());
  }
  HoldCheck check;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    auto cur = readClaim(call, *name, pool, ref.name);
    if (!cur) {
      return std::unexpected(cur.error());
    }
    if (!*cur) {
      return check;  // kGone
    }
    check.now = holderOf(**cur, o.leaseDuration);
    const bool same = check.now.node == node && (ref.identity.empty() || ref.identity == check.now.identity);
    if (!same || (**cur).deleting) {
      check.state = same ? HoldCheck::State::kKept : HoldCheck::State::kLost;
      return check;
    }
    json body = updateOf(**cur, o.namespace_);
    body["spec"]["renewTime"] = os::rfc3339Micros(SysClock::now());
    body["spec"]["leaseDurationSeconds"] = o.leaseDuration.count();
    auto put = call.putLease(*name, body);
    if (!put) {
      return std::unexpected(put.error());
    }
    if (*put) {
      check.state = HoldCheck::State::kKept;
      check.now = holderOf(**put, o.leaseDuration);
      return check;
    }
    // 404 or 409: changed meanwhile; read again.
  }
  return std::unexpected(changing(*name, call));
}

}  // namespace

BackendResult<RenewOutcome> KubernetesBlockBackend::renew(std::string_view node, std::string_view pool,
                                                          const std::vector<HeldClaim>& held) {
  if (auto v = backend::checkRenewal(pool, node, held); !v) {
    return std::unexpected(v.error());
  }
  LeaseSession s(client_, options_);
  RenewOutcome out;
  for (const auto& ref : held) {
    auto check = renewClaim(s.call, options_, node, pool, ref);
    if (!check) {
      return std::unexpected(check.error());
    }
    out.claims.push_back(std::move(*check));
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
  auto name = claimLease(kind, pool, key, node);
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

}  // namespace ibcni::ipam
