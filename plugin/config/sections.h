// SPDX-License-Identifier: Apache-2.0
// The sections of the configuration parser, one file each (config/*.cpp only).
#pragma once

#include <optional>
#include <string_view>

#include "config/json_fields.h"
#include "ibcni/config/ipam_conf.h"
#include "ibcni/config/net_conf.h"

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

/// "error", "warn" (or "warning"), "info", "debug".
[[nodiscard]] std::optional<LogLevel> logLevelFromText(std::string_view s);

/// plugin_keys.cpp: ibcni's own keys into `c` (role kPlugin only).
[[nodiscard]] cni::Result<void> pluginKeys(const fields::json& j, NetConf& c, cni::Command command);

/// ipam_conf.cpp: the embedded IPAM's `ipam` object.
[[nodiscard]] cni::Result<IpamConfig> ipamObject(const fields::json& j);

/// ipam_cluster.cpp: ipam.cluster, checked against the parsed ranges of `ipam`.
[[nodiscard]] cni::Result<ClusterConf> clusterObject(const fields::json& j, const IpamConfig& ipam);
/// A pool name: 1-63 of [a-z0-9-.], starting and ending with [a-z0-9] (a Kubernetes label value).
[[nodiscard]] bool validPoolName(std::string_view s);

}  // namespace ibcni::config
