// SPDX-License-Identifier: Apache-2.0
// Who this node is in a cluster pool (ipam.cluster, guidPool.cluster): the name it claims blocks as.
#pragma once

#include <string>

#include "ibcni/cni/error.h"
#include "ibcni/config/ipam_conf.h"

namespace ibcni::ipam {

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
