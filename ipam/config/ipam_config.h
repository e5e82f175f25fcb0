// SPDX-License-Identifier: Apache-2.0
// The embedded IPAM's part of the configuration parse (ipam/config/*.cpp): the `ipam` object of a
// network configuration into IpamConfig, the sections every reader of a network configuration shares,
// and the whole of it as ibcni-ipam reads it. The plugin's parser (plugin/config/) calls it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "ibcni/config/ipam_conf.h"
#include "ibcni/config/net_conf.h"
#include "lib/json/json_fields.h"

namespace ibcni::config {

// The field readers are the parser's own vocabulary in every section.
using fields::addressField;
using fields::attachmentList;
using fields::dnsObject;
using fields::invalid;
using fields::ipList;
using fields::json;
using fields::kBad;
using fields::pciField;
using fields::stringField;
using fields::stringList;
using fields::u32Field;

/// ipam_network.cpp: an object member: nullptr when absent or null; any other non-object is error 7,
/// "invalid <key> = <value>: <accepted>".
[[nodiscard]] cni::Result<const fields::json*> objectField(const fields::json& j, const char* key,
                                                          const char* accepted);
/// cniVersion (error 1 when unsupported or when it does not allow `command`), name and type into `c`.
[[nodiscard]] cni::Result<void> parseNetworkHeader(const fields::json& j, cni::Command command, NetConf& c);
/// `ipam`: its type (a plugin in CNI_PATH, or none for no addresses) and, for the embedded IPAM (or
/// for `role` kIpamPlugin), its object, read after the name (a cluster pool is named after it).
[[nodiscard]] cni::Result<void> parseIpamSection(const fields::json& j, Role role, NetConf& c);
/// args.cni.ips into `c`. @return args.cni, or nullptr when there is none.
[[nodiscard]] cni::Result<const fields::json*> parseArgsIps(const fields::json& j, NetConf& c);
/// prevResult, and GC's list of the attachments that stay.
[[nodiscard]] cni::Result<void> parseChainAndGc(const fields::json& j, cni::Command command, NetConf& c);
/// The request as ibcni-ipam reads it as an IPAM plugin (Role::kIpamPlugin): the shared sections,
/// runtimeConfig.ips, and ipam.type required. parseIpamNetworkFile (ibcni/config/net_conf.h) reads a
/// saved network file by it.
[[nodiscard]] cni::Result<NetConf> ipamNetConfFromJson(const fields::json& j, cni::Command command);

/// ipam_conf.cpp: the embedded IPAM's `ipam` object.
[[nodiscard]] cni::Result<IpamConfig> ipamObject(const fields::json& j);
/// A data directory (ipam.dataDir, guidPool.dataDir) given as `value`: an absolute path under the
/// rules of os/safe_path.h, without its trailing '/'; error 7 naming `path` otherwise.
[[nodiscard]] cni::Result<std::string> dataDirValue(const fields::json& value, const std::string& path);
/// The member `key` of `j`, or nullptr when it is absent or null (a key not given).
[[nodiscard]] const fields::json* memberGiven(const fields::json& j, const char* key);
/// "IPv4" or "IPv6" (AF_INET, AF_INET6), for messages.
[[nodiscard]] std::string familyName(int family);

/// ipam_range_sets.cpp: the range sets (ipam.ranges, or the legacy ipam.subnet) into `c`: at least
/// one, none overlapping another.
[[nodiscard]] cni::Result<void> parseRangeSets(const fields::json& j, IpamConfig& c);
/// The checks that need every range of `c`: exclusions (a warning for one outside every range),
/// reservations, and a range set with nothing left to hand out.
[[nodiscard]] cni::Result<void> validateAgainstRanges(IpamConfig& c);

/// ipam_cluster.cpp: ipam.cluster, checked against the parsed ranges of `ipam`.
[[nodiscard]] cni::Result<ClusterConf> clusterObject(const fields::json& j, const IpamConfig& ipam);

/// Where a cluster object is and what it owns: ipam.cluster holds its pool and blockSize keys;
/// guidPool.cluster leaves them to guidPool, and refuses them inside.
struct ClusterObjectRules {
  std::string path;        ///< the object's field path in messages: "ipam.cluster", "guidPool.cluster"
  std::string poolKeysIn;  ///< empty: pool and blockSize are keys of this object; else the object that has them
  /// The checks that need the parsed object, run before its unknown keys are refused (may be empty).
  std::function<cni::Result<void>(const ClusterConf&)> check;
};
/// A cluster object (backend, pool, blockSize, nodeName, timeouts, the backend's object), every key
/// typed and range-checked; an unknown key is error 7. Every message names the field from `rules.path`.
[[nodiscard]] cni::Result<ClusterConf> clusterObjectAt(const fields::json& j, const ClusterObjectRules& rules);
/// A pool name: 1-63 of [a-z0-9-.], starting and ending with [a-z0-9] (a Kubernetes label value).
[[nodiscard]] bool validPoolName(std::string_view s);
/// The member "pool" of `j` as a pool name (validPoolName), the field called `path` in messages.
[[nodiscard]] cni::Result<std::optional<std::string>> poolNameField(const fields::json& j, const std::string& path);
/// The network name as the default name of a pool, or error 7 saying that `path` is needed.
[[nodiscard]] cni::Result<std::string> networkPoolName(const std::string& network, const std::string& path);
/// The member "blockSize" of `j`: a power of two from `smallest` to 65536, the field `path` in messages.
[[nodiscard]] cni::Result<std::optional<std::uint32_t>> blockSizeField(const fields::json& j, const std::string& path,
                                                                       std::uint32_t smallest, std::uint32_t example);
/// Error 7 for the first member of `obj` not in `known` (a misspelt key), naming `path`.`key`.
[[nodiscard]] cni::Result<void> refuseUnknownKeys(const fields::json& obj, const std::string& path,
                                                  const std::set<std::string>& known);

}  // namespace ibcni::config
