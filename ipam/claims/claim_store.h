// SPDX-License-Identifier: Apache-2.0
// The store the cluster pool's claim rules are written against (claim_rules.h): what a shared
// datastore must do for them, and nothing of the rules themselves. An adapter per store:
// ipam/backends/etcd_claim_store (etcd's JSON gateway: a key per record, compare-and-swap on
// mod_revision in one Txn), ipam/backends/k8s_claim_store (a coordination.k8s.io/v1 Lease per
// record, compare-and-swap on resourceVersion), tests/support/memory_claim_store (a map, for the
// unit tests).
//
// Every change is one create-if-absent or one compare-and-swap on the version read: a store never
// decides who holds a claim, it only refuses a write whose premise changed. What node liveness
// needs is the store's too, because each store proves "gone" its own way: etcd compares the
// holder's liveness and registration keys absent in the same transaction as the swap; Kubernetes
// checks the Lease lapsed and the holder's Node object absent, then swaps on the version seen (the
// holder's renewals, which rewrite every claim, fence it).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/ipam/block_backend.h"

namespace ibcni::ipam::claims {

/// Where a claim is: its kind, pool and name (block key or address).
struct ClaimRef {
  ClaimKind kind = ClaimKind::kBlock;
  std::string_view pool;
  std::string_view name;
};

/// What a create-if-absent found.
struct Created {
  bool created = false;
  /// created: the new record; else the one there, nullopt when it was deleted in between.
  std::optional<Holder> holder;
};

/// How a delete-if-version ended.
enum class Removed {
  kDeleted,   ///< deleted
  kGone,      ///< nothing there
  kConflict,  ///< not at the version given (or, for a gone holder's claim, not certainly gone)
  kPending,   ///< accepted but kept by the store for now (Kubernetes finalizers)
};

/// A swap conditional on the holder being certainly gone.
struct Taken {
  bool taken = false;
  std::optional<Holder> now;  ///< taken: the new holder; else who holds it now (nullopt: nobody)
};

/// A node kept alive, and the claims it holds as read after that.
struct Renewal {
  bool livenessRenewed = false;  ///< its liveness had lapsed and was granted anew (etcd: its lease expired)
  std::vector<std::optional<Holder>> held;  ///< one per held claim, in order; nullopt: gone
};

/// One public call of the backend: its operations share the call's deadline (the configured
/// timeout, every endpoint and retry included) and credentials. The names given are valid
/// (backend_support.h's validName): the rules checked them.
class StoreCall {
 public:
  virtual ~StoreCall() = default;

  // --- Claims ---
  /// The claim, nullopt when there is none.
  [[nodiscard]] virtual BackendResult<std::optional<Holder>> read(const ClaimRef& ref) = 0;
  /// Every claim of `kind` in `pool` (only `node`'s when given), each holder's `lapsed` filled in,
  /// in any order.
  [[nodiscard]] virtual BackendResult<std::vector<Claim>> list(ClaimKind kind, std::string_view pool,
                                                               std::optional<std::string_view> node) = 0;
  /// Create-if-absent of the claim for `node` with `attrs` (etcd: registering the node with it).
  [[nodiscard]] virtual BackendResult<Created> create(const ClaimRef& ref, std::string_view node,
                                                      const ClaimAttrs& attrs) = 0;
  /// Rewrites the claim, still `seen.node`'s, with `attrs` if it is still at `seen.version`,
  /// keeping when it was claimed (and renewing it where the store renews claims). nullopt: it
  /// changed meanwhile or is gone.
  [[nodiscard]] virtual BackendResult<std::optional<Holder>> update(const ClaimRef& ref, const Holder& seen,
                                                                    const ClaimAttrs& attrs) = 0;
  /// Deletes the claim if it is still at `seen.version` (and `seen.identity`).
  [[nodiscard]] virtual BackendResult<Removed> remove(const ClaimRef& ref, const Holder& seen) = 0;

  // --- Node liveness ---
  /// Keeps `node` alive and registered, then reads each of `held` (held[i].kind and name in
  /// `pool`), in order: a takeover (which needs the holder certainly gone) is either before the
  /// renewal, and seen by the reads, or after it, and refused.
  [[nodiscard]] virtual BackendResult<Renewal> keepAlive(std::string_view node, std::string_view pool,
                                                         const std::vector<HeldClaim>& held) = 0;
  /// Gives the claim to `node` with `attrs` if it is still as `seen` and its holder is certainly
  /// gone (BlockBackend::takeOver says when).
  [[nodiscard]] virtual BackendResult<Taken> takeIfGone(const ClaimRef& ref, const Holder& seen, std::string_view node,
                                                        const ClaimAttrs& attrs) = 0;
  /// Deletes the claim if it is still as `seen` and its holder is certainly gone (kConflict when not).
  [[nodiscard]] virtual BackendResult<Removed> removeIfGone(const ClaimRef& ref, const Holder& seen) = 0;
  /// BlockBackend::forgetNode.
  [[nodiscard]] virtual BackendResult<void> forgetNode(std::string_view node) = 0;

  // --- Pools ---
  [[nodiscard]] virtual BackendResult<std::optional<PoolDefinition>> readDefinition(std::string_view pool) = 0;
  /// Create-if-absent of `def`: the definition stored (`def` with its identity when created, else the
  /// one there; nullopt when that was deleted in between).
  [[nodiscard]] virtual BackendResult<std::optional<PoolDefinition>> createDefinition(const PoolDefinition& def) = 0;
  /// Replaces the definition if it is still at `seen`: what was written, nullopt when it changed.
  [[nodiscard]] virtual BackendResult<std::optional<PoolDefinition>> updateDefinition(const PoolDefinition& def,
                                                                                     std::string_view seen) = 0;
  /// Deletes the definition if it is still at `seen`.
  [[nodiscard]] virtual BackendResult<Removed> removeDefinition(std::string_view pool, std::string_view seen) = 0;
  [[nodiscard]] virtual BackendResult<PoolRegistry> readRegistry() = 0;
  /// Writes the registry if it is still at `registry.version` (creates it when that is "").
  [[nodiscard]] virtual BackendResult<bool> writeRegistry(const PoolRegistry& registry) = 0;

  // --- Demands (held no longer than the node's liveness) ---
  [[nodiscard]] virtual BackendResult<void> putDemand(std::string_view pool, std::string_view node, int wanted) = 0;
  [[nodiscard]] virtual BackendResult<std::vector<Demand>> listDemands(std::string_view pool) = 0;
  [[nodiscard]] virtual BackendResult<void> deleteDemand(std::string_view pool, std::string_view node) = 0;

  /// A bad answer saying `what` (a record kept changing over every attempt of the rules).
  [[nodiscard]] virtual BackendError changing(std::string_view what) const = 0;
};

class ClaimStore {
 public:
  virtual ~ClaimStore() = default;
  /// A new public call, its deadline starting now.
  [[nodiscard]] virtual std::unique_ptr<StoreCall> call() = 0;
  /// Whether a node's renewal rewrites each claim it holds (Kubernetes: a claim's own renewTime is
  /// its holder's liveness) rather than only the node's liveness record (etcd).
  [[nodiscard]] virtual bool renewsClaims() const = 0;
};

}  // namespace ibcni::ipam::claims
