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
#include <netlink/route/rule.h>

namespace ibcni::nl {

/// Releases the reference we own with libnl's `Release` for the type (nl_socket_free also closes
/// the fd).
template <auto Release>
struct NlReleaser {
  template <class T>
  void operator()(T* p) const noexcept {
    Release(p);
  }
};

using NlSockPtr = std::unique_ptr<nl_sock, NlReleaser<nl_socket_free>>;
using NlMsgPtr = std::unique_ptr<nl_msg, NlReleaser<nlmsg_free>>;
using NlCbPtr = std::unique_ptr<nl_cb, NlReleaser<nl_cb_put>>;
using NlAddrPtr = std::unique_ptr<nl_addr, NlReleaser<nl_addr_put>>;
using RtnlLinkPtr = std::unique_ptr<rtnl_link, NlReleaser<rtnl_link_put>>;
using RtnlAddrPtr = std::unique_ptr<rtnl_addr, NlReleaser<rtnl_addr_put>>;
using RtnlRoutePtr = std::unique_ptr<rtnl_route, NlReleaser<rtnl_route_put>>;
using RtnlNexthopPtr = std::unique_ptr<rtnl_nexthop, NlReleaser<rtnl_route_nh_free>>;
using RtnlLinkVfPtr = std::unique_ptr<rtnl_link_vf, NlReleaser<rtnl_link_vf_put>>;
using RtnlRulePtr = std::unique_ptr<rtnl_rule, NlReleaser<rtnl_rule_put>>;

}  // namespace ibcni::nl
