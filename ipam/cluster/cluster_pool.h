// SPDX-License-Identifier: Apache-2.0
// Cluster mode (ipam.cluster): the claims of a shared pool this node holds — blocks, addresses pods
// named, addresses other nodes lent it — claimed through a BlockBackend and remembered in the
// pool's ledger. The allocator hands out addresses only inside them (BlockSource). The rules it
// keeps are ipam/README.md's "Cluster safety" (I1-I7).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ipam/policy/allocator.h"
#include "ipam/cluster/block_grid.h"
#include "ipam/cluster/block_ledger.h"
#include "ibcni/config/ipam_conf.h"
#include "ibcni/ipam/block_backend.h"
#include "ibcni/os/boot_clock.h"

namespace ibcni::ipam {

/// What a backend is built with besides the configuration: the etcd lease this node was using
/// (kept in the ledger) and where to report a new one.
struct BackendContext {
  std::string node;
  std::int64_t etcdLease = 0;
  std::function<void(std::int64_t)> onLeaseGranted;
};

/// Builds the configured backend (wiring: the production one talks HTTP(S) through libcurl).
using BackendFactory = std::function<cni::Result<std::unique_ptr<BlockBackend>>(const config::ClusterConf&,
                                                                                const BackendContext&)>;

/// What one periodic pass did (ibcni-ipam gc, ibcni reconcile).
struct PoolMaintenance {
  bool renewed = false;          ///< every hold was confirmed by the backend
  bool livenessRenewed = false;  ///< the node's liveness had lapsed and was granted anew (a warning)
  std::vector<std::string> released;           ///< blocks given back (empty, or asked for)
  std::vector<std::string> lost;               ///< claims another node holds now: nothing more is handed out from them
  std::vector<std::string> reclaimed;          ///< claims found gone and claimed again
  std::vector<std::string> adopted;            ///< claims found in the backend as this node's that the ledger lacked
  std::vector<std::string> addressesReleased;  ///< address claims (named, borrowed) no attachment holds any more
  std::vector<std::string> takenOver;          ///< claims of nodes certainly gone, taken (then given back)
  std::vector<std::string> lent;               ///< addresses lent to nodes that asked for room
  std::vector<std::string> loansReturned;      ///< addresses lent earlier that their borrower gave back
};

class ClusterPool final : public BlockSource {
 public:
  using BootClock = std::function<os::BootStamp()>;
  using WallClock = std::function<std::chrono::system_clock::time_point()>;

  /// `config` (with config.cluster set), `allocator` and `factory` must outlive the pool. `dir` is
  /// the pool's store directory, `network` the network name of the request. `bootClock` null:
  /// os::bootNow (durations); `wallClock` null: system_clock (the age of records).
  ClusterPool(const config::IpamConfig& config, std::string network, std::string node, std::string dir,
              const Allocator& allocator, BackendFactory factory, BootClock bootClock = {}, WallClock wallClock = {});

  [[nodiscard]] cni::Result<void> begin() override;
  [[nodiscard]] cni::Result<void> prepare() override;
  [[nodiscard]] const std::vector<Interval>& owned(std::size_t set) override;
  [[nodiscard]] cni::Result<bool> grow(std::size_t set) override;
  [[nodiscard]] cni::Result<void> claimNamed(const net::IpAddress& ip, const AttachmentKey& owner, const PodRef& pod,
                                             const std::string& what) override;
  [[nodiscard]] cni::Error exhausted(std::size_t set) override;

  /// The periodic pass, under the store's lock (`held`: every allocation of the store, loans
  /// included; `loans`: where loans are recorded): renews and checks every hold, resolves claims
  /// whose answer was lost, gives back what is no longer needed (confirmed before it leaves the
  /// ledger), serves other nodes' demand for room, and takes over the claims of nodes certainly
  /// gone. `dryRun`: no backend write and no ledger change; says what it would do.
  [[nodiscard]] cni::Result<PoolMaintenance> maintain(const std::vector<Allocation>& held, LoanBook& loans,
                                                      bool dryRun);
  /// What maintain() would do, without a write: claims to adopt or found lost, blocks and
  /// addresses it would give back.
  [[nodiscard]] cni::Result<PoolMaintenance> preview(const std::vector<Allocation>& held);

  /// `ibcni-ipam pools --redefine`: replaces the pool's definition with this configuration's, when
  /// the pool holds no claim at all (a drained pool). The definition is closed first (no claim is
  /// made under it meanwhile; one made just before is seen and the redefinition refused), then the
  /// pool is checked empty, then the new one is written. Error 7 naming the claims left, or an
  /// overlap with another pool.
  [[nodiscard]] cni::Result<PoolDefinition> redefine();
  /// `ibcni-ipam pools --retire`: when the pool holds no claim, takes it out of the pools'
  /// registry (its ranges free for another pool) and removes its definition. Error 7 naming the
  /// claims left.
  [[nodiscard]] cni::Result<void> retire();

