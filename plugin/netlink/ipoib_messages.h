// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <vector>

#include "ibcni/netlink/netlink.h"

// The rtnetlink request that creates an IPoIB child link, as a pure function: LibnlNetlink sends
// exactly these bytes (after the socket fills in nlmsg_seq and nlmsg_pid), and
// tests/unit/netlink/ipoib_messages_test.cpp compares them with what iproute2 sends. libnl has no
// "ipoib" link kind, so libmnl builds this message (design decision); this header stays free of
// libmnl and libnl types.

namespace ibcni::nl {

/// RTM_NEWLINK that creates IPoIB child `spec.name` of link `spec.parentIndex`, laid out as
/// iproute2 6.1's `ip link add link PARENT name NAME type ipoib pkey P mode M umcast U` lays it
/// out:
///
///     nlmsghdr   RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
///     ifinfomsg  ifi_family AF_UNSPEC, everything else 0
///     IFLA_LINK      u32 parent index
///     IFLA_IFNAME    the name, NUL-terminated
///     IFLA_LINKINFO
///       IFLA_INFO_KIND  "ipoib", 5 bytes without a NUL (as iproute2 sends it)
///       IFLA_INFO_DATA
///         IFLA_IPOIB_PKEY    u16, as given (the kernel checks it: 0 and 0x8000 are EINVAL)
///         IFLA_IPOIB_MODE    u16, IPOIB_MODE_DATAGRAM 0 / IPOIB_MODE_CONNECTED 1
///         IFLA_IPOIB_UMCAST  u16, 0 or 1
///
/// nlmsg_seq and nlmsg_pid are 0 (the socket fills them in when sending). The two nests carry
/// NLA_F_NESTED (libmnl's mnl_attr_nest_start sets it; iproute2 6.1's addattr_nest does not; the
/// kernel accepts both, see the test). Padding bytes are zero.
/// @return the message, or an empty vector when `spec.name` is not a valid interface name
///         (empty, longer than 15 bytes, '/', ':' or whitespace).
[[nodiscard]] std::vector<std::uint8_t> buildAddIpoibChild(const IpoibChildSpec& spec);

}  // namespace ibcni::nl
