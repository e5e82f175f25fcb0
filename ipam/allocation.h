// SPDX-License-Identifier: Apache-2.0
// The value types the IPAM policy and its stores exchange.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "ibcni/net/ip.h"

namespace ibcni::ipam {

/// One attachment of a container to the network: CNI_CONTAINERID and CNI_IFNAME. Allocations are
/// keyed by it, as the spec keys ADD/DEL.
struct AttachmentKey {
  std::string containerId;
  std::string ifName;
  auto operator<=>(const AttachmentKey&) const = default;
  /// "containerID/ifname", for messages.
  [[nodiscard]] std::string toString() const { return containerId + "/" + ifName; }
};

/// The Kubernetes pod an attachment belongs to (CNI_ARGS K8S_POD_*); empty outside Kubernetes.
struct PodRef {
  std::string podNamespace;
  std::string name;
  std::string uid;
  bool operator==(const PodRef&) const = default;
  [[nodiscard]] bool empty() const { return podNamespace.empty() && name.empty(); }
  /// "namespace/name", the key of ipam.reservations.
  [[nodiscard]] std::string toString() const { return podNamespace + "/" + name; }
};

/// What a store records per attachment: who holds the addresses, and the facts reclaiming needs
/// (the netns path and, when known, its inode).
struct Allocation {
  AttachmentKey key;
  PodRef pod;
  std::string netns;             ///< CNI_NETNS at ADD
  std::uint64_t netnsInode = 0;  ///< inode of that namespace at ADD; 0 when unknown
  std::string createdAt;         ///< RFC 3339 UTC time of the ADD
  std::vector<net::IpAddress> addresses;
  bool operator==(const Allocation&) const = default;
};

/// Whether `containerId` can be a store key: the CNI spec's rule for container IDs
/// (^[a-zA-Z0-9][a-zA-Z0-9_.-]*$), at most 200 bytes so that file names stay short.
[[nodiscard]] bool isValidContainerId(const std::string& containerId);

}  // namespace ibcni::ipam
