// SPDX-License-Identifier: Apache-2.0
#include "ipam/backends/k8s_lease_codec.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <utility>

#include "ipam/claims/backend_support.h"
#include "ibcni/os/time_text.h"

namespace ibcni::ipam {

namespace k8s_leases {

using backend::checkNames;
using backend::invalid;
using k8s::SysClock;

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
  json l{{kLabelPool, k8s::labelValue(pool)}, {kLabelKind, kind}};
  if (!node.empty()) {
    l[kLabelNode] = k8s::labelValue(node);
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

BackendResult<std::vector<Claim>> claimsOf(const std::vector<LeaseView>& leases, ClaimKind kind, std::string_view pool,
                                           std::optional<std::string_view> node, std::chrono::seconds fallback,
                                           const k8s::Call& call) {
  std::vector<Claim> out;
  for (const auto& v : leases) {
    if (v.annotation(kAnnPool) != pool || (node && v.holderIdentity != *node)) {
      continue;  // a label value's hash shared with another pool or node
    }
    if (v.annotation(kAnnKey).empty()) {
      return std::unexpected(BackendError{BackendErrc::kBadAnswer, call.server().url,
                                          "Lease " + v.name + " has ibcni's labels but no " + kAnnKey + " annotation",
                                          0});
    }
    out.push_back(Claim{kind, v.annotation(kAnnKey), holderOf(v, fallback)});
  }
  return out;
}

std::string selectorOf(std::string_view pool, const std::string& kind, std::optional<std::string_view> node) {
  std::string selector = std::string(kLabelPool) + "=" + k8s::labelValue(pool) + "," + kLabelKind + "=" + kind;
  if (node) {
    selector += std::string(",") + kLabelNode + "=" + k8s::labelValue(*node);
  }
  return selector;
}

json renewalOf(const LeaseView& v, const std::string& ns, json annotations, std::chrono::seconds duration) {
  json body = updateOf(v, ns);
  body["metadata"]["annotations"] = std::move(annotations);
  body["spec"]["renewTime"] = os::rfc3339Micros(SysClock::now());
  body["spec"]["leaseDurationSeconds"] = duration.count();
  return body;
}

json takeoverOf(const LeaseView& v, const std::string& ns, json lbls, json annotations, std::string_view node,
                std::chrono::seconds duration) {
  json body = updateOf(v, ns);
  const std::string t = os::rfc3339Micros(SysClock::now());
  body["metadata"]["labels"] = std::move(lbls);
  body["metadata"]["annotations"] = std::move(annotations);
  body["spec"].update(json{{"holderIdentity", node}, {"acquireTime", t}, {"renewTime", t},
                           {"leaseDurationSeconds", duration.count()}, {"leaseTransitions", v.transitions + 1}});
  return body;
}

BackendResult<PoolRegistry> registryOf(const std::optional<LeaseView>& v, const k8s::Call& call) {
  PoolRegistry out;
  if (!v) {
    return out;
  }
  const json pools = json::parse(v->annotation(kAnnPools), nullptr, false);
  if (!pools.is_object()) {
    return std::unexpected(BackendError{BackendErrc::kBadAnswer, call.server().url,
                                        std::string("Lease ") + kRegistryLease + " has no " + kAnnPools +
                                            " annotation holding a JSON object",
                                        0});
  }
  for (const auto& [pool, fields] : pools.items()) {
    if (fields.is_string()) {
      out.pools[pool] = fields.get<std::string>();
    }
  }
  out.version = v->resourceVersion;
  return out;
}

json registryAnnotations(const PoolRegistry& registry) {
  json pools = json::object();
  for (const auto& [pool, fields] : registry.pools) {
    pools[pool] = fields;
  }
  return json{{kAnnPools, pools.dump()}};
}

Demand demandOf(const LeaseView& v, std::chrono::seconds fallback) {
  return Demand{v.holderIdentity, v.renewTime, std::max(1, std::atoi(v.annotation(kAnnWanted).c_str())),
                v.lapsed(SysClock::now(), fallback)};
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

claims::Removed removedAs(k8s::Call::Deleted d) {
  switch (d) {
    case k8s::Call::Deleted::kDeleted:
      return claims::Removed::kDeleted;
    case k8s::Call::Deleted::kPending:
      return claims::Removed::kPending;
    case k8s::Call::Deleted::kConflict:
      return claims::Removed::kConflict;
    case k8s::Call::Deleted::kGone:
      break;
  }
  return claims::Removed::kGone;
}

BackendResult<std::string> nameOf(ClaimKind kind, std::string_view pool, std::string_view key) {
  std::string name = claimLeaseName(kind, pool, key);
  if (name.empty()) {
    return std::unexpected(invalid("the Lease name of " + cni::quoted(key) + " in pool " + cni::quoted(pool) +
                                   " would be longer than 253 characters"));
  }
  return name;
}

BackendResult<PoolDefinition> definitionOf(const LeaseView& v, std::string_view pool, const k8s::Call& call) {
  const std::string fields = v.annotation(kAnnDefinition);
  if (fields.empty() || v.annotation(kAnnPool) != pool) {
    return std::unexpected(BackendError{BackendErrc::kBadAnswer, call.server().url,
                                        "Lease " + v.name + " is not the definition of pool " + cni::quoted(pool) +
                                            " (no " + kAnnDefinition + " annotation)",
                                        0});
  }
  return PoolDefinition{std::string(pool), fields, v.annotation(kAnnOrigin), v.resourceVersion,
                        v.annotation(kAnnClosed) == "true", v.annotation(kAnnRegistered) == "true"};
}

json definitionAnnotations(const PoolDefinition& def) {
  json an{{kAnnPool, def.pool}, {kAnnDefinition, def.fields}, {kAnnOrigin, def.origin}};
  if (def.closed) {
    an[kAnnClosed] = "true";
  }
  if (def.registered) {
    an[kAnnRegistered] = "true";
  }
  return an;
}

// The name of the Lease that holds pool `pool`'s definition, the pool's name checked first.
BackendResult<std::string> definitionLease(std::string_view pool) {
  if (auto v = checkNames({pool}); !v) {
    return std::unexpected(v.error());
  }
  std::string name = poolLeaseName(pool);
  if (name.empty()) {
    return std::unexpected(invalid("pool " + cni::quoted(pool) + ": its Lease name would pass 253 characters"));
  }
  return name;
}

BackendResult<std::string> demandLease(std::string_view pool, std::string_view node) {
  if (auto v = checkNames({pool, node}); !v) {
    return std::unexpected(v.error());
  }
  std::string name = demandLeaseName(pool, node);
  if (name.empty()) {
    return std::unexpected(invalid("the demand Lease of node " + cni::quoted(node) + " would pass 253 characters"));
  }
  return name;
}

std::string claimLeaseName(ClaimKind kind, std::string_view pool, std::string_view name) {
  std::string out =
      "ibcni-" + k8s::encodeName(pool) + (kind == ClaimKind::kBlock ? "--b--" : "--a--") + k8s::encodeName(name);
  return out.size() <= 253 ? out : std::string();
}

std::string poolLeaseName(std::string_view pool) {
  std::string out = "ibcni-" + k8s::encodeName(pool) + "--pool";
  return out.size() <= 253 ? out : std::string();
}

std::string demandLeaseName(std::string_view pool, std::string_view node) {
  std::string out = "ibcni-" + k8s::encodeName(pool) + "--d--" + k8s::encodeName(node);
  return out.size() <= 253 ? out : std::string();
}

}  // namespace k8s_leases

}  // namespace ibcni::ipam
