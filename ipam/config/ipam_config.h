// SPDX-License-Identifier: Apache-2.0
// The embedded IPAM's part of the configuration parse (ipam/config/*.cpp): the `ipam` object of a
// network configuration into IpamConfig. The plugin's parser (plugin/config/) calls it.
#pragma once

#include <string_view>

#include "ibcni/config/ipam_conf.h"
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

/// ipam_conf.cpp: the embedded IPAM's `ipam` object.
[[nodiscard]] cni::Result<IpamConfig> ipamObject(const fields::json& j);

/// ipam_cluster.cpp: ipam.cluster, checked against the parsed ranges of `ipam`.
[[nodiscard]] cni::Result<ClusterConf> clusterObject(const fields::json& j, const IpamConfig& ipam);
/// A pool name: 1-63 of [a-z0-9-.], starting and ending with [a-z0-9] (a Kubernetes label value).
[[nodiscard]] bool validPoolName(std::string_view s);

}  // namespace ibcni::config
