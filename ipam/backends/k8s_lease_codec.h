// SPDX-License-Identifier: Apache-2.0
// ibcni's claims, pool definitions, pools' registry and demands as coordination.k8s.io/v1 Leases:
// their names, labels, annotations and bodies, and what is read back from them; and one public
// call's session. k8s_api.h speaks the API; k8s_block_backend.h says what is done with the Leases.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "ipam/backends/k8s_api.h"
#include "ipam/backends/k8s_block_backend.h"
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
inline constexpr const char* kAnnPools = "ibcni.io/pools";
inline constexpr const char* kRegistryLease = "ibcni-pool-registry";

/// Round trips a changed Lease gets before the call gives up.
inline constexpr int kAttempts = 4;

/// One call's state: the server (built from the options) and the requests.
struct LeaseSession {
  k8s::Server server;
  k8s::Call call;
  explicit LeaseSession(http::HttpClient& client, const KubernetesBlockBackend::Options& o)
      : server{o.server, o.namespace_, o.tls, o.token, o.tokenFile, o.timeout}, call(client, server) {}
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
/// The body of an update of `v`: its metadata (name, namespace, resourceVersion, uid, labels,
/// annotations) and spec, for the caller to change.
[[nodiscard]] json updateOf(const LeaseView& v, const std::string& ns);
/// The holder of a claim's Lease.
[[nodiscard]] Holder holderOf(const LeaseView& v, std::chrono::seconds fallback);
/// A Lease read by name must be ibcni's claim of `key` in `pool`.
[[nodiscard]] BackendResult<void> isClaimOf(const LeaseView& v, std::string_view pool, std::string_view key,
                                            const k8s::Call& call);
/// How a release ended, from how its DELETE did.
[[nodiscard]] ReleaseOutcome outcomeOf(k8s::Call::Deleted d);
/// Lease `name` changed on every attempt.
[[nodiscard]] BackendError changing(const std::string& name, const k8s::Call& call);
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
