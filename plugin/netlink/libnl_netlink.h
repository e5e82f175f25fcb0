// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ibcni/netlink/netlink.h"

namespace ibcni::nl {

class RtnlSockets;  // libnl_socket.h, which includes libnl's headers: this one does not

/// nl::Netlink over libnl-route-3 (the only implementation that talks to the kernel).
///
/// Each namespace gets one NETLINK_ROUTE socket, created inside that namespace on first use
/// (the calling thread enters it with os::NetnsGuard, creates the socket and comes straight back)
/// and cached, keyed by the namespace file's st_dev/st_ino, for the life of this object. A socket
/// holds a reference on its namespace: a namespace that was unmounted stays alive until
/// closeSockets() runs or this object is destroyed.
///
/// Sockets are close-on-exec and have NETLINK_EXT_ACK and NETLINK_CAP_ACK set. Errors carry the
/// kernel's positive errno (EEXIST, ENODEV, EBUSY, ...), never libnl's NLE_* codes, and the
/// kernel's extended-ACK message when it sent one. Dumps interrupted by a concurrent change
/// (NLM_F_DUMP_INTR) are retried up to 5 times, then fail with EAGAIN.
///
/// Choices beyond the interface comments:
///  * Names that are not valid interface names (empty, longer than 15 bytes, '/', ':' or
///    whitespace) make linkByName fail with ENODEV and renameLink with EINVAL without asking the
///    kernel (libnl would silently truncate a long name).
///  * listAddresses and listRoutes (index != 0) first look the link up, so a missing link is
///    ENODEV rather than an empty list. Results come in the kernel's order.
///  * listRoutes returns every RTN_UNICAST route of every table, including the kernel's own
///    connected/prefix routes (proto kernel); local, broadcast, multicast, unreachable, etc. are
///    left out. `table` and `scope` are always filled (main is 254); `priority` is filled when
///    it is non-zero (the kernel omits it for IPv4 priority 0; IPv6 routes always have one,
///    1024 by default); `mtu`/`advmss` when the route has those RTAX metrics. A multipath route
///    is reported once per next hop.
///  * addRoute uses NLM_F_CREATE|NLM_F_EXCL with protocol "static". An unset or 0 `table` means
///    main; an unset `scope` is guessed as iproute2 does (link without a gateway, universe
///    with one); `ifIndex` 0 leaves the output device to the kernel (found from the gateway).
///  * deleteRoute matches like `ip route del`: unset scope, priority, protocol and type are
///    wildcards; the kernel answers ESRCH when nothing matches.
///  * addAddress uses NLM_F_CREATE|NLM_F_EXCL (EEXIST when present) and IFA_F_NODAD for IPv6.
///  * Link lookups ask for the VF table (IFLA_EXT_MASK = RTEXT_FILTER_VF, which libnl 3.7 adds
///    by itself); `maxMtu` is read from the raw answer, since libnl's link object drops
///    IFLA_MAX_MTU. vfInfo reads IFLA_VFINFO_LIST the same way (libnl keeps no IB GUIDs) and
///    answers ENOENT when the PF lists no such VF; ENODEV when there is no such link.
///  * setVfGuids and setVfLinkState send the requests of vf_messages.h unchanged. setVfGuids puts
///    each GUID in its own IFLA_VF_INFO of one request: the kernel applies only the first GUID
///    of an IFLA_VF_INFO (see buildSetVfGuids). Devices without the driver hook (veth, ...)
///    answer EOPNOTSUPP; VF numbers >= INT_MAX are EINVAL; the range check is the driver's.
///  * addIpoibChild sends the request of ipoib_messages.h (built with libmnl: libnl has no
///    "ipoib" kind) unchanged on the namespace's libnl socket; a name that is not a valid
///    interface name is EINVAL without asking the kernel. The kernel's answers (ib_ipoib's
///    ipoib_new_child_link): EOPNOTSUPP "Unknown device type" when ib_ipoib is not loaded;
///    ENODEV when the parent is missing or not ARPHRD_INFINIBAND (veth, dummy, ...); EINVAL for
///    a parent that is itself a child, pkey 0 or 0x8000, or a mode the port cannot take;
///    EEXIST when the name is taken. Several children of one parent may share a pkey (only
///    sysfs "legacy" children must be unique), so that is not EEXIST from the kernel.
///  * deleteLink sends RTM_DELLINK by index (libnl's delete request). Devices without
///    rtnl_link_ops->dellink (physical ones, "lo") answer EOPNOTSUPP; deleting a veth deletes its
///    peer too.
///  * Link lookups fill `parentIndex` from IFLA_LINK when it is not the link's own index (an
///    IPoIB child's parent; also a veth's peer, possibly in another namespace) and `ipoib` from
///    IFLA_LINKINFO's IFLA_INFO_DATA when IFLA_INFO_KIND is "ipoib" (physical IPoIB ports report
///    that kind too), both read from the raw answer.
class LibnlNetlink final : public Netlink {
 public:
  LibnlNetlink();
  ~LibnlNetlink() override;
  LibnlNetlink(LibnlNetlink&&) noexcept;
  LibnlNetlink& operator=(LibnlNetlink&&) noexcept;
  LibnlNetlink(const LibnlNetlink&) = delete;
  LibnlNetlink& operator=(const LibnlNetlink&) = delete;

