// SPDX-License-Identifier: Apache-2.0
// What the node agent reads of ibcni-ipam's pools on this node (its metrics and its reconcile pass),
// through the IPAM's own rules: each pool directory reached as the IPAM reaches it (os/safe_path.h:
// root's, and writable by no one else), its store read under its lock, its kept configuration
// (kNetworkFileName) parsed as ibcni-ipam parses it. From disk only: no backend is asked.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/cni/error.h"
#include "ibcni/config/net_conf.h"

namespace ibcni::ipam {

/// The configuration a pool's directory keeps (kNetworkFileName); nullopt when it keeps none (not
/// a pool, or one written before pools kept their configuration). Error 5 when the file is there
/// but holds no ibcni-ipam configuration.
[[nodiscard]] cni::Result<std::optional<config::NetConf>> readPoolConfig(const std::filesystem::path& poolDir);

/// One pool's use on this node.
struct PoolUse {
  std::string network;  ///< the network its kept configuration names
  std::string pool;     ///< node-local: the directory's name (the network's); cluster: ipam.cluster.pool
  bool cluster = false;
  std::uint64_t used = 0;  ///< addresses held inside the pool's ranges
  /// Node-local: what round-robin can still hand out (ranges less gateways and exclusions, less used).
  /// Cluster: the capacity of the blocks this node owns (block size each) less used, at least 0.
  std::uint64_t free = 0;
  /// Cluster: this node's ledger's blocks by state ("intent", "owned", "releasing", "lost").
  std::map<std::string, std::uint64_t> blocks;
  bool operator==(const PoolUse&) const = default;
};

struct PoolUseReport {
  /// Per data directory: its node-local pools, then its cluster pools (.cluster), each in name order.
  std::vector<PoolUse> pools;
  std::vector<std::string> errors;  ///< what could not be read, in words
};

/// The pools of every data directory, each store read under its lock (waiting at most `lockWait`
/// for an ADD or DEL that holds it). A directory the IPAM would refuse is reported, not read.
[[nodiscard]] PoolUseReport readPoolUse(const std::vector<std::string>& dataDirs, std::chrono::milliseconds lockWait);

}  // namespace ibcni::ipam
