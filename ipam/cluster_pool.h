// SPDX-License-Identifier: Apache-2.0
// Cluster mode (ipam.cluster): the blocks of a shared pool this node holds, claimed through a
// BlockBackend and remembered in the pool's ledger. The allocator hands out addresses only inside
// them (BlockSource); only a node whose blocks are full talks to the backend.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "allocator.h"
#include "block_grid.h"
#include "block_ledger.h"
#include "ibcni/config/ipam_conf.h"
#include "ibcni/ipam/block_backend.h"

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
  bool renewed = false;
  std::vector<std::string> released;  ///< blocks given back (empty for releaseAfter)
  std::vector<std::string> lost;      ///< blocks another node took (renewal found them gone)
  std::vector<std::string> adopted;   ///< blocks found in the backend as this node's
  std::vector<std::string> addressesReleased;
};

class ClusterPool final : public BlockSource {
 public:
  using Clock = std::function<std::chrono::system_clock::time_point()>;

  /// `config` (with config.cluster set), `allocator` and `factory` must outlive the pool. `dir` is
  /// the pool's store directory, `network` the network name of the request.
  ClusterPool(const config::IpamConfig& config, std::string network, std::string node, std::string dir,
              const Allocator& allocator, BackendFactory factory, Clock clock);

  [[nodiscard]] cni::Result<void> begin() override;
  void resolvePending() override;
  [[nodiscard]] const std::vector<Interval>& owned(std::size_t set) override;
  [[nodiscard]] cni::Result<bool> grow(std::size_t set) override;
  [[nodiscard]] cni::Result<void> claimNamed(const net::IpAddress& ip, const AttachmentKey& owner,
                                             const std::string& what) override;
  [[nodiscard]] std::string describeFull(std::size_t set) override;

  /// The periodic pass, under the store's lock (`held`: every allocation of the store): resolves
  /// claims whose answer was lost, renews this node's claims, stops using blocks another node
  /// took, gives back address claims no attachment holds and blocks empty for releaseAfter (a node
  /// keeps at least one per range set).
  [[nodiscard]] cni::Result<PoolMaintenance> maintain(const std::vector<Allocation>& held, bool dryRun);

  [[nodiscard]] const Ledger& ledger() const { return ledger_; }
  [[nodiscard]] const BlockGrid& grid() const { return grid_; }
  [[nodiscard]] const std::string& node() const { return node_; }

 private:
  cni::Result<BlockBackend*> backend();
  cni::Result<std::optional<Holder>> claimBlock(BlockBackend& be, const Block& blk, const Holder* takeFrom);
  cni::Result<void> save();
  cni::Result<void> define(BlockBackend& b);
  cni::Result<void> reconcileWith(const std::vector<Claim>& mine, std::vector<std::string>* adopted);
  void recompute();
  cni::Error backendError(const BackendError& e, const std::string& action) const;
  std::string now() const;

  const config::IpamConfig& config_;
  const config::ClusterConf& cluster_;
  std::string network_;
  std::string node_;
  std::string dir_;
  BackendFactory factory_;
  Clock clock_;
  BlockGrid grid_;
  std::unique_ptr<BlockBackend> backend_;
  Ledger ledger_;
  bool fresh_ = false;  ///< no ledger on disk yet: the node's blocks are looked up before the first claim
  std::vector<std::vector<Interval>> owned_;
  std::mt19937_64 rng_;
};

}  // namespace ibcni::ipam
