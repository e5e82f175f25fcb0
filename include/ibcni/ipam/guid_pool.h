// SPDX-License-Identifier: Apache-2.0
// sriov mode's guidPool: VF GUIDs handed out from a range in aligned blocks, node-local or claimed
// cluster-wide through the same block machinery as ibcni-ipam's addresses (ipam/embedded_ipam_guids.h
// implements it). sriov mode asks for a GUID after it wrote its record ahead, and releases it on DEL,
// GC and reconcile once the VF no longer carries it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/cni/cmd_args.h"
#include "ibcni/cni/error.h"
#include "ibcni/config/guid_pool_conf.h"
#include "ibcni/ipam/ipam.h"
#include "ibcni/net/ip.h"

namespace ibcni::ipam {

/// The network under which ibcni-dra's claims hold their pool GUIDs (key: the claim's uid and the
/// device's name), and the pool name of a guidPool without `pool` in a claim's configuration.
/// ibcni-dra's checkpoint records them, and its Unprepare releases them: the node agent's pass,
/// which releases a GUID whose attachment has no CNI record, leaves this network's alone.
inline constexpr const char* kDraGuidNetwork = "ibcni-dra";

/// One request for a VF GUID: the pool as config/ parsed it, the network and the attachment.
struct GuidRequest {
  const config::GuidPoolConf& pool;
  const std::string& network;    ///< the network's name (NetConf::name): whose allocation it is
  const cni::CmdArgs& args;      ///< CNI_CONTAINERID, CNI_IFNAME, CNI_NETNS
  const cni::CniArgs& cniArgs;   ///< the pod's identity, for messages and reports
  /// A GUID the pod asked for inside the pool's range: claimed (error 11 naming its holder when
  /// another attachment holds it); none: the pool picks one.
  std::optional<net::Guid> requested;
  std::string requestedFrom;  ///< the field that asked, for messages ("runtimeConfig.infinibandGUID")
};

/// A GUID handed out: where it is kept, so that DEL releases it whatever the configuration says by then.
struct GuidLease {
  net::Guid guid;
  std::string pool;      ///< guidPool.pool
  std::string storeDir;  ///< the pool's store on this node (<dataDir>/.guid/<pool>)
};

/// The GUID pools of this node.
class GuidPools {
 public:
  virtual ~GuidPools() = default;

  /// The store of `pool` on this node (<dataDir>/.guid/<pool>), where allocate() keeps its GUIDs:
  /// sriov mode writes it in the attachment's record before it allocates.
  [[nodiscard]] virtual std::string storeDirOf(const config::GuidPoolConf& pool) const = 0;

  /// The attachment's GUID: the one it holds already (idempotent per containerID and ifname), the
  /// requested one, or a free one of the node's blocks (claiming a block when none has room).
  /// Errors: 7 (the pool's definition conflicts with the cluster's), 11 (the requested GUID is held,
  /// the store's lock is busy, the backend is unreachable), 108 (no free GUID in the pool).
  [[nodiscard]] virtual cni::Result<GuidLease> allocate(const GuidRequest& request) = 0;

  /// Releases what `key` of `network` holds in the store at `storeDir` (GuidLease::storeDir, kept
  /// in the attachment's record). No backend call. @return whether it held a GUID there; a missing
  /// store or allocation is success (false).
  [[nodiscard]] virtual cni::Result<bool> release(const std::string& storeDir, const cni::AttachmentKey& key,
                                                  const std::string& network) = 0;

  /// The GUID `key` holds in the store at `storeDir`, if any.
  [[nodiscard]] virtual cni::Result<std::optional<net::Guid>> held(const std::string& storeDir,
                                                                   const cni::AttachmentKey& key) = 0;

  /// GC: releases every GUID of `network` in `pool`'s store whose attachment is not in `keep`.
  [[nodiscard]] virtual cni::Result<std::vector<ReleasedAllocation>> gc(const config::GuidPoolConf& pool,
                                                                        const std::string& network,
                                                                        const std::vector<cni::AttachmentKey>& keep) = 0;

  /// The node agent's pass over the store at `storeDir`: releases every GUID whose attachment has
  /// no ibcni record (`recorded` false, asked under the store's lock: an ADD writes its record
  /// before it allocates) and, for a cluster pool, renews, gives back and adopts blocks.
  /// A pool's network namespace is never a reason to release: a VF keeps its GUID in a lingering
  /// namespace. `dryRun`: only says what it would do.
  [[nodiscard]] virtual cni::Result<ReclaimOutcome> maintain(
      const std::string& storeDir, bool dryRun,
      const std::function<bool(const std::string& network, const cni::AttachmentKey&)>& recorded) = 0;
};

}  // namespace ibcni::ipam
