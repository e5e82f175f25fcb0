// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <vector>

#include "ibcni/net/ip.h"
#include "ibcni/netlink/netlink.h"

// The rtnetlink requests that change a VF's settings on its PF, as pure functions: LibnlNetlink
// sends exactly these bytes (after filling in nlmsg_seq and nlmsg_pid), and
// tests/unit/netlink/vf_messages_test.cpp compares them with what iproute2 sends. libnl builds them
// (rtnl_link_vf_* on a change request); this header stays free of libnl types.

namespace ibcni::nl {

/// RTM_NEWLINK for link `pfIndex` (ifi_family AF_UNSPEC, no flag changes) carrying
/// IFLA_VFINFO_LIST with two IFLA_VF_INFO entries: the first holds IFLA_VF_IB_NODE_GUID
/// {vf, node}, the second IFLA_VF_IB_PORT_GUID {vf, port}.
///
/// Two entries, not one: the kernel's do_setvfinfo() applies only the first GUID attribute it
/// finds in an IFLA_VF_INFO (it returns right after the node GUID), so the single entry that
/// `ip link set PF vf N node_guid G port_guid G` sends never sets the port GUID. do_setlink()
/// runs do_setvfinfo() once per IFLA_VF_INFO, in order, so this one request sets both (the port
/// GUID only when the node GUID was accepted). Each entry is byte for byte what
/// `ip link set PF vf N node_guid G` and `ip link set PF vf N port_guid G` send in theirs.
///
/// nlmsg_flags is NLM_F_REQUEST | NLM_F_ACK, nlmsg_seq and nlmsg_pid are 0 (the socket fills
/// them in when sending). Nests carry NLA_F_NESTED (libnl sets it; iproute2 does not; the
/// kernel accepts both). The 4 padding bytes after `vf` in struct ifla_vf_guid are zero.
/// GUIDs go in host byte order, first octet of the text form most significant, as iproute2's
/// get_guid() makes them and drivers read them.
/// @return the message, or an empty vector when libnl could not allocate it.
[[nodiscard]] std::vector<std::uint8_t> buildSetVfGuids(int pfIndex, std::uint32_t vf,
                                                        const net::Guid& node,
                                                        const net::Guid& port);

/// RTM_NEWLINK for link `pfIndex` carrying IFLA_VFINFO_LIST { IFLA_VF_INFO {
/// IFLA_VF_LINK_STATE {vf, state} } }, as `ip link set PF vf N state auto|enable|disable`
/// sends it. Header fields and nest flags as for buildSetVfGuids.
/// @return the message, or an empty vector when libnl could not allocate it.
[[nodiscard]] std::vector<std::uint8_t> buildSetVfLinkState(int pfIndex, std::uint32_t vf,
                                                            VfLinkState state);

}  // namespace ibcni::nl
