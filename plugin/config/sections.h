// SPDX-License-Identifier: Apache-2.0
// The sections of the configuration parser, one file each (plugin/config/*.cpp only); the `ipam`
// object is the IPAM's (ipam/config/ipam_config.h).
#pragma once

#include <optional>
#include <string_view>

#include "ibcni/config/net_conf.h"
#include "ipam/config/ipam_config.h"

namespace ibcni::config {

/// "error", "warn" (or "warning"), "info", "debug".
[[nodiscard]] std::optional<LogLevel> logLevelFromText(std::string_view s);

/// plugin_keys.cpp: ibcni's own keys into `c` (role kPlugin only).
[[nodiscard]] cni::Result<void> pluginKeys(const fields::json& j, NetConf& c, cni::Command command);

}  // namespace ibcni::config
