// SPDX-License-Identifier: Apache-2.0
// The `guidPool` object of sriov mode (ipam/config/guid_pool.cpp): a range of VF GUIDs in aligned
// blocks, node-local or with a cluster object read as ipam.cluster is. The plugin's parser
// (plugin/config/) calls it.
#pragma once

#include <string>
#include <string_view>

#include "ibcni/config/guid_pool_conf.h"
#include "lib/json/json_fields.h"

namespace ibcni::config {

/// `guidPool` of the network `network` (the pool's default name): every key typed and range-checked.
/// @return error 7 naming the field ("guidPool.blockSize"), the value and the fix.
[[nodiscard]] cni::Result<GuidPoolConf> guidPoolObject(const fields::json& j, const std::string& network);

/// The GUID pool `pool.json` kept (GuidPoolConf::poolFile) in the store directory of pool `pool`
/// (whose name is the default the object was given with: the directory is named after the pool).
/// @return error 5 when the text is not a JSON object, else guidPoolObject()'s.
[[nodiscard]] cni::Result<GuidPoolConf> guidPoolFile(std::string_view text, const std::string& pool);

/// What the embedded IPAM's machinery runs a GUID pool with: one range set of family
/// net::kFamilyGuid whose one range is [first, last] (path "guidPool.range", which messages name),
/// `pool`'s cluster object and data directory.
[[nodiscard]] IpamConfig guidIpamConfig(const GuidPoolConf& pool);

}  // namespace ibcni::config
