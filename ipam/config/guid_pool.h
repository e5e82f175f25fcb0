// SPDX-License-Identifier: Apache-2.0
// The `guidPool` object of sriov mode (ipam/config/guid_pool.cpp): a range of VF GUIDs in aligned
// blocks, node-local or with a cluster object read as ipam.cluster is. The plugin's parser
// (plugin/config/) calls it.
#pragma once

#include <string>

#include "ibcni/config/guid_pool_conf.h"
#include "lib/json/json_fields.h"

namespace ibcni::config {

/// `guidPool` of the network `network` (the pool's default name): every key typed and range-checked.
/// @return error 7 naming the field ("guidPool.blockSize"), the value and the fix.
[[nodiscard]] cni::Result<GuidPoolConf> guidPoolObject(const fields::json& j, const std::string& network);

}  // namespace ibcni::config
