// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/cni/error.h"

namespace ibcni::ipam {

/// The cluster-wide IPAM's shared datastore, seen from one node: the atomic operations a node
/// needs on the blocks (and on the single addresses named by pods) of a shared pool. Every claim
/// is one create-if-absent; every release one conditional delete. Backend-neutral: etcd (a key per
/// block, attached to the node's etcd lease) and Kubernetes (a coordination.k8s.io/v1 Lease per
/// block) implement the same interface.
///
/// Names: a pool, a block key and a node are non-empty printable ASCII without '/' (the caller
/// picks block keys, for example "10.1.0.0-27" for 10.1.0.0/27); an address is its text form
/// ("10.1.0.5", "fd00::5"). A name that breaks these rules is refused (kInvalidArgument) before
/// any request is sent.
///
/// etcd key layout (`prefix` from the configuration, "/ibcni/" by default):
///   <prefix>pools/<pool>/blocks/<block-key>    {"node":"<node>","claimedAt":"<RFC 3339 UTC>"}
///   <prefix>pools/<pool>/addresses/<address>   {"node":"<node>","owner":"<owner>","claimedAt":"..."}
///   <prefix>pools/<pool>/definition            {"fingerprint":"...","origin":"..."} (no lease)
/// Every key is put with the node's lease: when the node stops renewing, its keys go with the
/// lease (that is how a gone node's blocks become free). The version token is the key's
/// mod_revision.

/// What went wrong talking to the backend.
enum class BackendErrc {
  kUnreachable,      ///< no endpoint answered (refused, DNS, broken connection, no quorum/leader)
  kTimeout,          ///< the call's timeout passed before an answer
  kBadAnswer,        ///< an answer that is not what the backend's API promises (garbage JSON,
                     ///< an unexpected status, a missing field, a value we cannot read)
  kAuth,             ///< TLS handshake/verification, 401/403, permission denied
  kUnavailable,      ///< the HTTP library cannot be loaded (libcurl missing)
  kInvalidArgument,  ///< a malformed name or configuration (nothing was sent)
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
/// error 7 (the cluster configuration: credentials, CA, endpoint), kUnavailable error 4 (the
/// node lacks libcurl). The message names `action` ("claiming block 10.1.0.0-27 of pool p0"),
/// the endpoint and the backend's error.
[[nodiscard]] cni::Error toCniError(const BackendError& error, std::string_view action);

/// Who holds a block or an address, at which version.
struct Holder {
  std::string node;
  std::string owner;    ///< addresses: the pod/attachment that named it; blocks: empty
  std::string version;  ///< opaque token for release() (etcd: mod_revision; Kubernetes: resourceVersion)
  std::optional<std::chrono::system_clock::time_point> claimedAt;  ///< when the claim was created
  std::optional<std::chrono::system_clock::time_point> renewedAt;  ///< last renewal (not with etcd)
};

enum class ClaimState {
  kClaimed,       ///< created now by this call
  kAdopted,       ///< already held by this node (and, for an address, this owner): a retried
                  ///< claim whose first answer was lost; the holder's current version is given
  kHeldByOther,   ///< held by another node (or, for an address, another owner of this node)
};

struct ClaimOutcome {
  ClaimState state = ClaimState::kHeldByOther;
  Holder holder;  ///< this node's for kClaimed/kAdopted, the other's for kHeldByOther
};

/// One claimed block or address, as list() reports it.
struct Claim {
  std::string name;  ///< block key or address
  Holder holder;
};

enum class ReleaseOutcome {
  kReleased,  ///< deleted
  kNotOurs,   ///< held by another node (or owner): untouched
  kChanged,   ///< ours, but no longer at the given version: untouched
  kGone,      ///< nothing there (already released, or expired)
};

enum class ClaimKind { kBlock, kAddress };

/// A claim the node believes it holds, for renew().
struct ClaimRef {
  ClaimKind kind = ClaimKind::kBlock;
  std::string pool;
  std::string name;   ///< block key or address
  std::string owner;  ///< addresses only
  bool operator==(const ClaimRef&) const = default;
};

struct LostClaim {
  ClaimRef ref;
  std::optional<Holder> holder;  ///< who holds it now (std::nullopt: nobody, and re-claiming failed)
};

struct RenewOutcome {
  bool renewed = false;            ///< the node's claims were kept alive without a gap
  bool reestablished = false;      ///< they had expired: held claims were claimed again
  std::vector<ClaimRef> kept;      ///< `held` claims that are this node's after the call
  std::vector<LostClaim> lost;     ///< `held` claims another node (or owner) took meanwhile
};

/// A pool's shape as the first node to use it recorded it; every other node's configuration must
/// give the same fingerprint.
struct PoolDefinition {
  std::string fingerprint;  ///< canonical text of the ranges and the block size: equal text = same pool
  std::string origin;       ///< who recorded it, for messages ("network ib0 on node n1")
};

/// Each call is bounded by the backend's configured timeout (every endpoint and retry included)
/// and is safe to retry after a timeout: a claim that reached the backend but whose answer was
/// lost comes back as kAdopted, a release as kGone. Implementations are safe to use from several
/// threads.
class BlockBackend {
 public:
  virtual ~BlockBackend() = default;