  [[nodiscard]] const Ledger& ledger() const { return ledger_; }
  [[nodiscard]] const BlockGrid& grid() const { return grid_; }
  [[nodiscard]] const std::string& node() const { return node_; }
  /// How long ago the backend last confirmed this node's holds (nullopt: never on this boot).
  [[nodiscard]] std::optional<std::chrono::nanoseconds> confirmedAgo() const;

 private:
  struct Pass;  // one periodic pass (cluster_pool_pass.cpp)

  // Backend and ledger.
  /// The pool's name in the backend (IdentSpace::backendPool): every backend call names the pool so.
  [[nodiscard]] std::string bpool() const { return grid_.space().backendPool(cluster_.pool); }
  /// The name of `ip`'s address claim in the backend and the ledger (IdentSpace::claimName).
  [[nodiscard]] std::string nameOf(const net::IpAddress& ip) const { return grid_.space().claimName(ip); }
  cni::Result<BlockBackend*> backend();
  cni::Result<void> save();
  cni::Error backendError(const BackendError& e, const std::string& action) const;
  LedgerEntry* block(const std::string& key);
  LedgerEntry* address(const std::string& name);
  void recompute();
  std::chrono::nanoseconds window() const;
  /// A claim whose error may hide a write that reached the backend (its intent is kept).
  static bool retryable(const BackendError& e);

  // ADD's side (cluster_pool.cpp; named addresses in cluster_pool_named.cpp).
  cni::Result<void> checkIdentity() const;
  cni::Result<void> checkDefinition() const;
  cni::Result<void> checkAgainst(const std::string& theirs, const std::string& was, const std::string& more) const;
  cni::Result<void> define(BlockBackend& be);
  cni::Result<PoolDefinition> recordDefinition(BlockBackend& be);
  cni::Result<void> refreshDefinition();
  cni::Result<void> changeRegistry(BlockBackend& be, const std::string& change,
                                   const std::function<cni::Result<bool>(PoolRegistry&)>& edit);
  /// An entry of this pool with other fields: refused (a node's first definition) or replaced (a
  /// redefinition, and a definition an older ibcni recorded before it entered it).
  enum class Entry { kKeep, kReplace };
  cni::Result<void> registerPool(BlockBackend& be, const std::string& fields, Entry entry);
  cni::Result<void> unregisterPool(BlockBackend& be);
  // The backend, and the pool's definition it keeps now (refreshDefinition, --redefine, --retire).
  struct StoredDefinition {
    BlockBackend* backend;
    std::optional<PoolDefinition> definition;  ///< nullopt: the pool has none
  };
  cni::Result<StoredDefinition> storedDefinition();
  cni::Result<PoolDefinition> closeDrained(BlockBackend& be, const PoolDefinition& current, const std::string& option);
  std::unexpected<cni::Error> reopen(BlockBackend& be, const PoolDefinition& current, const std::string& closedIdentity,
                                     const std::string& option, cni::Error why);
  cni::Result<void> stillDefined(BlockBackend& be, ClaimKind kind, const std::string& name, const std::string& owner);
  cni::Result<void> resolvePending();
  cni::Result<void> confirm();
  /// confirm() after a claim that found the claim already this node's (`state` kAdopted).
  cni::Result<void> confirmAdopted(ClaimState state);
  cni::Result<std::optional<Holder>> claimBlock(BlockBackend& be, const Block& blk, const Holder* takeFrom);
  cni::Result<std::optional<Holder>> settleBlock(BlockBackend& be, const Block& blk,
                                                 const BackendResult<ClaimOutcome>& outcome, const Holder* takeFrom,
                                                 const os::BootStamp& sent);
  cni::Result<void> settleBlockIntents(BlockBackend& be, bool soft);
  cni::Result<bool> claimFree(BlockBackend& be, std::size_t set);
  cni::Result<bool> adoptLoans(BlockBackend& be, std::size_t set);
  cni::Result<void> askForRoom(BlockBackend& be);
  cni::Result<void> claimReserved(const net::IpAddress& ip, const AttachmentKey& owner, const PodRef& pod,
                                  const std::string& what);

  // Shared by ADD and the pass (cluster_pool_sync.cpp).
  cni::Result<void> syncWith(const std::vector<Claim>& mine, bool listedBlocks, bool listedAddresses,
                             std::vector<std::string>* adopted);
  cni::Result<void> applyRenewal(BlockBackend& be, const std::vector<HeldClaim>& held, const RenewOutcome& renewed,
                                 PoolMaintenance& out);
  std::vector<HeldClaim> heldClaims() const;

  const config::IpamConfig& config_;
  const config::ClusterConf& cluster_;
  std::string network_;
  std::string node_;
  std::string dir_;
  BackendFactory factory_;
  BootClock bootClock_;
  WallClock wallClock_;
  BlockGrid grid_;
  std::string fields_;  ///< definitionFields(config)
  std::unique_ptr<BlockBackend> backend_;
  Ledger ledger_;
  bool fresh_ = false;      ///< no ledger on disk yet: the node's claims are looked up before the first claim
  bool asked_ = false;      ///< this ADD asked the pool's holders for room (exhausted() says so)
  std::vector<std::vector<Interval>> owned_;
  std::mt19937_64 rng_;
};

}  // namespace ibcni::ipam
