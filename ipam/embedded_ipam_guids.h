// SPDX-License-Identifier: Apache-2.0
// sriov mode's GUID pools (ibcni/ipam/guid_pool.h) on the embedded IPAM's machinery: a node-local
// store of GUIDs, the allocator over it and, for a cluster pool, the same block machinery as an
// address pool's (backend pool "guid_<pool>").
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/config/guid_pool_conf.h"
#include "ibcni/ipam/guid_pool.h"
#include "ipam/embedded_ipam.h"

namespace ibcni::ipam {

/// The file in a GUID pool's store directory that keeps the guidPool object of the latest ADD
/// (GuidPoolConf::poolFile): release, held and maintain read the pool from it.
inline constexpr const char* kGuidPoolFileName = "pool.json";

/// The GUID pools of this node. Each pool's store lives in <dataDir>/.guid/<pool> (clusterPoolDir,
/// SpaceKind::kGuid), node-local and cluster pools alike, and is shared by every network naming
/// the pool: an allocation records its network, and only that network's calls release it.
///
/// A GUID is never released because its attachment's network namespace is gone (a VF keeps its
/// GUID in a namespace that lingers): only release(), gc() and maintain()'s sweep of allocations
/// without an ibcni record give GUIDs back.
///
/// Errors: 4 (a cluster pool without options.backends), 5 (a store or pool.json that cannot be
/// read or written), 7 (the pool's range overlaps another pool of this node, or the cluster's
/// definition; a requested GUID outside the range), 11 (a requested GUID is held; the store's lock
/// is busy; the backend is unreachable), 108 (no free GUID).
class EmbeddedGuidPools final : public GuidPools {
 public:
  /// The same options as the embedded IPAM's (data directory default, lock timeout, backends,
  /// clocks, node-name file).
  explicit EmbeddedGuidPools(EmbeddedIpamOptions options = {});

  /// <dataDir>/.guid/<pool>: guidPool.dataDir, else options.defaultDataDir.
  [[nodiscard]] std::string storeDirOf(const config::GuidPoolConf& pool) const override;
  [[nodiscard]] cni::Result<GuidLease> allocate(const GuidRequest& request) override;
  [[nodiscard]] cni::Result<bool> release(const std::string& storeDir, const cni::AttachmentKey& key,
                                          const std::string& network) override;
  [[nodiscard]] cni::Result<std::optional<net::Guid>> held(const std::string& storeDir,
                                                           const cni::AttachmentKey& key) override;
  [[nodiscard]] cni::Result<std::vector<ReleasedAllocation>> gc(const config::GuidPoolConf& pool,
                                                                const std::string& network,
                                                                const std::vector<cni::AttachmentKey>& keep) override;
  [[nodiscard]] cni::Result<ReclaimOutcome> maintain(
      const std::string& storeDir, bool dryRun,
      const std::function<bool(const std::string& network, const cni::AttachmentKey&)>& recorded) override;

  /// A cluster GUID pool's report for `network` (`ibcni pools`), as EmbeddedIpam::pools gives an
  /// address pool's: its blocks (GUID ranges) as the backend lists them with their holders, this
  /// node's fill and ledger, the GUIDs claimed one by one (PoolReport::guids). Changes nothing.
  /// Error 7 for a node-local pool; a backend error as toCniError() words it.
  [[nodiscard]] cni::Result<PoolReport> pools(const config::GuidPoolConf& pool, const std::string& network);

  /// Every GUID the store at `storeDir` hands out on this node, with its network and attachment
  /// (`ibcni pools`; node-local and cluster pools alike). Reads the store only: no backend call.
  /// Empty when there is no store there.
  [[nodiscard]] cni::Result<std::vector<ReleasedAllocation>> holders(const std::string& storeDir);

 private:
  EmbeddedIpamOptions options_;
};

}  // namespace ibcni::ipam
