// SPDX-License-Identifier: Apache-2.0
// Where this node's node-local state of a cluster pool lives (who the node is: config/node_name.h).
#pragma once

#include <string>

#include "ipam/policy/allocation_space.h"

namespace ibcni::ipam {

/// Where the node-local state of cluster pool `pool` lives under a data directory: pools are shared
/// by name across networks, so it is not a network's directory. ".cluster" (address pools) and
/// ".guid" (GUID pools, `kind` kGuid) cannot be network names (those start with a letter or digit).
[[nodiscard]] std::string clusterPoolDir(const std::string& dataDir, const std::string& pool,
                                         SpaceKind kind = SpaceKind::kIp);

}  // namespace ibcni::ipam