  [[nodiscard]] os::SysResult<Link> linkByName(const os::Netns& ns,
                                               const std::string& name) override;
  [[nodiscard]] os::SysResult<Link> linkByIndex(const os::Netns& ns, int index) override;
  [[nodiscard]] os::SysResult<void> setLinkUp(const os::Netns& ns, int index, bool up) override;
  [[nodiscard]] os::SysResult<void> renameLink(const os::Netns& ns, int index,
                                               const std::string& newName) override;
  [[nodiscard]] os::SysResult<void> setMtu(const os::Netns& ns, int index,
                                           std::uint32_t mtu) override;
  [[nodiscard]] os::SysResult<void> setAlias(const os::Netns& ns, int index,
                                             const std::string& alias) override;
  [[nodiscard]] os::SysResult<void> setHwAddress(const os::Netns& ns, int index,
                                                 const net::HwAddress& mac) override;
  [[nodiscard]] os::SysResult<void> moveLink(const os::Netns& from, int index,
                                             const os::Netns& to) override;

  [[nodiscard]] os::SysResult<std::vector<Address>> listAddresses(const os::Netns& ns,
                                                                  int index) override;
  [[nodiscard]] os::SysResult<void> addAddress(const os::Netns& ns, int index,
                                               const net::IpPrefix& prefix) override;
  [[nodiscard]] os::SysResult<void> deleteAddress(const os::Netns& ns, int index,
                                                  const net::IpPrefix& prefix) override;

  [[nodiscard]] os::SysResult<std::vector<Route>> listRoutes(const os::Netns& ns,
                                                             int index) override;
  [[nodiscard]] os::SysResult<void> addRoute(const os::Netns& ns, const Route& route) override;
  [[nodiscard]] os::SysResult<void> deleteRoute(const os::Netns& ns, const Route& route) override;
  [[nodiscard]] os::SysResult<std::vector<Rule>> listRules(const os::Netns& ns) override;
  [[nodiscard]] os::SysResult<void> addRule(const os::Netns& ns, const Rule& rule) override;
  [[nodiscard]] os::SysResult<void> deleteRule(const os::Netns& ns, const Rule& rule) override;
  [[nodiscard]] os::SysResult<void> addIpoibChild(const os::Netns& ns,
                                                  const IpoibChildSpec& spec) override;
  [[nodiscard]] os::SysResult<void> deleteLink(const os::Netns& ns, int index) override;
  [[nodiscard]] os::SysResult<VfInfo> vfInfo(const os::Netns& ns, int pfIndex,
                                              std::uint32_t vf) override;
  [[nodiscard]] os::SysResult<void> setVfGuids(const os::Netns& ns, int pfIndex, std::uint32_t vf,
                                               const net::Guid& nodeGuid,
                                               const net::Guid& portGuid) override;
  [[nodiscard]] os::SysResult<void> setVfLinkState(const os::Netns& ns, int pfIndex,
                                                   std::uint32_t vf, VfLinkState state) override;

  /// Closes every cached socket (later requests open new ones), releasing the namespaces they
  /// kept alive.
  void closeSockets() noexcept;

  /// Sends `request`, a complete rtnetlink request (nlmsg_seq and nlmsg_pid are filled in here),
  /// on `ns`'s socket exactly as addIpoibChild sends the one it builds, and reads the ACK or the
  /// error with its extended-ACK text. For tests that need the kernel's answer to a request the
  /// builders never make (a policy violation: tests/kernel-lab/ipoib_netlink_vm_test.cpp).
  /// @return ENOMEM when `request` is shorter than a netlink header; otherwise the kernel's answer.
  [[nodiscard]] os::SysResult<void> sendRequestForTest(const os::Netns& ns,
                                                       std::vector<std::uint8_t> request,
                                                       const std::string& op);

 private:
  std::unique_ptr<RtnlSockets> sockets_;
};

}  // namespace ibcni::nl
