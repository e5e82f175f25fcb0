// SPDX-License-Identifier: Apache-2.0
#include "ipam/cluster/node_identity.h"

namespace ibcni::ipam {

std::string clusterPoolDir(const std::string& dataDir, const std::string& pool, SpaceKind kind) {
  return dataDir + (kind == SpaceKind::kGuid ? "/.guid/" : "/.cluster/") + pool;
}

}  // namespace ibcni::ipam
