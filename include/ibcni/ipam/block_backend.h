// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/cni/error.h"

namespace ibcni::ipam {

/// The cluster-wide IPAM's shared datastore, seen from one node: the atomic operations a node
/// needs on the claims of a shared pool — its blocks, and the single addresses pods named or other
/// nodes lent. Every claim is one create-if-absent; every change of a claim one compare-and-swap.
/// Backend-neutral: etcd (a key per claim) and Kubernetes (a coordination.k8s.io/v1 Lease per
/// claim) implement the same interface; ipam/README.md ("Cluster safety") gives the invariants it
/// serves.
///
/// Ownership has no time limit: a claim stays its holder's until the holder releases it, or until
/// another node takes it over after proving the holder certainly gone (takeOver). A node's liveness
/// (etcd: a key on the node's lease; Kubernetes: each claim's renewTime) only says who *may* be
/// gone; the proof is the node's registration being gone too (etcd: `ibcni-ipam forget-node`;
/// Kubernetes: its Node object deleted), checked in the same compare-and-swap as the takeover where
/// the backend allows (etcd) and fenced by the holder's renewals elsewhere (Kubernetes).
///
/// Names: a pool, a claim name and a node are non-empty printable ASCII without '/' (block keys
/// like "10.1.0.0-27", addresses in text form "10.1.0.5", "fd00::5"). A name that breaks these
/// rules is refused (kInvalidArgument) before any request is sent.

/// What went wrong talking to the backend.
enum class BackendErrc {
  kUnreachable,      ///< no endpoint answered (refused, DNS, broken connection, no quorum/leader)
  kTimeout,          ///< the call's timeout passed before an answer
  kBadAnswer,        ///< an answer that is not what the backend's API promises (garbage JSON,
                     ///< an unexpected status, a missing field, a value we cannot read)
  kAuth,             ///< TLS handshake/verification, 401/403, permission denied
  kUnavailable,      ///< the HTTP library cannot be loaded (libcurl missing)
  kInvalidArgument,  ///< a malformed name or configuration (nothing was sent), or a configured
                     ///< place that does not exist (a Kubernetes namespace)
};

/// "unreachable", "timeout", "bad answer", "auth", "unavailable", "invalid argument"
[[nodiscard]] std::string_view backendErrcName(BackendErrc kind);

struct BackendError {
  BackendErrc kind = BackendErrc::kBadAnswer;
  std::string endpoint;  ///< the endpoint(s) concerned ("http://10.0.0.1:2379", comma-separated)
  std::string message;   ///< the backend's or the transport's own words, per endpoint tried
  int backendCode = 0;   ///< the backend's error code when it gave one (etcd: the gRPC code)

