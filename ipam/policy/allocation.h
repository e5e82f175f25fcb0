// SPDX-License-Identifier: Apache-2.0
// The value types the IPAM policy and its stores exchange.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "ibcni/cni/cmd_args.h"
#include "ibcni/cni/error.h"
#include "ibcni/net/address_math.h"
#include "ibcni/net/ip.h"

namespace ibcni::ipam {

using cni::AttachmentKey;

/// The error code for "no free address in a range set" (108).
inline constexpr cni::Errc kIpamExhausted = cni::Errc::kIpamExhausted;

// The address arithmetic of net/ is the IPAM's everyday vocabulary.
using net::bitsOf;
using net::findInterval;
using net::firstOf;
using net::fromInt;
using net::Interval;
using net::lastOf;
using net::normalized;
using net::subtract;
using net::toDecimal;
using net::toInt;
using net::totalSize;
using net::U128;

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
  /// The network whose ADD made it (a cluster pool's store is shared by the networks of the pool:
  /// GC of one network never touches another's). Empty in records written before it was kept.
  std::string network;
  /// Cluster mode: not an attachment but addresses of this node's block lent to node `loanTo`
  /// (held here so that this node never hands them out; released when the borrower gives them back).
  std::string loanTo;
  bool operator==(const Allocation&) const = default;
};

}  // namespace ibcni::ipam
