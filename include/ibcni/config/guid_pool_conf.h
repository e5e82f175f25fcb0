// SPDX-License-Identifier: Apache-2.0
// sriov mode's `guidPool`: a range of VF GUIDs handed out in aligned blocks, node-local or shared by
// every node through the same cluster backends as ipam.cluster. ipam/config/guid_pool.cpp parsed and
// validated it; what reads it trusts every field. sriov mode takes VF GUIDs from it
// (plugin/modes/sriov_vf_guid_pool.h) through ipam::GuidPools (ipam/embedded_ipam_guids.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ibcni/config/ipam_conf.h"
#include "ibcni/net/ip.h"

namespace ibcni::config {

/// guidPool.assign: when a VF gets its GUID from the pool.
enum class GuidAssign {
  kWhenUnset,  ///< "when-unset": no GUID is requested and the VF's GUID is all zeros or all ones
  kAlways,     ///< "always": whenever no GUID is requested, replacing the VF's own until DEL
};

/// The canonical `guidPool` object.
struct GuidPoolConf {
  /// guidPool.range "FIRST-LAST": first <= last, neither end 0 nor all ones, first aligned to
  /// blockSize and the size a multiple of it (whole blocks only).
  net::Guid first;
  net::Guid last;
  std::uint32_t blockSize = 256;  ///< GUIDs per block: a power of two from 1 to 65536
  std::string pool;               ///< guidPool.pool, else the network name
  GuidAssign assign = GuidAssign::kWhenUnset;
  std::string dataDir;            ///< empty: the caller's default (kDefaultIpamDataDir), as ipam.dataDir
  /// guidPool.cluster: absent = node-local. Its pool, poolPath and blockSize are guidPool's (the
  /// cluster object itself refuses those keys).
  std::optional<ClusterConf> cluster;
  /// The guidPool object as given, as JSON text: what the pool's store directory keeps (pool.json),
  /// so that DEL, GC and the node agent's pass read the pool the attachment was given from, whatever
  /// the configuration says by then.
  std::string poolFile;
};

}  // namespace ibcni::config