  /// "<kind>: <endpoint>: <message>"
  [[nodiscard]] std::string describe() const;
};

template <class T>
using BackendResult = std::expected<T, BackendError>;

/// The CNI error for a failed backend call: kUnreachable, kTimeout and kBadAnswer are error 11
/// (try again later; the control plane is down or misbehaving), kAuth and kInvalidArgument
/// error 7 (the cluster configuration: credentials, CA, endpoint, namespace), kUnavailable error 4
/// (the node lacks libcurl). The message names `action` ("claiming block 10.1.0.0-27 of pool
/// p0"), the endpoint and the backend's error.
[[nodiscard]] cni::Error toCniError(const BackendError& error, std::string_view action);

enum class ClaimKind {
  kBlock,    ///< an aligned block of the pool, allocated from by its holder alone
  kAddress,  ///< one address: named by a pod (reserved or requested outside the holder's blocks),
             ///< or lent by the node whose block it lies in
};

/// "block", "address"
[[nodiscard]] std::string_view claimKindName(ClaimKind kind);

/// What a claim is for, besides its holder node.
struct ClaimAttrs {
  std::string owner;   ///< addresses: the attachment using it ("<containerID>:<ifname>"); empty for a loan
  std::string pod;     ///< addresses: the pod ("namespace/name") that named it; empty when none did
  std::string lender;  ///< addresses lent out of another node's block: that node
  bool operator==(const ClaimAttrs&) const = default;
};

/// Who holds a claim, as the backend says.
struct Holder {
  std::string node;
  ClaimAttrs attrs;
  std::string identity;  ///< this grant of the claim: etcd create_revision, Kubernetes uid
  std::string version;   ///< its current state, for compare-and-swap: etcd mod_revision, resourceVersion
  std::optional<std::chrono::system_clock::time_point> claimedAt;
  std::optional<std::chrono::system_clock::time_point> renewedAt;  ///< Kubernetes: the last renewal
  /// The holder's hold has lapsed: etcd: the node's liveness key is gone (its lease expired);
  /// Kubernetes: renewTime + leaseDurationSeconds has passed on this node's clock. Not a proof the
  /// holder is gone: takeOver() checks that.
  bool lapsed = false;
  bool deleting = false;  ///< Kubernetes: deleted but kept by finalizers
  /// Kept in a form the store wants written again (etcd: on a lease, by an older ibcni): its holder
  /// rewrites it when it adopts or renews it.
  bool stale = false;
};

/// One claim as list() reports it.
struct Claim {
  ClaimKind kind = ClaimKind::kBlock;
  std::string name;  ///< block key or address
  Holder holder;
};

enum class ClaimState {
  kClaimed,      ///< created (or taken over) now by this call
  kAdopted,      ///< already this node's (an address: for the same attachment, or for the same pod,
                 ///< whose new attachment it now names): a retried claim whose answer was lost
  kHeldByOther,  ///< held by another node (an address: or for another pod or attachment)
};

struct ClaimOutcome {
  ClaimState state = ClaimState::kHeldByOther;
  Holder holder;  ///< this node's for kClaimed/kAdopted (with the current version), else the other's
};

enum class ReleaseOutcome {
  kReleased,  ///< deleted
  kGone,      ///< nothing there (already released)
  kNotOurs,   ///< held by another node, pod or attachment: untouched
  kPending,   ///< deletion accepted but not done (Kubernetes finalizers): ask again later
};

/// A claim this node holds by its ledger, to renew or confirm.
struct HeldClaim {
  ClaimKind kind = ClaimKind::kBlock;
  std::string name;
  std::string identity;  ///< as recorded when claimed (may be empty: not known)
  std::string version;   ///< as recorded at the last claim or renewal (may be empty)
};

/// What renew() found for one held claim.
struct HoldCheck {
  enum class State {
    kKept,  ///< still this node's grant: `now` has its version after the renewal
    kLost,  ///< another node (or another grant) holds it now: `now` says who
    kGone,  ///< nothing there
  };
  State state = State::kGone;
  Holder now;
};

struct RenewOutcome {
  /// The node's liveness had lapsed and was granted anew (etcd: its lease had expired). Its claims
  /// were kept by the backend all along; whoever could prove it gone meanwhile took them (kLost).
  bool livenessRenewed = false;
  std::vector<HoldCheck> claims;  ///< one per held claim, in the same order
};

/// What decides a pool's addresses, as the first node to use it recorded it. Every network using
/// the pool must give the same fields.
struct PoolDefinition {
  std::string pool;
  std::string fields;    ///< canonical JSON: ranges, blockSize, reservations, exclude (gateways in ranges)
  std::string origin;    ///< who recorded it, for messages ("network ib0 on node n1")
  /// This version of the definition (etcd mod_revision, Kubernetes resourceVersion): it changes
  /// only when the definition is replaced (`ibcni-ipam pools --redefine`).
  std::string identity;
  /// Being redefined: no node may claim under it (a claim made meanwhile is given back).
  bool closed = false;
  /// Recorded after its ranges were entered in the pools' registry (every definition this version
  /// records): the registry holds it, so a node that reads it does not read the registry. False on
  /// one an older ibcni recorded first and entered after: a node enters it itself.
  bool registered = false;
};

/// Every pool's addresses in one object, changed only by compare-and-swap: pools are registered
/// one at a time, so two pools over one address can never both be (I5).
struct PoolRegistry {
  std::map<std::string, std::string> pools;  ///< pool -> its definition's fields (canonical JSON)
  std::string version;                       ///< "" while the registry does not exist
};

/// A node asking the holders of a full pool for room (empty blocks back, or addresses lent).
struct Demand {
  std::string node;
  std::optional<std::chrono::system_clock::time_point> requestedAt;
  int wanted = 1;      ///< addresses it lacks
  bool lapsed = false;  ///< older than the node's liveness allows: ignore it
};

/// Each call is bounded by the backend's configured timeout (every endpoint and retry included)
/// and is safe to retry after a timeout: a claim that reached the backend but whose answer was
/// lost comes back as kAdopted, a release as kGone. Implementations are safe to use from several
/// threads.
class BlockBackend {
 public:
  virtual ~BlockBackend() = default;

