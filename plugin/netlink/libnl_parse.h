// SPDX-License-Identifier: Apache-2.0
// Between libnl's objects and rtnetlink attributes on one side and ibcni's value types
// (net::IpAddress, Link, IpoibInfo, VfInfo, Route) on the other. No I/O.
#pragma once

#include <array>
#include <cstdint>
#include <linux/if_link.h>
#include <optional>
#include <vector>

#include <netlink/addr.h>
#include <netlink/attr.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/route.h>

#include "ibcni/net/ip.h"
#include "ibcni/netlink/netlink.h"
#include "plugin/netlink/libnl_handles.h"

namespace ibcni::nl {

/// The IPv4 or IPv6 address in `a` (a zero-length one is the default route's destination);
/// nullopt for nullptr, other families and lengths that do not fit the family.
std::optional<net::IpAddress> ipFromNlAddr(const nl_addr* a);

/// `ip` with `prefixLen` as a libnl address; empty when libnl cannot allocate it.
NlAddrPtr nlAddrFromIp(const net::IpAddress& ip, int prefixLen);

/// The octets of `mac`; nullopt when it is not a hardware address.
std::optional<std::vector<std::uint8_t>> macBytes(const net::HwAddress& mac);

/// What libnl's link object holds: index, name, alias, MTU, up flag, address, ARP type and kind
/// (maxMtu, parentIndex and ipoib are read from the raw message: see linkAttributes).
Link linkFrom(rtnl_link* l);

/// The attributes of an RTM_NEWLINK message, indexed by type (IFLA_*). libnl 3.7's link object
/// keeps neither IFLA_MAX_MTU nor the VFs' IB GUIDs, so those are read from the message itself.
/// @return false when `msg` is not a well-formed RTM_NEWLINK.
bool linkAttributes(nl_msg* msg, std::array<nlattr*, IFLA_MAX + 1>& tb);

/// The IPoIB settings in IFLA_LINKINFO when its IFLA_INFO_KIND is "ipoib" (libnl has no ipoib
/// kind, so its link object keeps none of them). Attributes the kernel left out keep the defaults
/// of IpoibInfo; nullopt for other kinds or no IFLA_LINKINFO.
std::optional<IpoibInfo> ipoibFrom(nlattr* linkinfo);

/// The VFs in IFLA_VFINFO_LIST (none when the attribute is missing).
std::vector<VfInfo> vfsFrom(nlattr* list);

/// Fills the parts of a Route shared by all next hops of `r`; nullopt for non-unicast routes
/// and families other than IPv4/IPv6.
std::optional<Route> routeBase(rtnl_route* r);

}  // namespace ibcni::nl
