// SPDX-License-Identifier: Apache-2.0
// How the allocator names addresses and their holders in its messages and logs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ipam/policy/allocation.h"

namespace ibcni::ipam {

/// "10.1.2.3, fd00::3"
inline std::string joinAddresses(const std::vector<net::IpAddress>& v) {
  std::string out;
  for (const auto& a : v) {
    out += (out.empty() ? "" : ", ") + a.toString();
  }
  return out;
}

/// "containerID <id> ifname <name> (pod <ns/name>), netns <path>": what the record says.
inline std::string describeHolder(const AttachmentKey& key, const std::optional<Allocation>& rec) {
  std::string out = "containerID " + key.containerId + " ifname " + key.ifName;
  if (rec && !rec->pod.empty()) {
    out += " (pod " + rec->pod.toString() + ")";
  }
  if (rec && !rec->netns.empty()) {
    out += ", netns " + rec->netns;
  }
  return out;
}

}  // namespace ibcni::ipam
