// SPDX-License-Identifier: Apache-2.0
// LibnlNetlink's link operations: lookups, changes, moves and deletion of links, the VF settings
// on a PF and IPoIB children.
#include "plugin/netlink/libnl_netlink.h"

#include <array>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <optional>
#include <string>
#include <sys/socket.h>
#include <utility>
#include <vector>

#include <netlink/addr.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/route/link.h>

#include "plugin/netlink/ipoib_messages.h"
#include "plugin/netlink/libnl_handles.h"
#include "plugin/netlink/libnl_parse.h"
#include "plugin/netlink/libnl_socket.h"
#include "plugin/netlink/vf_messages.h"

namespace ibcni::nl {

namespace {

/// RTM_NEWLINK on an existing link: applies to link `index` what `change` sets on an empty
/// rtnl_link, and what `extra` adds to the message.
os::SysResult<void> changeLink(RtnlSockets& sockets, const os::Netns& ns, int index, const std::string& op,
                               const std::function<void(rtnl_link*)>& change,
                               const std::function<int(nl_msg*)>& extra = {}) {
  RtnlLinkPtr changes(rtnl_link_alloc());
  if (!changes) {
    return os::sysFail(ENOMEM, op);
  }
  change(changes.get());
  if (index <= 0) {
    // Without an index the kernel would pick the link by IFLA_IFNAME (the *new* name).
    return os::sysFail(ENODEV, op + ": no such link index");
  }
  RtnlLinkPtr orig(rtnl_link_alloc());
  if (!orig) {
    return os::sysFail(ENOMEM, op);
  }
  rtnl_link_set_ifindex(orig.get(), index);
  nl_msg* raw = nullptr;
  int rc = rtnl_link_build_change_request(orig.get(), changes.get(), 0, &raw);
  NlMsgPtr msg(raw);
  if (rc < 0) {
    return libnlFail(rc, op);
  }
  if (extra) {
    if (rc = extra(msg.get()); rc < 0) {
      return libnlFail(rc, op);
    }
  }
  return sockets.simple(ns, msg.get(), op);
}

/// RTM_GETLINK by index or name, with RTEXT_FILTER_VF so that a PF lists its VFs.
/// `attrs`, when given, also sees the raw attributes of the answer.
os::SysResult<Link> getLink(RtnlSockets& sockets, const os::Netns& ns, int index,
                            const std::string& name, const std::string& op,
                            const std::function<void(std::array<nlattr*, IFLA_MAX + 1>&)>&
                                attrs = {}) {
  auto sock = sockets.socketFor(ns);
  if (!sock) {
    return std::unexpected(sock.error());
  }
  nl_msg* raw = nullptr;
  int rc = rtnl_link_build_get_request(index, name.empty() ? nullptr : name.c_str(), &raw);
  NlMsgPtr msg(raw);
  if (rc < 0) {
    return libnlFail(rc, op);
  }
  // libnl 3.7 asks for the VFs itself (IFLA_EXT_MASK = RTEXT_FILTER_VF); older ones do not.
  if (nlmsg_find_attr(nlmsg_hdr(msg.get()), sizeof(ifinfomsg), IFLA_EXT_MASK) == nullptr) {
    if (rc = nla_put_u32(msg.get(), IFLA_EXT_MASK, RTEXT_FILTER_VF); rc < 0) {
      return libnlFail(rc, op);
    }
  }
  std::optional<Link> found;
  std::uint32_t maxMtu = 0;
  std::uint32_t iflink = 0;
  std::optional<IpoibInfo> ipoib;
  Exchange ex;
  ex.wantType = "route/link";
  // onMessage runs on each message before libnl turns it into the object onObject gets.
  ex.onMessage = [&maxMtu, &iflink, &ipoib, &attrs](nl_msg* m) {
    std::array<nlattr*, IFLA_MAX + 1> tb{};
    if (!linkAttributes(m, tb)) {
      return;
    }
    maxMtu = tb[IFLA_MAX_MTU] != nullptr && nla_len(tb[IFLA_MAX_MTU]) >= 4
                 ? nla_get_u32(tb[IFLA_MAX_MTU])
                 : 0;
    iflink = tb[IFLA_LINK] != nullptr && nla_len(tb[IFLA_LINK]) >= 4 ? nla_get_u32(tb[IFLA_LINK])
                                                                     : 0;
    ipoib = ipoibFrom(tb[IFLA_LINKINFO]);
    if (attrs) {
      attrs(tb);
    }
  };
  ex.onObject = [&found, &maxMtu, &iflink, &ipoib](nl_object* obj) {
    found = linkFrom(reinterpret_cast<rtnl_link*>(obj));
    found->maxMtu = maxMtu;
    // The kernel sends IFLA_LINK whenever it differs from the link's own index.
    const int parent = static_cast<int>(iflink);
    found->parentIndex = parent > 0 && parent != found->index ? parent : 0;
    found->ipoib = ipoib;
  };
  auto res = (*sock)->request(msg.get(), ex, op);
  if (!res) {
    return std::unexpected(res.error());
  }
  if (!found) {
    return os::sysFail(ENODEV, op + ": no link in the kernel's answer");
  }
  return *found;
}

/// Sends a request built by vf_messages.h as it is (the socket fills in seq and port id).
os::SysResult<void> sendBuilt(RtnlSockets& sockets, const os::Netns& ns, int index,
                              std::vector<std::uint8_t> bytes, const std::string& op) {
  if (index <= 0) {
    return os::sysFail(ENODEV, op + ": no such link index");
  }
  return sockets.sendBytes(ns, std::move(bytes), op);
}

}  // namespace

os::SysResult<Link> LibnlNetlink::linkByName(const os::Netns& ns, const std::string& name) {
  const std::string op = "get link \"" + name + "\"" + inNs(ns);
  if (!net::isValidIfName(name)) {
    return os::sysFail(ENODEV, op + ": not a valid interface name");
  }
  return getLink(*sockets_, ns, 0, name, op);
}

os::SysResult<Link> LibnlNetlink::linkByIndex(const os::Netns& ns, int index) {
  const std::string op = "get " + linkRef(index) + inNs(ns);
  if (index <= 0) {
    return os::sysFail(ENODEV, op + ": no such link index");
  }
  return getLink(*sockets_, ns, index, {}, op);
}

os::SysResult<void> LibnlNetlink::setLinkUp(const os::Netns& ns, int index, bool up) {
  const std::string op = "set " + linkRef(index) + (up ? " up" : " down") + inNs(ns);
  return changeLink(*sockets_, ns, index, op, [up](rtnl_link* changes) {
    if (up) {
      rtnl_link_set_flags(changes, IFF_UP);
    } else {
      rtnl_link_unset_flags(changes, IFF_UP);
    }
  });
}

os::SysResult<void> LibnlNetlink::renameLink(const os::Netns& ns, int index,
                                             const std::string& newName) {
  const std::string op = "rename " + linkRef(index) + " to \"" + newName + "\"" + inNs(ns);
  if (!net::isValidIfName(newName)) {
    // libnl would cut a long name to 15 bytes and rename to that.
    return os::sysFail(EINVAL, op + ": not a valid interface name");
  }
  return changeLink(*sockets_, ns, index, op,
                    [&newName](rtnl_link* changes) { rtnl_link_set_name(changes, newName.c_str()); });
}

os::SysResult<void> LibnlNetlink::setMtu(const os::Netns& ns, int index, std::uint32_t mtu) {
  const std::string op = "set mtu " + std::to_string(mtu) + " on " + linkRef(index) + inNs(ns);
  return changeLink(*sockets_, ns, index, op, [mtu](rtnl_link* changes) { rtnl_link_set_mtu(changes, mtu); });
}

os::SysResult<void> LibnlNetlink::setAlias(const os::Netns& ns, int index,
                                           const std::string& alias) {
  const std::string op = (alias.empty() ? "clear alias of " : "set alias \"" + alias + "\" on ") +
                         linkRef(index) + inNs(ns);
  // IFLA_IFALIAS goes without a terminating NUL, as iproute2 sends it: the kernel clears the
  // alias only for a zero-length attribute, and libnl's NUL would count against the 255 bytes
  // the policy allows.
  return changeLink(*sockets_, ns, index, op, [](rtnl_link*) {}, [&alias](nl_msg* msg) {
    return nla_put(msg, IFLA_IFALIAS, static_cast<int>(alias.size()), alias.data());
  });
}

os::SysResult<void> LibnlNetlink::setHwAddress(const os::Netns& ns, int index,
                                               const net::HwAddress& mac) {
  const std::string op = "set address " + mac.text + " on " + linkRef(index) + inNs(ns);
  auto bytes = macBytes(mac);
  if (!bytes) {
    return os::sysFail(EINVAL, op + ": not a hardware address");
  }
  NlAddrPtr addr(nl_addr_build(AF_LLC, bytes->data(), bytes->size()));
  if (!addr) {
    return os::sysFail(ENOMEM, op);
  }
  return changeLink(*sockets_, ns, index, op, [&addr](rtnl_link* changes) {
    rtnl_link_set_addr(changes, addr.get());  // takes its own reference
  });
}

os::SysResult<void> LibnlNetlink::moveLink(const os::Netns& from, int index, const os::Netns& to) {
  const std::string op =
      "move " + linkRef(index) + " from netns " + from.path() + " to netns " + to.path();
  if (to.fd() < 0) {
    return os::sysFail(EBADF, op + ": the target handle has no fd");
  }
  return changeLink(*sockets_, from, index, op, [&to](rtnl_link* changes) { rtnl_link_set_ns_fd(changes, to.fd()); });
}

os::SysResult<VfInfo> LibnlNetlink::vfInfo(const os::Netns& ns, int pfIndex, std::uint32_t vf) {
  const std::string op = "get vf " + std::to_string(vf) + " of " + linkRef(pfIndex) + inNs(ns);
  if (pfIndex <= 0) {
    return os::sysFail(ENODEV, op + ": no such link index");
  }
  std::vector<VfInfo> vfs;
  auto link = getLink(*sockets_, ns, pfIndex, {}, op,
                      [&vfs](std::array<nlattr*, IFLA_MAX + 1>& tb) {
                        vfs = vfsFrom(tb[IFLA_VFINFO_LIST]);
                      });
  if (!link) {
    return std::unexpected(link.error());
  }
  for (const auto& v : vfs) {
    if (v.vf == vf) {
      return v;
    }
  }
  return os::sysFail(ENOENT, op + (vfs.empty() ? ": the link reports no VFs"
                                               : ": the link reports " +
                                                     std::to_string(vfs.size()) + " VFs"));
}

os::SysResult<void> LibnlNetlink::setVfGuids(const os::Netns& ns, int pfIndex, std::uint32_t vf,
                                             const net::Guid& nodeGuid,
                                             const net::Guid& portGuid) {
  const std::string op = "set node GUID " + nodeGuid.toString() + " and port GUID " +
                         portGuid.toString() + " of vf " + std::to_string(vf) + " on " +
                         linkRef(pfIndex) + inNs(ns);
  return sendBuilt(*sockets_, ns, pfIndex, buildSetVfGuids(pfIndex, vf, nodeGuid, portGuid), op);
}

os::SysResult<void> LibnlNetlink::setVfLinkState(const os::Netns& ns, int pfIndex,
                                                 std::uint32_t vf, VfLinkState state) {
  const char* name = state == VfLinkState::kAuto     ? "auto"
                     : state == VfLinkState::kEnable ? "enable"
                                                     : "disable";
  const std::string op = "set state " + std::string(name) + " of vf " + std::to_string(vf) +
                         " on " + linkRef(pfIndex) + inNs(ns);
  return sendBuilt(*sockets_, ns, pfIndex, buildSetVfLinkState(pfIndex, vf, state), op);
}

os::SysResult<void> LibnlNetlink::addIpoibChild(const os::Netns& ns, const IpoibChildSpec& spec) {
  const std::string op = "add ipoib child \"" + spec.name + "\" of " + linkRef(spec.parentIndex) +
                         " pkey " + std::to_string(spec.pkey.wire()) + " mode " +
                         (spec.mode == IpoibMode::kConnected ? "connected" : "datagram") +
                         " umcast " + (spec.umcast ? "1" : "0") + inNs(ns);
  if (!net::isValidIfName(spec.name)) {
    return os::sysFail(EINVAL, op + ": not a valid interface name");
  }
  // libmnl built the request (ipoib_messages.cpp); libnl only carries it on this namespace's
  // socket, which fills in seq and port id and reads the ACK or the error with its ext-ack text.
  return sockets_->sendBytes(ns, buildAddIpoibChild(spec), op);
}

os::SysResult<void> LibnlNetlink::sendRequestForTest(const os::Netns& ns,
                                                     std::vector<std::uint8_t> request,
                                                     const std::string& op) {
  return sockets_->sendBytes(ns, std::move(request), op);
}

os::SysResult<void> LibnlNetlink::deleteLink(const os::Netns& ns, int index) {
  const std::string op = "delete " + linkRef(index) + inNs(ns);
  if (index <= 0) {
    // Without an index or a name the kernel would answer EINVAL.
    return os::sysFail(ENODEV, op + ": no such link index");
  }
  RtnlLinkPtr link(rtnl_link_alloc());
  if (!link) {
    return os::sysFail(ENOMEM, op);
  }
  rtnl_link_set_ifindex(link.get(), index);
  nl_msg* raw = nullptr;
  const int rc = rtnl_link_build_delete_request(link.get(), &raw);
  NlMsgPtr msg(raw);
  if (rc < 0) {
    return libnlFail(rc, op);
  }
  return sockets_->simple(ns, msg.get(), op);
}

}  // namespace ibcni::nl
