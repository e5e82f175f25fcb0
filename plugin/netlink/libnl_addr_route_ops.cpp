// SPDX-License-Identifier: Apache-2.0
// LibnlNetlink's address and route operations: listing, adding and deleting them.
#include "plugin/netlink/libnl_netlink.h"

#include <cerrno>
#include <cstdint>
#include <linux/if_addr.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <string>
#include <sys/socket.h>
#include <utility>
#include <vector>

#include <netlink/addr.h>
#include <netlink/msg.h>
#include <netlink/route/addr.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>

#include "plugin/netlink/libnl_handles.h"
#include "plugin/netlink/libnl_parse.h"
#include "plugin/netlink/libnl_socket.h"

namespace ibcni::nl {

namespace {

os::SysResult<void> addressRequest(RtnlSockets& sockets, const os::Netns& ns, int index,
                                   const net::IpPrefix& prefix, bool add, const std::string& op) {
  if (index <= 0) {
    return os::sysFail(ENODEV, op + ": no such link index");
  }
  if (!prefix.address.valid()) {
    return os::sysFail(EINVAL, op + ": no address");
  }
  RtnlAddrPtr addr(rtnl_addr_alloc());
  NlAddrPtr local = nlAddrFromIp(prefix.address, prefix.prefixLen);
  if (!addr || !local) {
    return os::sysFail(ENOMEM, op);
  }
  rtnl_addr_set_ifindex(addr.get(), index);
  rtnl_addr_set_family(addr.get(), prefix.address.family);
  if (int rc = rtnl_addr_set_local(addr.get(), local.get()); rc < 0) {
    return libnlFail(rc, op);
  }
  rtnl_addr_set_prefixlen(addr.get(), prefix.prefixLen);
  nl_msg* raw = nullptr;
  int rc = 0;
  if (add) {
    if (!prefix.address.isV4()) {
      // Skip duplicate address detection: the address must be usable as soon as ADD returns.
      rtnl_addr_set_flags(addr.get(), IFA_F_NODAD);
    }
    rc = rtnl_addr_build_add_request(addr.get(), NLM_F_EXCL, &raw);
  } else {
    rc = rtnl_addr_build_delete_request(addr.get(), 0, &raw);
  }
  NlMsgPtr msg(raw);
  if (rc < 0) {
    return libnlFail(rc, op);
  }
  return sockets.simple(ns, msg.get(), op);
}

os::SysResult<void> routeRequest(RtnlSockets& sockets, const os::Netns& ns, const Route& route,
                                 bool add, const std::string& op) {
  const int family = route.dst.address.family;
  if (family != AF_INET && family != AF_INET6) {
    return os::sysFail(EINVAL, op + ": no destination");
  }
  if (route.gw && route.gw->family != family) {
    return os::sysFail(EINVAL, op + ": gateway and destination families differ");
  }
  if (route.scope && *route.scope > 255) {
    return os::sysFail(EINVAL, op + ": scope out of range");
  }
  RtnlRoutePtr r(rtnl_route_alloc());
  NlAddrPtr dst = nlAddrFromIp(route.dst.address, route.dst.prefixLen);
  if (!r || !dst) {
    return os::sysFail(ENOMEM, op);
  }
  if (int rc = rtnl_route_set_family(r.get(), static_cast<std::uint8_t>(family)); rc < 0) {
    return libnlFail(rc, op);
  }
  if (int rc = rtnl_route_set_dst(r.get(), dst.get()); rc < 0) {
    return libnlFail(rc, op);
  }
  rtnl_route_set_table(r.get(), route.table.value_or(0) == 0 ? RT_TABLE_MAIN : *route.table);
  if (route.priority) {
    rtnl_route_set_priority(r.get(), *route.priority);
  }
  if (route.scope) {
    rtnl_route_set_scope(r.get(), static_cast<std::uint8_t>(*route.scope));
  } else if (!add) {
    rtnl_route_set_scope(r.get(), RT_SCOPE_NOWHERE);  // wildcard, as `ip route del` sends
  }
  if (!add) {
    rtnl_route_set_protocol(r.get(), RTPROT_UNSPEC);  // match routes of any origin
  }
  if (route.mtu) {
    if (int rc = rtnl_route_set_metric(r.get(), RTAX_MTU, *route.mtu); rc < 0) {
      return libnlFail(rc, op);
    }
  }
  if (route.advmss) {
    if (int rc = rtnl_route_set_metric(r.get(), RTAX_ADVMSS, *route.advmss); rc < 0) {
      return libnlFail(rc, op);
    }
  }
  if (route.ifIndex != 0 || route.gw) {
    RtnlNexthopPtr nh(rtnl_route_nh_alloc());
    if (!nh) {
      return os::sysFail(ENOMEM, op);
    }
    if (route.ifIndex != 0) {
      rtnl_route_nh_set_ifindex(nh.get(), route.ifIndex);
    }
    if (route.gw) {
      NlAddrPtr gw = nlAddrFromIp(*route.gw, static_cast<int>(route.gw->size() * 8));
      if (!gw) {
        return os::sysFail(ENOMEM, op);
      }
      rtnl_route_nh_set_gateway(nh.get(), gw.get());  // takes its own reference
    }
    rtnl_route_add_nexthop(r.get(), nh.release());  // the route owns it from here
  }
  nl_msg* raw = nullptr;
  // NLM_F_CREATE (libnl adds it) without NLM_F_EXCL, as the reference plugins (RouteAddEcmp):
  // a route to a destination another interface already routes (the same network attached twice)
  // is added beside it; only the very same route is EEXIST.
  int rc = add ? rtnl_route_build_add_request(r.get(), 0, &raw)
               : rtnl_route_build_del_request(r.get(), 0, &raw);
  NlMsgPtr msg(raw);
  if (rc < 0) {
    return libnlFail(rc, op);
  }
  return sockets.simple(ns, msg.get(), op);
}

}  // namespace

os::SysResult<std::vector<Address>> LibnlNetlink::listAddresses(const os::Netns& ns, int index) {
  const std::string op = "list addresses of " + linkRef(index) + inNs(ns);
  if (auto link = linkByIndex(ns, index); !link) {
    return os::sysFail(link.error().err, op, link.error().extAck);
  }
  std::vector<Address> out;
  auto build = [] {
    ifaddrmsg hdr{};
    hdr.ifa_family = AF_UNSPEC;
    return dumpRequest(RTM_GETADDR, hdr);
  };
  auto collect = [&out, index](nl_object* obj) {
    auto* a = reinterpret_cast<rtnl_addr*>(obj);
    if (rtnl_addr_get_ifindex(a) != index) {
      return;
    }
    auto ip = ipFromNlAddr(rtnl_addr_get_local(a));
    if (!ip) {
      return;
    }
    out.push_back(Address{index, net::IpPrefix{*ip, rtnl_addr_get_prefixlen(a)}});
  };
  auto res = sockets_->dump(
      ns, build, "route/addr", collect, [&out] { out.clear(); }, op);
  if (!res) {
    return std::unexpected(res.error());
  }
  return out;
}

os::SysResult<void> LibnlNetlink::addAddress(const os::Netns& ns, int index,
                                             const net::IpPrefix& prefix) {
  return addressRequest(
      *sockets_, ns, index, prefix, true,
      "add address " + prefix.toString() + " to " + linkRef(index) + inNs(ns));
}

os::SysResult<void> LibnlNetlink::deleteAddress(const os::Netns& ns, int index,
                                                const net::IpPrefix& prefix) {
  return addressRequest(
      *sockets_, ns, index, prefix, false,
      "delete address " + prefix.toString() + " from " + linkRef(index) + inNs(ns));
}

os::SysResult<std::vector<Route>> LibnlNetlink::listRoutes(const os::Netns& ns, int index) {
  const std::string op =
      "list routes" + (index == 0 ? std::string() : " of " + linkRef(index)) + inNs(ns);
  if (index != 0) {
    if (auto link = linkByIndex(ns, index); !link) {
      return os::sysFail(link.error().err, op, link.error().extAck);
    }
  }
  std::vector<Route> out;
  auto build = [] {
    rtmsg hdr{};
    hdr.rtm_family = AF_UNSPEC;
    return dumpRequest(RTM_GETROUTE, hdr);
  };
  auto collect = [&out, index](nl_object* obj) {
    auto* r = reinterpret_cast<rtnl_route*>(obj);
    auto base = routeBase(r);
    if (!base) {
      return;
    }
    const int hops = rtnl_route_get_nnexthops(r);
    if (hops == 0 && index == 0) {
      out.push_back(*base);  // e.g. a route that refers to a nexthop object (RTA_NH_ID)
    }
    for (int i = 0; i < hops; ++i) {
      rtnl_nexthop* nh = rtnl_route_nexthop_n(r, i);
      Route route = *base;
      route.ifIndex = rtnl_route_nh_get_ifindex(nh);
      if (index != 0 && route.ifIndex != index) {
        continue;
      }
      if (auto gw = ipFromNlAddr(rtnl_route_nh_get_gateway(nh)); gw && gw->valid()) {
        route.gw = *gw;
      }
      out.push_back(std::move(route));
    }
  };
  auto res = sockets_->dump(
      ns, build, "route/route", collect, [&out] { out.clear(); }, op);
  if (!res) {
    return std::unexpected(res.error());
  }
  return out;
}

os::SysResult<void> LibnlNetlink::addRoute(const os::Netns& ns, const Route& route) {
  return routeRequest(*sockets_, ns, route, true, "add route " + describe(route) + inNs(ns));
}

os::SysResult<void> LibnlNetlink::deleteRoute(const os::Netns& ns, const Route& route) {
  return routeRequest(*sockets_, ns, route, false, "delete route " + describe(route) + inNs(ns));
}

}  // namespace ibcni::nl
