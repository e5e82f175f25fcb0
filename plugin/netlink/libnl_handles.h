// SPDX-License-Identifier: Apache-2.0
// Owning handles for libnl objects, shared by the files of plugin/netlink (the only libnl users).
// Include after the libnl headers that declare the types.
#pragma once

#include <memory>

#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/sriov.h>
#include <netlink/route/route.h>

namespace ibcni::nl {

// One deleter per libnl type; each releases the reference we own.
struct NlSockDeleter {
  void operator()(nl_sock* p) const noexcept { nl_socket_free(p); }  // also closes the fd
};
struct NlMsgDeleter {
  void operator()(nl_msg* p) const noexcept { nlmsg_free(p); }
};
struct NlCbDeleter {
  void operator()(nl_cb* p) const noexcept { nl_cb_put(p); }
};
struct NlAddrDeleter {
  void operator()(nl_addr* p) const noexcept { nl_addr_put(p); }
};
struct RtnlLinkDeleter {
  void operator()(rtnl_link* p) const noexcept { rtnl_link_put(p); }
};
struct RtnlAddrDeleter {
  void operator()(rtnl_addr* p) const noexcept { rtnl_addr_put(p); }
};
struct RtnlRouteDeleter {
  void operator()(rtnl_route* p) const noexcept { rtnl_route_put(p); }
};
struct RtnlLinkVfDeleter {
  void operator()(rtnl_link_vf* p) const noexcept { rtnl_link_vf_put(p); }
};
struct RtnlNexthopDeleter {
  void operator()(rtnl_nexthop* p) const noexcept { rtnl_route_nh_free(p); }
};

using NlSockPtr = std::unique_ptr<nl_sock, NlSockDeleter>;
using NlMsgPtr = std::unique_ptr<nl_msg, NlMsgDeleter>;
using NlCbPtr = std::unique_ptr<nl_cb, NlCbDeleter>;
using NlAddrPtr = std::unique_ptr<nl_addr, NlAddrDeleter>;
using RtnlLinkPtr = std::unique_ptr<rtnl_link, RtnlLinkDeleter>;
using RtnlAddrPtr = std::unique_ptr<rtnl_addr, RtnlAddrDeleter>;
using RtnlRoutePtr = std::unique_ptr<rtnl_route, RtnlRouteDeleter>;
using RtnlNexthopPtr = std::unique_ptr<rtnl_nexthop, RtnlNexthopDeleter>;
using RtnlLinkVfPtr = std::unique_ptr<rtnl_link_vf, RtnlLinkVfDeleter>;

}  // namespace ibcni::nl
