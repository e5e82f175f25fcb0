// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "ibcni/ipam/block_backend.h"
#include "ipam/claims/claim_store.h"

namespace ibcni::ipam::claims {

/// The cluster pool's claim protocol, written once over a ClaimStore: which claim is whose
/// (claims, adoptions, confirmations by renewal, releases, takeovers of a certainly gone node's
/// claims, loans as address claims), the pools' definitions and registry, and the demands. Every
/// backend is this class over its store's adapter; ipam/README.md ("Cluster safety") gives the
/// invariants it keeps.
///
///  * Names are checked here, before anything is sent (BlockBackend's rules).
///  * claim: create-if-absent; when it exists and is this node's (ours()), adopted, rewritten by
///    one compare-and-swap when the address now names another attachment of the same pod or the
///    store wants it rewritten (Holder::stale); a claim deleted or changed in between: again.
///  * release: read; not this node's (or owner's): untouched; else delete-if-version (again when
///    it changed).
///  * renew: the node kept alive, then every held claim read: kKept when still this node's grant
///    (rewritten where the store renews claims, or stale), kLost when another's, kGone.
///  * takeOver / removeGone: one swap (or delete) conditional on the claim being as seen and its
///    holder certainly gone (the store's proof); a claim released meanwhile is claimed afresh.
///  * definePool: create-if-absent, else the definition there.
class ClaimRules : public BlockBackend {
 public:
  explicit ClaimRules(std::unique_ptr<ClaimStore> store);

  [[nodiscard]] BackendResult<ClaimOutcome> claim(ClaimKind kind, std::string_view pool, std::string_view name,
                                                  std::string_view node, const ClaimAttrs& attrs) override;
  [[nodiscard]] BackendResult<std::vector<Claim>> list(ClaimKind kind, std::string_view pool,
                                                       std::optional<std::string_view> node) override;
  [[nodiscard]] BackendResult<ReleaseOutcome> release(ClaimKind kind, std::string_view pool, std::string_view name,
                                                      std::string_view node, std::string_view owner) override;
  [[nodiscard]] BackendResult<RenewOutcome> renew(std::string_view node, std::string_view pool,
                                                  const std::vector<HeldClaim>& held) override;
  [[nodiscard]] BackendResult<ClaimOutcome> takeOver(ClaimKind kind, std::string_view pool, std::string_view name,
                                                     std::string_view node, const Holder& seen,
                                                     const ClaimAttrs& attrs) override;
  [[nodiscard]] BackendResult<ReleaseOutcome> removeGone(ClaimKind kind, std::string_view pool, std::string_view name,
                                                         const Holder& seen) override;
  [[nodiscard]] BackendResult<PoolDefinition> definePool(const PoolDefinition& def) override;
  [[nodiscard]] BackendResult<std::optional<PoolDefinition>> definition(std::string_view pool) override;
  [[nodiscard]] BackendResult<PoolRegistry> registry() override;
  [[nodiscard]] BackendResult<bool> writeRegistry(const PoolRegistry& registry) override;
  [[nodiscard]] BackendResult<bool> removeDefinition(std::string_view pool, std::string_view seen) override;
  [[nodiscard]] BackendResult<std::optional<PoolDefinition>> replaceDefinition(const PoolDefinition& def,
                                                                              std::string_view seen) override;
  [[nodiscard]] BackendResult<void> demand(std::string_view pool, std::string_view node, int wanted) override;
  [[nodiscard]] BackendResult<std::vector<Demand>> demands(std::string_view pool) override;
  [[nodiscard]] BackendResult<void> withdraw(std::string_view pool, std::string_view node) override;
  [[nodiscard]] BackendResult<void> forgetNode(std::string_view node) override;

 protected:
  [[nodiscard]] ClaimStore& store() noexcept { return *store_; }
  [[nodiscard]] const ClaimStore& store() const noexcept { return *store_; }

 private:
  std::unique_ptr<ClaimStore> store_;
};

}  // namespace ibcni::ipam::claims