  /// Create-if-absent of claim `name` of `pool` for `node` with `attrs`. An address already held
  /// by `node` for the same pod (attrs.pod non-empty) but another owner is adopted and its owner
  /// rewritten (one compare-and-swap). Registers `node` (etcd) with its first claim.
  [[nodiscard]] virtual BackendResult<ClaimOutcome> claim(ClaimKind kind, std::string_view pool, std::string_view name,
                                                          std::string_view node, const ClaimAttrs& attrs) = 0;
  /// Every claim of `kind` in `pool` (only `node`'s when given), in name order, each holder's
  /// `lapsed` filled in.
  [[nodiscard]] virtual BackendResult<std::vector<Claim>> list(ClaimKind kind, std::string_view pool,
                                                               std::optional<std::string_view> node) = 0;
  /// Deletes the claim if `node` holds it (an address: and `owner` is its owner, unless empty);
  /// judged on the state read now, never on a version remembered from earlier.
  [[nodiscard]] virtual BackendResult<ReleaseOutcome> release(ClaimKind kind, std::string_view pool,
                                                              std::string_view name, std::string_view node,
                                                              std::string_view owner) = 0;
  /// Keeps `node` alive (etcd: its lease; a lapsed one is granted anew) and checks every claim of
  /// `held` (Kubernetes: renewing each one's renewTime): one HoldCheck per claim, in order. Claims
  /// found on an etcd lease (written by an older ibcni) are moved off it.
  [[nodiscard]] virtual BackendResult<RenewOutcome> renew(std::string_view node, std::string_view pool,
                                                          const std::vector<HeldClaim>& held) = 0;
  /// Takes claim `name`, held by another node as `seen` (from list() or a claim), for `node` with
  /// `attrs`, only when that node is certainly gone: its hold lapsed and its registration deleted
  /// (etcd: liveness and registration keys absent, compared in the same transaction; Kubernetes:
  /// the Lease's renewTime + leaseDurationSeconds passed and its Node object absent), then one
  /// compare-and-swap on `seen.version` (of two takers, one wins). kClaimed when taken,
  /// kHeldByOther (with the holder) when not.
  [[nodiscard]] virtual BackendResult<ClaimOutcome> takeOver(ClaimKind kind, std::string_view pool,
                                                             std::string_view name, std::string_view node,
                                                             const Holder& seen, const ClaimAttrs& attrs) = 0;
  /// Deletes claim `name` held as `seen` by a node that is certainly gone (the same rule as
  /// takeOver). kReleased when deleted, kNotOurs when the holder is not certainly gone or it changed.
  [[nodiscard]] virtual BackendResult<ReleaseOutcome> removeGone(ClaimKind kind, std::string_view pool,
                                                                 std::string_view name, const Holder& seen) = 0;

  /// Create-if-absent of `def.pool`'s definition (never expires). @return the definition stored
  /// (with its identity and order): `def`'s fields when this call created it or equal ones were
  /// there, else the earlier ones.
  [[nodiscard]] virtual BackendResult<PoolDefinition> definePool(const PoolDefinition& def) = 0;
  /// The definition of `pool`, nullopt when there is none.
  [[nodiscard]] virtual BackendResult<std::optional<PoolDefinition>> definition(std::string_view pool) = 0;
  /// The pools' registry (its version "" when there is none yet).
  [[nodiscard]] virtual BackendResult<PoolRegistry> registry() = 0;
  /// Writes `registry` if it is still at `registry.version` (creates it when that is "").
  /// @return false when it changed meanwhile.
  [[nodiscard]] virtual BackendResult<bool> writeRegistry(const PoolRegistry& registry) = 0;
  /// Removes `pool`'s definition if it is still at version `seen` (a retired pool: `ibcni-ipam
  /// pools --retire`). @return true when it is gone, false when it changed meanwhile (or, with
  /// Kubernetes, finalizers keep it).
  [[nodiscard]] virtual BackendResult<bool> removeDefinition(std::string_view pool, std::string_view seen) = 0;
  /// Replaces `def.pool`'s definition with `def` (fields, origin, closed) if it is still at
  /// version `seen`. @return the definition stored (its new version), nullopt when it changed
  /// meanwhile or is gone.
  [[nodiscard]] virtual BackendResult<std::optional<PoolDefinition>> replaceDefinition(const PoolDefinition& def,
                                                                                      std::string_view seen) = 0;

  /// Records (or refreshes) `node`'s demand for `wanted` more addresses of `pool`.
  [[nodiscard]] virtual BackendResult<void> demand(std::string_view pool, std::string_view node, int wanted) = 0;
  /// Every demand of `pool`.
  [[nodiscard]] virtual BackendResult<std::vector<Demand>> demands(std::string_view pool) = 0;
  /// Withdraws `node`'s demand (gone already: fine).
  [[nodiscard]] virtual BackendResult<void> withdraw(std::string_view pool, std::string_view node) = 0;

  /// Declares `node` gone for good (etcd: deletes its registration), so that other nodes take over
  /// its claims; refused (kInvalidArgument, saying why) while its liveness lasts, and by backends
  /// whose registry is elsewhere (Kubernetes: delete the Node object).
  [[nodiscard]] virtual BackendResult<void> forgetNode(std::string_view node) = 0;
};

}  // namespace ibcni::ipam
