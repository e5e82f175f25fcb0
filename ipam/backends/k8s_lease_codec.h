// SPDX-License-Identifier: Apache-2.0
// ibcni's claims, pool definitions, pools' registry and demands as coordination.k8s.io/v1 Leases:
// their names, labels, annotations and bodies, and what is read back from them; and one public
// call's session. k8s_api.h speaks the API; k8s_claim_store.h says what is done with the Leases.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ipam/backends/k8s_api.h"
#include "ipam/backends/k8s_claim_store.h"
#include "ibcni/ipam/block_backend.h"

namespace ibcni::ipam::k8s_leases {

using k8s::json;
using k8s::LeaseView;

inline constexpr const char* kApiVersion = "coordination.k8s.io/v1";
inline constexpr const char* kLabelPool = "ibcni.io/pool";
inline constexpr const char* kLabelKind = "ibcni.io/kind";
inline constexpr const char* kLabelNode = "ibcni.io/node";
inline constexpr const char* kAnnPool = "ibcni.io/pool";
inline constexpr const char* kAnnKey = "ibcni.io/key";
inline constexpr const char* kAnnOwner = "ibcni.io/owner";
inline constexpr const char* kAnnPod = "ibcni.io/pod";
inline constexpr const char* kAnnLender = "ibcni.io/lender";
inline constexpr const char* kAnnDefinition = "ibcni.io/definition";
inline constexpr const char* kAnnOrigin = "ibcni.io/origin";
inline constexpr const char* kAnnWanted = "ibcni.io/wanted";
inline constexpr const char* kAnnClosed = "ibcni.io/closed";
inline constexpr const char* kAnnRegistered = "ibcni.io/registered";
inline constexpr const char* kAnnPools = "ibcni.io/pools";
inline constexpr const char* kRegistryLease = "ibcni-pool-registry";

/// One call's state: the server (built from the options) and the requests.
struct LeaseSession {
  k8s::Server server;
  k8s::Call call;
  explicit LeaseSession(http::HttpClient& client, const K8sClaimStore::Options& o)
      : server{o.server, o.namespace_, o.tls, o.token, o.tokenFile, o.timeout}, call(client, server, o.writes) {}
  LeaseSession(const LeaseSession&) = delete;
  LeaseSession& operator=(const LeaseSession&) = delete;
};

/// The ibcni.io/kind label of a claim.
[[nodiscard]] std::string kindLabel(ClaimKind kind);
/// A claim's annotations: its pool and key, and the attributes given.
[[nodiscard]] json claimAnnotations(std::string_view pool, std::string_view key, const ClaimAttrs& attrs);
/// The labels that select a Lease: its pool, its kind and (when given) its node.
[[nodiscard]] json labels(std::string_view pool, const std::string& kind, std::string_view node);
/// The body of a new Lease held by `node`.
[[nodiscard]] json newLease(const std::string& name, const std::string& ns, json lbls, json annotations,
                            std::string_view node, std::chrono::seconds duration);
/// A Lease request's answer (the Lease, nullopt when absent or changed) reduced to what the caller
/// needs of it.
template <class T, class F>
BackendResult<T> as(BackendResult<std::optional<LeaseView>> r, F f) {
  if (!r) {
    return std::unexpected(std::move(r.error()));
  }
  if constexpr (std::is_void_v<T>) {
    f(*r);
    return {};
  } else {
    return f(*r);
  }
}

/// The claims of `kind` in `pool` (only `node`'s when given) among the Leases a selector listed.
[[nodiscard]] BackendResult<std::vector<Claim>> claimsOf(const std::vector<LeaseView>& leases, ClaimKind kind,
                                                         std::string_view pool, std::optional<std::string_view> node,
                                                         std::chrono::seconds fallback, const k8s::Call& call);
/// The label selector of `pool`'s Leases of `kind` (only `node`'s when given).
[[nodiscard]] std::string selectorOf(std::string_view pool, const std::string& kind, std::optional<std::string_view> node);
/// The body that rewrites claim `v` with `annotations`, renewed now.
[[nodiscard]] json renewalOf(const LeaseView& v, const std::string& ns, json annotations, std::chrono::seconds duration);
/// The body that gives claim `v` to `node` (acquired and renewed now, one more transition).
[[nodiscard]] json takeoverOf(const LeaseView& v, const std::string& ns, json lbls, json annotations,
                              std::string_view node, std::chrono::seconds duration);
/// The pools' registry Lease `v` holds (an empty one when there is none).
[[nodiscard]] BackendResult<PoolRegistry> registryOf(const std::optional<LeaseView>& v, const k8s::Call& call);
/// The annotations that hold the pools' registry.
[[nodiscard]] json registryAnnotations(const PoolRegistry& registry);
/// The demand a Lease holds.
[[nodiscard]] Demand demandOf(const LeaseView& v, std::chrono::seconds fallback);
/// The body of an update of `v`: its metadata (name, namespace, resourceVersion, uid, labels,
/// annotations) and spec, for the caller to change.
[[nodiscard]] json updateOf(const LeaseView& v, const std::string& ns);
/// The holder of a claim's Lease.
[[nodiscard]] Holder holderOf(const LeaseView& v, std::chrono::seconds fallback);
/// A Lease read by name must be ibcni's claim of `key` in `pool`.
[[nodiscard]] BackendResult<void> isClaimOf(const LeaseView& v, std::string_view pool, std::string_view key,
                                            const k8s::Call& call);
/// How a compared delete ended, from how its DELETE did.
[[nodiscard]] claims::Removed removedAs(k8s::Call::Deleted d);
/// The Lease names (k8s_claim_store.h says how they are made); "" when one would pass 253 characters.
[[nodiscard]] std::string claimLeaseName(ClaimKind kind, std::string_view pool, std::string_view name);
[[nodiscard]] std::string poolLeaseName(std::string_view pool);
[[nodiscard]] std::string demandLeaseName(std::string_view pool, std::string_view node);
/// The Lease name of a claim, refused when it would be longer than 253 characters.
[[nodiscard]] BackendResult<std::string> nameOf(ClaimKind kind, std::string_view pool, std::string_view key);

/// The definition of `pool` a Lease holds.
[[nodiscard]] BackendResult<PoolDefinition> definitionOf(const LeaseView& v, std::string_view pool,
                                                         const k8s::Call& call);
/// The annotations that hold a pool's definition.
[[nodiscard]] json definitionAnnotations(const PoolDefinition& def);
/// The name of the Lease that holds pool `pool`'s definition, the pool's name checked first.
[[nodiscard]] BackendResult<std::string> definitionLease(std::string_view pool);
/// The name of the Lease of `node`'s demand in `pool`, both names checked first.
[[nodiscard]] BackendResult<std::string> demandLease(std::string_view pool, std::string_view node);

}  // namespace ibcni::ipam::k8s_leases
