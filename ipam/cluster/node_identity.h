// SPDX-License-Identifier: Apache-2.0
// Who this node is in a cluster pool, and where its node-local state of a pool lives.
#pragma once

#include <string>

#include "ibcni/cni/error.h"
#include "ipam/policy/allocation_space.h"
#include "ibcni/config/ipam_conf.h"

namespace ibcni::ipam {

/// Where the node-local state of cluster pool `pool` lives under a data directory: pools are shared
/// by name across networks, so it is not a network's directory. ".cluster" (address pools) and
/// ".guid" (GUID pools, `kind` kGuid) cannot be network names (those start with a letter or digit).
[[nodiscard]] std::string clusterPoolDir(const std::string& dataDir, const std::string& pool,
                                         SpaceKind kind = SpaceKind::kIp);

/// This node's name for cluster mode, and where it came from.
struct NodeIdentity {
  std::string name;
  std::string source;  ///< "ipam.cluster.nodeName", the node-name file's path, or "hostname"
};

/// clusterNodeName(), saying where the name came from.
[[nodiscard]] cni::Result<NodeIdentity> clusterNodeIdentity(const config::ClusterConf& cluster,
                                                            const std::string& nodeNameFile);

/// This node's name for cluster mode: ipam.cluster.nodeName, else the first line of `nodeNameFile`,
/// else the host name (lowercased, as the kubelet does). Error 7 when none is a valid node name.
[[nodiscard]] cni::Result<std::string> clusterNodeName(const config::ClusterConf& cluster,
                                                       const std::string& nodeNameFile);

}  // namespace ibcni::ipam