  /// Create-if-absent of block `block` of `pool`, held by `node`.
  [[nodiscard]] virtual BackendResult<ClaimOutcome> claim(std::string_view pool, std::string_view block,
                                                          std::string_view node) = 0;
  /// Every claimed block of `pool`, in key order.
  [[nodiscard]] virtual BackendResult<std::vector<Claim>> list(std::string_view pool) = 0;
  /// The blocks of `pool` held by `node`.
  [[nodiscard]] virtual BackendResult<std::vector<Claim>> listNode(std::string_view pool, std::string_view node);
  /// Deletes the block if it is still held by `node` at `version`.
  [[nodiscard]] virtual BackendResult<ReleaseOutcome> release(std::string_view pool, std::string_view block,
                                                              std::string_view node, std::string_view version) = 0;

  /// Create-if-absent of the single address `address` of `pool`, held by `node` for `owner`
  /// (the attachment that named it, e.g. "<containerID>:<ifname>").
  [[nodiscard]] virtual BackendResult<ClaimOutcome> claimAddress(std::string_view pool, std::string_view address,
                                                                 std::string_view node, std::string_view owner) = 0;
  /// Every claimed address of `pool`.
  [[nodiscard]] virtual BackendResult<std::vector<Claim>> listAddresses(std::string_view pool) = 0;
  /// Deletes the address claim if it is still held by `node` at `version`.
  [[nodiscard]] virtual BackendResult<ReleaseOutcome> releaseAddress(std::string_view pool, std::string_view address,
                                                                     std::string_view node,
                                                                     std::string_view version) = 0;

  /// Create-if-absent of `pool`'s definition (never expires). @return the definition stored: `def`
  /// when this call created it or an equal one was there, else the earlier one.
  [[nodiscard]] virtual BackendResult<PoolDefinition> definePool(std::string_view pool, const PoolDefinition& def) = 0;

  /// Takes block `block`, held by another node as `seen` (from list()), for `node`, only when that
  /// node is certainly gone: Kubernetes: its Node object is absent and the block's Lease was not
  /// renewed within its leaseDurationSeconds, then one update conditional on `seen.version` (of two
  /// takers, one wins); etcd: a block of a node whose lease expired is already free, so this is a
  /// plain claim. kClaimed when taken, kHeldByOther (with the holder) when not.
  [[nodiscard]] virtual BackendResult<ClaimOutcome> takeOver(std::string_view pool, std::string_view block,
                                                             std::string_view node, const Holder& seen) = 0;

  /// Keeps `node`'s claims alive (etcd: one keepalive of the node's lease). When they had expired
  /// (the lease is gone), a new lease is granted and every claim of `held` is claimed again:
  /// those another node took meanwhile are reported in `lost`, and the caller must stop
  /// allocating from them.
  [[nodiscard]] virtual BackendResult<RenewOutcome> renew(std::string_view node, const std::vector<ClaimRef>& held) = 0;
};

}  // namespace ibcni::ipam
