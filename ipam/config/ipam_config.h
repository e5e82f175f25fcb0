// SPDX-License-Identifier: Apache-2.0
// The embedded IPAM's part of the configuration parse (ipam/config/*.cpp): the `ipam` object of a
// network configuration into IpamConfig. The plugin's parser (plugin/config/) calls it.
#pragma once

#include <string>
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
/// A pool name: 1-63 of [a-z0-9-.], starting and ending with [a-z0-9] (a Kubernetes label value).
[[nodiscard]] bool validPoolName(std::string_view s);

}  // namespace ibcni::config
