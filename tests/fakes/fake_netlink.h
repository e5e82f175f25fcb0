// SPDX-License-Identifier: Apache-2.0
// Longer than 600 lines on purpose: one in-memory kernel (links per netns, addresses, routes, VF
// tables, IPoIB children, errnos and ext-acks) that tests/unit/netlink holds to the real one case for case.
#pragma once

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <sys/socket.h>
#include <sys/types.h>
#include <utility>
#include <vector>

#include "ibcni/net/ip.h"
#include "ibcni/netlink/netlink.h"
#include "ibcni/os/netns.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::testing {

/// In-memory nl::Netlink for unit tests. It models links, addresses and routes per network
/// namespace (keyed by Netns::inode(), so os::Netns::fakeForTest handles work) and answers with
/// the errnos and extended-ACK texts that Linux 6.x gives. tests/unit/netlink runs the same contract
/// cases against it and the kernel, and a randomized side-by-side test (fake_fidelity_test.cpp)
/// checks that both give the same answers and show the same state after every step.
///
/// What it models, as the kernel does:
///  * every namespace starts with "lo" (index 1, down); indexes are allocated per namespace
///    from a counter that only moves forward; moveLink keeps the index when it is free in the
///    target and allocates a new one otherwise;
///  * setting a link down removes all its routes and its IPv6 addresses (IPv4 ones stay);
///    setting it up adds the prefix routes of its addresses (IPv4 primaries shorter than /32:
///    scope link, no priority; IPv6: metric 256); adding an address to an up link adds its
///    prefix route; bringing "lo" up adds 127.0.0.1/8 and ::1/128 (no unicast routes for them);
///  * moveLink sets the link down and drops its addresses and routes; the alias, MTU and MAC
///    stay; moving into the same namespace does nothing; "lo" cannot move (EINVAL);
///  * deleting an IPv4 primary address also deletes its secondaries (promote_secondaries=0);
///    deleting a link's last IPv4 address flushes all IPv4 routes through it;
///  * an MTU below 1280 removes the link's IPv6 addresses and routes and refuses new ones until
///    the MTU is raised (below 68 the same for IPv4); IPv6 route MTUs follow the device MTU;
///  * renaming an up link succeeds (Linux >= 6.2); setRenameUpAllowed(false) gives the EBUSY of
///    older kernels;
///  * routes: IPv4 needs an up output device (ENETDOWN) and a gateway reachable through a link
///    route, most specific first (ENETUNREACH; IPv6: EHOSTUNREACH); EEXIST only for the same route
///    (a route to the same destination through another nexthop is added beside it, as the kernel
///    does without NLM_F_EXCL); deletion treats unset fields as wildcards and answers
///    ESRCH, with "FIB table does not exist" for a table never used;
///  * addresses are listed in the kernel's order (IPv4 in the order added, IPv6 newest first);
///  * links report their maximum MTU (maxMtu: 65535 by default, as veth; 0 for "lo", as the
///    kernel, meaning no limit beyond INT_MAX);
///  * SR-IOV VF settings: a link given a VF table with setVfs() reports those VFs in vfInfo and
///    takes setVfGuids/setVfLinkState for them; VF numbers >= INT_MAX are EINVAL first (as
///    do_setvfinfo checks), then a link without a VF table answers the setters with EOPNOTSUPP
///    (no driver hook, as veth), and a VF number beyond the table EINVAL (the interface's rule);
///    vfInfo answers ENOENT for a VF the link does not list. The table moves with the link.
///  * IPoIB children (ib_ipoib's ipoib_new_child_link and __ipoib_vlan_add): addIpoibChild checks,
///    in the kernel's order, the name (EINVAL when not a valid interface name, EEXIST when taken),
///    the parent (ENODEV when missing or not arpType 32, ARPHRD_INFINIBAND, whatever its kind;
///    EINVAL when the parent is itself a child), the pkey (0 and 0x8000 are EINVAL) and the mode
///    (connected on a parent whose 20-byte address lacks the RC flag 0x80 in byte 0 is EINVAL,
///    as ipoib_set_mode). Several children of one parent may share a pkey, as the kernel allows
///    for netlink-made children. The child is kind "ipoib", arpType 32, down, with the parent's
///    MTU and maxMtu, parentIndex = the parent, ipoib = {pkey | 0x8000, mode, umcast}, and the
///    parent's hardware address with a new QP number in bytes 1-3 (unique in this fake; the
///    parent's flags in byte 0 and its GID in bytes 4-19 stay). Its parentIndex is kept when it
///    moves to another namespace (the kernel's IFLA_LINK still names the parent);
///  * deleteLink: ENODEV for a missing link; EOPNOTSUPP for a link without a kind (a physical
///    device or "lo": no rtnl_link_ops->dellink); a link of kind "ipoib" without a parentIndex
///    (a physical IPoIB port) is left alone and the call succeeds, as ipoib_del_child_link
///    does; anything else goes as with removeLink.
/// Not modelled: children going away with their IPoIB parent or with a deleted namespace, the
/// kernel refusing the "ipoib" kind when ib_ipoib is not loaded (EOPNOTSUPP), the MTU that
/// connected mode picks, carrier, IPv6 link-local addresses and fe80::/64 routes (the kernel adds them
/// once both ends of a veth are up), veth peers, local/broadcast routes and what they do to
/// gateway checks (addresses or routes on "lo", a gateway that is a local address), multipath
/// routes, address lifetimes and flags; VF GUIDs taking effect only when the VF is next bound
/// to its driver, and VF tables appearing or changing with sriov_numvfs.
///
/// Every call is recorded in calls() in order, including calls that fail. failOn() makes the
/// n-th later call of an operation fail, once, without changing anything.
class FakeNetlink final : public nl::Netlink {
 public:
  /// The Netlink operations, for failOn() and the call log.
  enum class Op {
    kLinkByName,
    kLinkByIndex,
    kSetLinkUp,
    kRenameLink,
    kSetMtu,
    kSetAlias,
    kSetHwAddress,
    kMoveLink,
    kListAddresses,
    kAddAddress,
    kDeleteAddress,
    kListRoutes,
    kAddRoute,
    kDeleteRoute,
    kListRules,
    kAddRule,
    kDeleteRule,
    kVfInfo,
    kSetVfGuids,
    kSetVfLinkState,
    kAddIpoibChild,
    kDeleteLink,
  };

  /// One recorded call.
  struct Call {
    Op op;
    std::string netns;  ///< path of the (first) namespace argument
    std::string args;   ///< the other arguments, e.g. "3, up" or "3, /run/netns/pod"
    /// "setLinkUp(/run/netns/pod, 3, up)"
    [[nodiscard]] std::string toString() const;
  };

  static constexpr std::uint16_t kArphrdEther = 1;
  static constexpr std::uint16_t kArphrdLoopback = 772;
  static constexpr std::uint16_t kArphrdInfiniband = nl::kArphrdInfiniband;

  /// The method name of `op` ("renameLink").
  [[nodiscard]] static const char* opName(Op op);

  // ---- model set-up and inspection (not recorded in the call log) ----

  /// Adds a link to `ns` and returns its index. Defaults for unset fields: index allocated,
  /// arpType Ethernet, mtu 1500 (65536 for loopback), a unique locally administered MAC for
  /// Ethernet, maxMtu 65535 (a maxMtu given sets the upper end of the link's MTU range). A
  /// requested index or name that is already taken aborts the test program.
  int addLink(const os::Netns& ns, nl::Link link);
  /// Removes a link and its addresses and routes (as deleting the device would).
  /// @return false when there is no such link.
  bool removeLink(const os::Netns& ns, int index);
  /// The links of `ns` by index, starting with "lo".
  [[nodiscard]] std::vector<nl::Link> links(const os::Netns& ns);
  /// The link called `name` in `ns`, if any.
  [[nodiscard]] std::optional<nl::Link> findLink(const os::Netns& ns, const std::string& name);
  /// All addresses in `ns`, IPv4 first.
  [[nodiscard]] std::vector<nl::Address> addresses(const os::Netns& ns);
  /// All unicast routes in `ns`, as listRoutes(ns, 0) reports them.
  [[nodiscard]] std::vector<nl::Route> routes(const os::Netns& ns);
  /// MTU limits of a link (default 68..65535, as veth). The link reports `maxMtu` as its maxMtu.
  void setMtuRange(const os::Netns& ns, int index, std::uint32_t minMtu, std::uint32_t maxMtu);
  /// Makes link `pfIndex` of `ns` a PF with these VFs: entry i is VF i (its `vf` field is set to
  /// i). An empty vector gives a PF with no VFs enabled (setters answer EINVAL). A missing link
  /// aborts the test program.
  void setVfs(const os::Netns& ns, int pfIndex, std::vector<nl::VfInfo> vfs);
  /// VF `vf` of link `pfIndex` as the model holds it, if the link has such a VF.
  [[nodiscard]] std::optional<nl::VfInfo> vf(const os::Netns& ns, int pfIndex, std::uint32_t vf);
  /// false: renaming an up link fails with EBUSY, as on Linux < 6.2. Default true.
  void setRenameUpAllowed(bool allowed) { renameUpAllowed_ = allowed; }
  /// Replaces the IPoIB settings link `index` of `ns` reports (pkey, mode, umcast), as a change
  /// made behind ibcni's back would (`ip link set ... type ipoib mode connected`, sysfs `mode`);
  /// nullopt removes them. A missing link aborts the test program.
  void setIpoibInfo(const os::Netns& ns, int index, std::optional<nl::IpoibInfo> info);

  // ---- fault injection ----

  /// The `nth` call of `op` from now on (1 = the next one) fails with `err` and `extAck` and
  /// changes nothing. Each failOn fires once; several may be pending.
  void failOn(Op op, int err, int nth = 1, std::string extAck = {});
  void clearFailures() { failures_.clear(); }

  // ---- call log ----

  [[nodiscard]] const std::vector<Call>& calls() const noexcept { return calls_; }
  /// calls() as strings, e.g. {"linkByName(/run/netns/pod, eth0)", "setLinkUp(..., 3, up)"}.
  [[nodiscard]] std::vector<std::string> callLog() const;
  /// Only the operations, in order.
  [[nodiscard]] std::vector<Op> callOps() const;
  void clearCalls() { calls_.clear(); }

  // ---- nl::Netlink ----

  [[nodiscard]] os::SysResult<nl::Link> linkByName(const os::Netns& ns,
                                                   const std::string& name) override;
  [[nodiscard]] os::SysResult<nl::Link> linkByIndex(const os::Netns& ns, int index) override;
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
  [[nodiscard]] os::SysResult<std::vector<nl::Address>> listAddresses(const os::Netns& ns,
                                                                      int index) override;
  [[nodiscard]] os::SysResult<void> addAddress(const os::Netns& ns, int index,
                                               const net::IpPrefix& prefix) override;
  [[nodiscard]] os::SysResult<void> deleteAddress(const os::Netns& ns, int index,
                                                  const net::IpPrefix& prefix) override;
  [[nodiscard]] os::SysResult<std::vector<nl::Route>> listRoutes(const os::Netns& ns,
                                                                 int index) override;
  [[nodiscard]] os::SysResult<void> addRoute(const os::Netns& ns, const nl::Route& route) override;
  [[nodiscard]] os::SysResult<void> deleteRoute(const os::Netns& ns,
                                                const nl::Route& route) override;
  [[nodiscard]] os::SysResult<std::vector<nl::Rule>> listRules(const os::Netns& ns) override;
  [[nodiscard]] os::SysResult<void> addRule(const os::Netns& ns, const nl::Rule& rule) override;
  [[nodiscard]] os::SysResult<void> deleteRule(const os::Netns& ns, const nl::Rule& rule) override;
  [[nodiscard]] os::SysResult<void> addIpoibChild(const os::Netns& ns,
                                                  const nl::IpoibChildSpec& spec) override;
  [[nodiscard]] os::SysResult<void> deleteLink(const os::Netns& ns, int index) override;
  [[nodiscard]] os::SysResult<nl::VfInfo> vfInfo(const os::Netns& ns, int pfIndex,
                                                 std::uint32_t vf) override;
  [[nodiscard]] os::SysResult<void> setVfGuids(const os::Netns& ns, int pfIndex, std::uint32_t vf,
                                               const net::Guid& nodeGuid,
                                               const net::Guid& portGuid) override;
  [[nodiscard]] os::SysResult<void> setVfLinkState(const os::Netns& ns, int pfIndex,
                                                   std::uint32_t vf,
                                                   nl::VfLinkState state) override;

 private:
  static constexpr std::uint32_t kTableMain = 254;
  static constexpr std::uint32_t kTableLocal = 255;
  static constexpr std::uint32_t kScopeUniverse = 0;
  static constexpr std::uint32_t kScopeLink = 253;
  static constexpr std::uint32_t kIpv6DefaultMetric = 1024;
  static constexpr std::uint32_t kIpv6PrefixMetric = 256;
  static constexpr std::uint32_t kIpv6MinMtu = 1280;
  static constexpr std::uint32_t kIpv4MinMtu = 68;

  struct LinkState {
    nl::Link link;
    std::uint32_t minMtu = 68;
    std::uint32_t maxMtu = 65535;
    bool ipv6Gone = false;  // MTU went below 1280: the device lost its IPv6 state
    bool ipv4Gone = false;  // MTU went below 68: the device lost its IPv4 state
    std::optional<std::vector<nl::VfInfo>> vfs;  // set: a PF with this VF table (setVfs)
  };
  struct AddrState {
    nl::Address addr;
    bool secondary = false;  // IPv4: another address of the same subnet came first
    bool loopback = false;   // 127.0.0.1/8 or ::1/128 that "lo" got when it came up
  };
  struct RouteState {
    nl::Route route;      // normalized: table, scope and (IPv6) priority always set
    bool kernel = false;  // a prefix route the kernel made for an address
  };
  struct NsState {
    std::string path;
    int nextIndex = 1;
    // Routing tables that exist: IPv6 starts with main and local, IPv4 creates them on use.
    std::set<std::pair<int, std::uint32_t>> tables{{AF_INET6, 254}, {AF_INET6, 255}};
    std::vector<LinkState> links;
    std::vector<AddrState> addrs;  // in insertion order
    std::vector<RouteState> routes;
    std::vector<nl::Rule> rules;  // by priority, then in the order added (as the kernel lists them)
  };
  struct Failure {
    Op op;
    int err;
    int remaining;
    std::string extAck;
  };

  NsState& state(const os::Netns& ns);
  static LinkState* find(NsState& s, int index);
  static LinkState* find(NsState& s, const std::string& name);
  static int allocateIndex(NsState& s);
  std::optional<os::SysError> record(Op op, const os::Netns& ns, std::string args,
                                     const std::string& opText);
  static std::string inNs(const os::Netns& ns) { return " in netns " + ns.path(); }
  static std::string linkRef(int index) { return "link " + std::to_string(index); }
  static bool isLoopback(const LinkState& l) { return l.link.arpType == kArphrdLoopback; }
  static bool isLinkLocal(const net::IpAddress& a) {
    return !a.isV4() && a.bytes[0] == 0xfe && (a.bytes[1] & 0xc0) == 0x80;
  }
  static const char* vfLinkStateName(nl::VfLinkState state) {
    return state == nl::VfLinkState::kAuto     ? "auto"
           : state == nl::VfLinkState::kEnable ? "enable"
                                               : "disable";
  }
  /// The VF a setter addresses, or the kernel's error for it.
  static os::SysResult<nl::VfInfo*> settableVf(NsState& s, int pfIndex, std::uint32_t vf,
                                               const std::string& op);
  static const char* noDeviceText(const net::IpPrefix& p) {
    return p.address.isV4() ? "ipv4: Device not found" : "ipv6: Unable to find the interface";
  }

  void linkWentDown(NsState& s, int index);
  void linkWentUp(NsState& s, LinkState& l);
  void dropIpv6(NsState& s, int index);
  void addPrefixRoute(NsState& s, const LinkState& l, const AddrState& a);
  void removePrefixRoute(NsState& s, int index, const nl::Address& a);
  static std::vector<nl::Address> orderedAddresses(const NsState& s, int index);
  static nl::Route reported(const nl::Route& r);
  static bool coversGateway(const NsState& s, const nl::Route& route, int* dev);

  std::map<ino_t, NsState> namespaces_;
  std::vector<Failure> failures_;
  std::vector<Call> calls_;
  bool renameUpAllowed_ = true;
  unsigned macCounter_ = 0;
  unsigned qpnCounter_ = 0;  // QP numbers handed to IPoIB children
};

/// An nl::Link to pass to FakeNetlink::addLink: the name (and kind) set, everything else left for
/// addLink's defaults. Set more fields on the result as needed.
[[nodiscard]] inline nl::Link fakeLink(std::string name, std::string kind = {}) {
  nl::Link link;
  link.name = std::move(name);
  link.kind = std::move(kind);
  return link;
}

/// The 20-byte IPoIB hardware address of an InfiniBand port whose GUID is `guid` ("02:00:...:01").
[[nodiscard]] inline std::string ipoibAddress(const std::string& guid) {
  return "00:00:10:87:fe:80:00:00:00:00:00:00:" + guid;
}

/// fakeLink for an InfiniBand netdev (ARPHRD_INFINIBAND) of port GUID `guid`: its hardware address
/// is ipoibAddress(guid).
[[nodiscard]] inline nl::Link fakeIbLink(std::string name, const std::string& guid, std::string kind = {}) {
  nl::Link link = fakeLink(std::move(name), std::move(kind));
  link.arpType = FakeNetlink::kArphrdInfiniband;
  link.mac = *net::HwAddress::parse(ipoibAddress(guid));
  return link;
}

// ---------------------------------------------------------------------------------------------
// Implementation (header-only so that any test target can use the fake without a library).

inline const char* FakeNetlink::opName(Op op) {
  switch (op) {
    case Op::kLinkByName:
      return "linkByName";
    case Op::kLinkByIndex:
      return "linkByIndex";
    case Op::kSetLinkUp:
      return "setLinkUp";
    case Op::kRenameLink:
      return "renameLink";
    case Op::kSetMtu:
      return "setMtu";
    case Op::kSetAlias:
      return "setAlias";
    case Op::kSetHwAddress:
      return "setHwAddress";
    case Op::kMoveLink:
      return "moveLink";
    case Op::kListAddresses:
      return "listAddresses";
    case Op::kAddAddress:
      return "addAddress";
    case Op::kDeleteAddress:
      return "deleteAddress";
    case Op::kListRoutes:
      return "listRoutes";
    case Op::kAddRoute:
      return "addRoute";
    case Op::kDeleteRoute:
      return "deleteRoute";
    case Op::kListRules:
      return "listRules";
    case Op::kAddRule:
      return "addRule";
    case Op::kDeleteRule:
      return "deleteRule";
    case Op::kVfInfo:
      return "vfInfo";
    case Op::kSetVfGuids:
      return "setVfGuids";
    case Op::kSetVfLinkState:
      return "setVfLinkState";
    case Op::kAddIpoibChild:
      return "addIpoibChild";
    case Op::kDeleteLink:
      return "deleteLink";
  }
  return "?";
}

inline std::string FakeNetlink::Call::toString() const {
  return std::string(opName(op)) + "(" + netns + (args.empty() ? "" : ", " + args) + ")";
}

inline std::vector<std::string> FakeNetlink::callLog() const {
  std::vector<std::string> out;
  out.reserve(calls_.size());
  for (const auto& c : calls_) {
    out.push_back(c.toString());
  }
  return out;
}

inline std::vector<FakeNetlink::Op> FakeNetlink::callOps() const {
  std::vector<Op> out;
  out.reserve(calls_.size());
  for (const auto& c : calls_) {
    out.push_back(c.op);
  }
  return out;
}

inline void FakeNetlink::setIpoibInfo(const os::Netns& ns, int index,
                                      std::optional<nl::IpoibInfo> info) {
  LinkState* l = find(state(ns), index);
  if (l == nullptr) {
    std::fprintf(stderr, "FakeNetlink::setIpoibInfo: no link %d in %s\n", index,
                 ns.path().c_str());
    std::abort();
  }
  l->link.ipoib = info;
}

inline void FakeNetlink::failOn(Op op, int err, int nth, std::string extAck) {
  failures_.push_back(Failure{op, err, nth < 1 ? 1 : nth, std::move(extAck)});
}


inline FakeNetlink::NsState& FakeNetlink::state(const os::Netns& ns) {
  auto [it, inserted] = namespaces_.try_emplace(ns.inode());
  NsState& s = it->second;
  if (inserted) {
    s.path = ns.path();
    LinkState lo;
    lo.link.index = allocateIndex(s);
    lo.link.name = "lo";
    lo.link.mtu = 65536;
    lo.link.arpType = kArphrdLoopback;
    lo.link.mac = net::HwAddress{"00:00:00:00:00:00", 6};
    lo.minMtu = 0;
    lo.maxMtu = 0;  // no limit (setMtu still stops at INT_MAX), reported as 0 as the kernel does
    lo.link.maxMtu = 0;
    s.links.push_back(std::move(lo));
  }
  return s;
}

inline FakeNetlink::LinkState* FakeNetlink::find(NsState& s, int index) {
  auto it = std::find_if(s.links.begin(), s.links.end(),
                         [index](const LinkState& l) { return l.link.index == index; });
  return it == s.links.end() ? nullptr : &*it;
}

inline FakeNetlink::LinkState* FakeNetlink::find(NsState& s, const std::string& name) {
  auto it = std::find_if(s.links.begin(), s.links.end(),
                         [&name](const LinkState& l) { return l.link.name == name; });
  return it == s.links.end() ? nullptr : &*it;
}

inline int FakeNetlink::allocateIndex(NsState& s) {
  // Like the kernel's cyclic allocator: continue after the last allocated index, skip taken ones.
  while (find(s, s.nextIndex) != nullptr) {
    ++s.nextIndex;
  }
  return s.nextIndex++;
}

inline std::optional<os::SysError> FakeNetlink::record(Op op, const os::Netns& ns, std::string args,
                                                       const std::string& opText) {
  calls_.push_back(Call{op, ns.path(), std::move(args)});
  for (auto it = failures_.begin(); it != failures_.end(); ++it) {
    if (it->op == op && --it->remaining == 0) {
      os::SysError err{it->err, opText, it->extAck};
      failures_.erase(it);
      return err;
    }
  }
  if (!ns) {
    return os::SysError{EBADF, opText + ": invalid netns handle", {}};
  }
  return std::nullopt;
}

inline int FakeNetlink::addLink(const os::Netns& ns, nl::Link link) {
  NsState& s = state(ns);
  if (link.index != 0 && find(s, link.index) != nullptr) {
    std::fprintf(stderr, "FakeNetlink::addLink: index %d is taken in %s\n", link.index,
                 ns.path().c_str());
    std::abort();
  }
  if (find(s, link.name) != nullptr) {
    std::fprintf(stderr, "FakeNetlink::addLink: name %s is taken in %s\n", link.name.c_str(),
                 ns.path().c_str());
    std::abort();
  }
  if (link.index == 0) {
    link.index = allocateIndex(s);
  }
  if (link.arpType == 0) {
    link.arpType = kArphrdEther;
  }
  if (link.mtu == 0) {
    link.mtu = link.arpType == kArphrdLoopback ? 65536 : 1500;
  }
  if (link.mac.length == 0 && link.arpType == kArphrdEther) {
    ++macCounter_;
    char text[18];
    std::snprintf(text, sizeof text, "02:fa:ce:%02x:%02x:%02x", (macCounter_ >> 16) & 0xff,
                  (macCounter_ >> 8) & 0xff, macCounter_ & 0xff);
    link.mac = net::HwAddress{text, 6};
  }
  LinkState l;
  l.link = std::move(link);
  if (l.link.maxMtu != 0) {
    l.maxMtu = l.link.maxMtu;
  }
  l.link.maxMtu = l.maxMtu;  // a maxMtu given to addLink sets the range's upper end
  const int index = l.link.index;
  const bool up = l.link.adminUp;
  l.link.adminUp = false;
  s.links.push_back(std::move(l));
  if (up) {
    LinkState* added = find(s, index);
    added->link.adminUp = true;
    linkWentUp(s, *added);
  }
  return index;
}

inline bool FakeNetlink::removeLink(const os::Netns& ns, int index) {
  NsState& s = state(ns);
  if (find(s, index) == nullptr) {
    return false;
  }
  linkWentDown(s, index);
  std::erase_if(s.addrs, [index](const AddrState& a) { return a.addr.ifIndex == index; });
  std::erase_if(s.links, [index](const LinkState& l) { return l.link.index == index; });
  return true;
}

inline std::vector<nl::Link> FakeNetlink::links(const os::Netns& ns) {
  NsState& s = state(ns);
  std::vector<nl::Link> out;
  for (const auto& l : s.links) {
    out.push_back(l.link);
  }
  std::sort(out.begin(), out.end(),
            [](const nl::Link& a, const nl::Link& b) { return a.index < b.index; });
  return out;
}

inline std::optional<nl::Link> FakeNetlink::findLink(const os::Netns& ns, const std::string& name) {
  NsState& s = state(ns);
  if (LinkState* l = find(s, name); l != nullptr) {
    return l->link;
  }
  return std::nullopt;
}

inline std::vector<nl::Address> FakeNetlink::addresses(const os::Netns& ns) {
  NsState& s = state(ns);
  std::vector<nl::Address> out;
  for (int family : {AF_INET, AF_INET6}) {
    for (const auto& l : links(ns)) {
      for (const auto& a : orderedAddresses(s, l.index)) {
        if (a.prefix.address.family == family) {
          out.push_back(a);
        }
      }
    }
  }
  return out;
}

inline std::vector<nl::Route> FakeNetlink::routes(const os::Netns& ns) {
  NsState& s = state(ns);
  std::vector<nl::Route> out;
  for (int family : {AF_INET, AF_INET6}) {
    for (const auto& r : s.routes) {
      if (r.route.dst.address.family == family) {
        out.push_back(reported(r.route));
      }
    }
  }
  return out;
}

inline void FakeNetlink::setMtuRange(const os::Netns& ns, int index, std::uint32_t minMtu,
                                     std::uint32_t maxMtu) {
  if (LinkState* l = find(state(ns), index); l != nullptr) {
    l->minMtu = minMtu;
    l->maxMtu = maxMtu;
    l->link.maxMtu = maxMtu;
  }
}

inline void FakeNetlink::setVfs(const os::Netns& ns, int pfIndex, std::vector<nl::VfInfo> vfs) {
  LinkState* l = find(state(ns), pfIndex);
  if (l == nullptr) {
    std::fprintf(stderr, "FakeNetlink::setVfs: no link %d in %s\n", pfIndex, ns.path().c_str());
    std::abort();
  }
  for (std::size_t i = 0; i < vfs.size(); ++i) {
    vfs[i].vf = static_cast<std::uint32_t>(i);
  }
  l->vfs = std::move(vfs);
}

inline std::optional<nl::VfInfo> FakeNetlink::vf(const os::Netns& ns, int pfIndex,
                                                 std::uint32_t vf) {
  const LinkState* l = find(state(ns), pfIndex);
  if (l == nullptr || !l->vfs || vf >= l->vfs->size()) {
    return std::nullopt;
  }
  return (*l->vfs)[vf];
}

// The kernel's order: IPv4 primaries (127.0.0.1, scope host, ahead of the others), then IPv4
// secondaries, each in the order added (inet_insert_ifa); then IPv6 newest first, ::1 last
// (ipv6_link_dev_addr keeps the list sorted by scope and puts a new address before older ones
// of its scope).
inline std::vector<nl::Address> FakeNetlink::orderedAddresses(const NsState& s, int index) {
  std::vector<nl::Address> out;
  for (int pass = 0; pass < 3; ++pass) {
    for (const auto& a : s.addrs) {
      const bool want = pass == 0   ? a.loopback
                        : pass == 1 ? !a.loopback && !a.secondary
                                    : a.secondary;
      if (a.addr.ifIndex == index && a.addr.prefix.address.isV4() && want) {
        out.push_back(a.addr);
      }
    }
  }
  for (bool loopback : {false, true}) {
    for (auto it = s.addrs.rbegin(); it != s.addrs.rend(); ++it) {
      if (it->addr.ifIndex == index && !it->addr.prefix.address.isV4() &&
          it->loopback == loopback) {
        out.push_back(it->addr);
      }
    }
  }
  return out;
}

// What listRoutes shows: the kernel omits an IPv4 priority of 0.
inline nl::Route FakeNetlink::reported(const nl::Route& r) {
  nl::Route out = r;
  if (out.priority && *out.priority == 0) {
    out.priority.reset();
  }
  return out;
}

inline void FakeNetlink::linkWentDown(NsState& s, int index) {
  // NETDEV_DOWN: fib_disable_ip flushes every IPv4 route through the device and addrconf_ifdown
  // every IPv6 route and (keep_addr_on_down=0) every IPv6 address; IPv4 addresses stay.
  std::erase_if(s.routes, [index](const RouteState& r) { return r.route.ifIndex == index; });
  dropIpv6(s, index);
}

inline void FakeNetlink::dropIpv6(NsState& s, int index) {
  std::erase_if(s.addrs, [index](const AddrState& a) {
    return a.addr.ifIndex == index && !a.addr.prefix.address.isV4();
  });
  std::erase_if(s.routes, [index](const RouteState& r) {
    return r.route.ifIndex == index && !r.route.dst.address.isV4();
  });
}

inline void FakeNetlink::linkWentUp(NsState& s, LinkState& l) {
  const int index = l.link.index;
  if (isLoopback(l)) {
    // inetdev_event and addrconf (init_loopback) add 127.0.0.1/8 and ::1/128 on NETDEV_UP of
    // the loopback device (::1 only with an MTU fit for IPv6); their routes are local-table
    // ones, which listRoutes leaves out.
    for (const char* text : {"127.0.0.1/8", "::1/128"}) {
      auto p = *net::IpPrefix::parse(text);
      if (p.address.isV4() ? l.ipv4Gone : l.link.mtu < kIpv6MinMtu) {
        continue;
      }
      bool present = std::any_of(s.addrs.begin(), s.addrs.end(), [&](const AddrState& a) {
        return a.addr.ifIndex == index && a.addr.prefix == p;
      });
      if (!present) {
        s.addrs.push_back(AddrState{nl::Address{index, p}, false, true});
      }
    }
    if (!l.ipv4Gone) {
      s.tables.emplace(AF_INET, kTableLocal);
      s.tables.emplace(AF_INET, kTableMain);
    }
  }
  for (const auto& a : s.addrs) {
    if (a.addr.ifIndex == index) {
      addPrefixRoute(s, l, a);
    }
  }
}

inline void FakeNetlink::addPrefixRoute(NsState& s, const LinkState& l, const AddrState& a) {
  const net::IpPrefix& p = a.addr.prefix;
  nl::Route r;
  r.dst = p.network();
  r.ifIndex = l.link.index;
  r.table = kTableMain;
  if (a.loopback) {
    return;
  }
  if (p.address.isV4()) {
    // fib_add_ifaddr: no prefix route for secondaries and /32s; on "lo" the prefix route is a
    // local one.
    if (a.secondary || p.prefixLen >= 32 || isLoopback(l)) {
      return;
    }
    r.scope = kScopeLink;
    r.priority = 0;
  } else {
    r.scope = kScopeUniverse;
    r.priority = kIpv6PrefixMetric;
  }
  // fib_magic appends (no NLM_F_EXCL): a static route with the same key does not stop it, only
  // an identical kernel route does.
  bool present = std::any_of(s.routes.begin(), s.routes.end(), [&r](const RouteState& x) {
    return x.kernel && x.route.dst == r.dst && x.route.ifIndex == r.ifIndex &&
           x.route.table == r.table && x.route.priority == r.priority;
  });
  if (!present) {
    s.routes.push_back(RouteState{r, true});
  }
  s.tables.emplace(p.address.family, kTableMain);
}

inline void FakeNetlink::removePrefixRoute(NsState& s, int index, const nl::Address& a) {
  const net::IpPrefix net = a.prefix.network();
  // Another address of the link in the same prefix keeps the route.
  bool shared = std::any_of(s.addrs.begin(), s.addrs.end(), [&](const AddrState& o) {
    return o.addr.ifIndex == index && o.addr.prefix.network() == net;
  });
  if (shared) {
    return;
  }
  std::erase_if(s.routes, [&](const RouteState& r) {
    return r.kernel && r.route.ifIndex == index && r.route.dst == net;
  });
}

// The kernel looks the gateway up in the route's table, then in the main table, and takes the
// most specific route through the given device (any device when none is given). For IPv4 only
// routes of a narrower scope than the new route count (fib_check_nh_v4_gw), which leaves out
// gateway routes; for IPv6 the route found must not have a gateway itself.
inline bool FakeNetlink::coversGateway(const NsState& s, const nl::Route& route, int* dev) {
  const net::IpAddress& gw = *route.gw;
  const std::uint32_t table = route.table.value_or(0) == 0 ? kTableMain : *route.table;
  const std::uint32_t minScope = route.scope.value_or(kScopeUniverse) + 1;
  for (std::uint32_t t : {table, kTableMain}) {
    const RouteState* best = nullptr;
    for (const auto& r : s.routes) {
      const bool eligible = gw.isV4() ? r.route.scope.value_or(0) >= minScope : !r.route.gw;
      if (r.route.table == t && eligible && r.route.dst.contains(gw) &&
          (route.ifIndex == 0 || r.route.ifIndex == route.ifIndex) &&
          (best == nullptr || r.route.dst.prefixLen > best->route.dst.prefixLen)) {
        best = &r;
      }
    }
    if (best != nullptr) {
      *dev = best->route.ifIndex;
      return true;
    }
  }
  return false;
}

inline os::SysResult<nl::Link> FakeNetlink::linkByName(const os::Netns& ns,
                                                       const std::string& name) {
  const std::string op = "get link \"" + name + "\"" + inNs(ns);
  if (auto err = record(Op::kLinkByName, ns, name, op)) {
    return std::unexpected(*err);
  }
  if (!net::isValidIfName(name)) {
    return os::sysFail(ENODEV, op + ": not a valid interface name");
  }
  if (LinkState* l = find(state(ns), name); l != nullptr) {
    return l->link;
  }
  return os::sysFail(ENODEV, op);
}

inline os::SysResult<nl::Link> FakeNetlink::linkByIndex(const os::Netns& ns, int index) {
  const std::string op = "get " + linkRef(index) + inNs(ns);
  if (auto err = record(Op::kLinkByIndex, ns, std::to_string(index), op)) {
    return std::unexpected(*err);
  }
  if (LinkState* l = find(state(ns), index); l != nullptr) {
    return l->link;
  }
  return os::sysFail(ENODEV, op);
}

inline os::SysResult<void> FakeNetlink::setLinkUp(const os::Netns& ns, int index, bool up) {
  const std::string op = "set " + linkRef(index) + (up ? " up" : " down") + inNs(ns);
  if (auto err = record(Op::kSetLinkUp, ns, std::to_string(index) + (up ? ", up" : ", down"), op)) {
    return std::unexpected(*err);
  }
  NsState& s = state(ns);
  LinkState* l = find(s, index);
  if (l == nullptr) {
    return os::sysFail(ENODEV, op);
  }
  if (l->link.adminUp == up) {
    return {};
  }
  l->link.adminUp = up;
  if (up) {
    linkWentUp(s, *l);
  } else {
    linkWentDown(s, index);
  }
  return {};
}

inline os::SysResult<void> FakeNetlink::renameLink(const os::Netns& ns, int index,
                                                   const std::string& newName) {
  const std::string op = "rename " + linkRef(index) + " to \"" + newName + "\"" + inNs(ns);
  if (auto err = record(Op::kRenameLink, ns, std::to_string(index) + ", " + newName, op)) {
    return std::unexpected(*err);
  }
  if (!net::isValidIfName(newName)) {
    return os::sysFail(EINVAL, op + ": not a valid interface name");
  }
  NsState& s = state(ns);
  LinkState* l = find(s, index);
  if (l == nullptr) {
    return os::sysFail(ENODEV, op);
  }
  // dev_change_name checks IFF_UP first (kernels before 6.2), then the name.
  if (l->link.adminUp && !renameUpAllowed_) {
    return os::sysFail(EBUSY, op);
  }
  if (l->link.name == newName) {
    return {};
  }
  if (find(s, newName) != nullptr) {
    return os::sysFail(EEXIST, op);
  }
  l->link.name = newName;
  return {};
}

inline os::SysResult<void> FakeNetlink::setMtu(const os::Netns& ns, int index, std::uint32_t mtu) {
  const std::string op = "set mtu " + std::to_string(mtu) + " on " + linkRef(index) + inNs(ns);
  if (auto err = record(Op::kSetMtu, ns, std::to_string(index) + ", " + std::to_string(mtu), op)) {
    return std::unexpected(*err);
  }
  NsState& s = state(ns);
  LinkState* l = find(s, index);
  if (l == nullptr) {
    return os::sysFail(ENODEV, op);
  }
  // The kernel reads IFLA_MTU as an int: values above INT_MAX are negative, hence "less".
  if (mtu > static_cast<std::uint32_t>(INT_MAX) || mtu < l->minMtu) {
    return os::sysFail(EINVAL, op, "mtu less than device minimum");
  }
  if (l->maxMtu > 0 && mtu > l->maxMtu) {
    return os::sysFail(EINVAL, op, "mtu greater than device maximum");
  }
  const std::uint32_t oldMtu = l->link.mtu;
  if (mtu == oldMtu) {
    return {};  // dev_set_mtu: no change, no NETDEV_CHANGEMTU
  }
  l->link.mtu = mtu;
  // rt6_mtu_change: an IPv6 route's MTU metric follows the device down, and up when it was
  // equal to the old device MTU. IPv4 route metrics stay as they are.
  for (auto& r : s.routes) {
    if (r.route.ifIndex == index && !r.route.dst.address.isV4() && r.route.mtu &&
        (*r.route.mtu >= mtu || *r.route.mtu == oldMtu)) {
      r.route.mtu = mtu;
    }
  }
  if (mtu < kIpv4MinMtu) {
    // inetdev_event(NETDEV_CHANGEMTU): IPv4 is torn down with its addresses and routes.
    std::erase_if(s.addrs, [index](const AddrState& a) {
      return a.addr.ifIndex == index && a.addr.prefix.address.isV4();
    });
    std::erase_if(s.routes, [index](const RouteState& r) {
      return r.route.ifIndex == index && r.route.dst.address.isV4();
    });
    l->ipv4Gone = true;
  } else {
    l->ipv4Gone = false;
  }
  if (mtu < kIpv6MinMtu) {
    // addrconf_ifdown: the IPv6 addresses and routes go; other devices than "lo" also lose
    // their IPv6 state until the MTU is raised again.
    dropIpv6(s, index);
    l->ipv6Gone = !isLoopback(*l);
  } else {
    l->ipv6Gone = false;
  }
  return {};
}

inline os::SysResult<void> FakeNetlink::setAlias(const os::Netns& ns, int index,
                                                 const std::string& alias) {
  const std::string op = (alias.empty() ? "clear alias of " : "set alias \"" + alias + "\" on ") +
                         linkRef(index) + inNs(ns);
  if (auto err = record(Op::kSetAlias, ns, std::to_string(index) + ", " + alias, op)) {
    return std::unexpected(*err);
  }
  // IFALIASZ - 1, enforced by the rtnetlink policy before the link is even looked up.
  if (alias.size() > 255) {
    return os::sysFail(ERANGE, op, "Attribute failed policy validation");
  }
  LinkState* l = find(state(ns), index);
  if (l == nullptr) {
    return os::sysFail(ENODEV, op);
  }
  l->link.alias = alias;
  return {};
}

inline os::SysResult<void> FakeNetlink::setHwAddress(const os::Netns& ns, int index,
                                                     const net::HwAddress& mac) {
  const std::string op = "set address " + mac.text + " on " + linkRef(index) + inNs(ns);
  if (auto err = record(Op::kSetHwAddress, ns, std::to_string(index) + ", " + mac.text, op)) {
    return std::unexpected(*err);
  }
  auto parsed = net::HwAddress::parse(mac.text);
  if (!parsed) {
    return os::sysFail(EINVAL, op + ": not a hardware address");
  }
  LinkState* l = find(state(ns), index);
  if (l == nullptr) {
    return os::sysFail(ENODEV, op);
  }
  const std::size_t len = l->link.mac.length;
  if (parsed->length < len) {
    return os::sysFail(EINVAL, op);  // validate_linkmsg: IFLA_ADDRESS shorter than addr_len
  }
  // The kernel copies addr_len bytes and ignores the rest.
  net::HwAddress next{parsed->text.substr(0, len == 0 ? 0 : len * 3 - 1), len};
  if (l->link.arpType == kArphrdEther && len == 6) {
    const bool multicast = (std::stoul(next.text.substr(0, 2), nullptr, 16) & 1) != 0;
    if (multicast || next.text == "00:00:00:00:00:00") {
      return os::sysFail(EADDRNOTAVAIL, op);  // eth_prepare_mac_addr_change
    }
  }
  l->link.mac = next;
  return {};
}

inline os::SysResult<void> FakeNetlink::moveLink(const os::Netns& from, int index,
                                                 const os::Netns& to) {
  const std::string op =
      "move " + linkRef(index) + " from netns " + from.path() + " to netns " + to.path();
  if (auto err = record(Op::kMoveLink, from, std::to_string(index) + ", " + to.path(), op)) {
    return std::unexpected(*err);
  }
  if (!to) {
    return os::sysFail(EBADF, op + ": invalid target netns handle");
  }
  NsState& src = state(from);
  LinkState* l = find(src, index);
  if (l == nullptr) {
    return os::sysFail(ENODEV, op);
  }
  if (isLoopback(*l)) {
    return os::sysFail(EINVAL, op, "The interface netns is immutable");
  }
  if (from.inode() == to.inode()) {
    return {};  // __dev_change_net_namespace: nothing to do
  }
  NsState& dst = state(to);
  if (find(dst, l->link.name) != nullptr) {
    return os::sysFail(EEXIST, op, "An interface with the same name exists in the target netns");
  }
  // The device is closed (routes and IPv6 addresses go), unregistered from the old namespace
  // (IPv4 addresses go) and registered in the new one, down.
  linkWentDown(src, index);
  std::erase_if(src.addrs, [index](const AddrState& a) { return a.addr.ifIndex == index; });
  LinkState moved = std::move(*l);
  std::erase_if(src.links, [index](const LinkState& x) { return x.link.index == index; });
  moved.link.adminUp = false;
  if (find(dst, moved.link.index) != nullptr) {
    moved.link.index = allocateIndex(dst);
  }
  dst.links.push_back(std::move(moved));
  return {};
}

inline os::SysResult<std::vector<nl::Address>> FakeNetlink::listAddresses(const os::Netns& ns,
                                                                          int index) {
  const std::string op = "list addresses of " + linkRef(index) + inNs(ns);
  if (auto err = record(Op::kListAddresses, ns, std::to_string(index), op)) {
    return std::unexpected(*err);
  }
  NsState& s = state(ns);
  if (find(s, index) == nullptr) {
    return os::sysFail(ENODEV, op);
  }
  return orderedAddresses(s, index);
}

inline os::SysResult<void> FakeNetlink::addAddress(const os::Netns& ns, int index,
                                                   const net::IpPrefix& prefix) {
  const std::string op = "add address " + prefix.toString() + " to " + linkRef(index) + inNs(ns);
  if (auto err =
          record(Op::kAddAddress, ns, std::to_string(index) + ", " + prefix.toString(), op)) {
    return std::unexpected(*err);
  }
  if (!prefix.address.valid()) {
    return os::sysFail(EINVAL, op + ": no address");
  }
  NsState& s = state(ns);
  LinkState* l = find(s, index);
  if (l == nullptr) {
    return os::sysFail(ENODEV, op, noDeviceText(prefix));
  }
  AddrState added{nl::Address{index, prefix}, false};
  if (prefix.address.isV4()) {
    if (l->ipv4Gone) {
      return os::sysFail(ENODEV, op, noDeviceText(prefix));
    }
    for (const auto& a : s.addrs) {
      if (a.addr.ifIndex != index || !a.addr.prefix.address.isV4() ||
          a.addr.prefix.prefixLen != prefix.prefixLen ||
          !a.addr.prefix.network().contains(prefix.address)) {
        continue;
      }
      if (a.addr.prefix.address == prefix.address) {
        return os::sysFail(EEXIST, op, "ipv4: Address already assigned");
      }
      added.secondary = true;
    }
  } else {
    if (l->ipv6Gone) {
      return os::sysFail(EINVAL, op);  // ipv6_add_dev refuses a device with MTU < 1280
    }
    for (const auto& a : s.addrs) {
      if (a.addr.ifIndex == index && a.addr.prefix.address == prefix.address) {
        return os::sysFail(EEXIST, op, "ipv6: address already assigned");
      }
    }
  }
  s.addrs.push_back(added);
  if (prefix.address.isV4()) {
    // fib_add_ifaddr adds the local route at once; creating the local table also creates main
    // (fib_new_table, no custom rules).
    s.tables.emplace(AF_INET, kTableLocal);
    s.tables.emplace(AF_INET, kTableMain);
  }
  if (l->link.adminUp) {
    addPrefixRoute(s, *l, added);
  }
  return {};
}

inline os::SysResult<void> FakeNetlink::deleteAddress(const os::Netns& ns, int index,
                                                      const net::IpPrefix& prefix) {
  const std::string op =
      "delete address " + prefix.toString() + " from " + linkRef(index) + inNs(ns);
  if (auto err =
          record(Op::kDeleteAddress, ns, std::to_string(index) + ", " + prefix.toString(), op)) {
    return std::unexpected(*err);
  }
  if (!prefix.address.valid()) {
    return os::sysFail(EINVAL, op + ": no address");
  }
  NsState& s = state(ns);
  const LinkState* l = find(s, index);
  if (l == nullptr || (prefix.address.isV4() && l->ipv4Gone)) {
    return os::sysFail(ENODEV, op, noDeviceText(prefix));
  }
  if (!prefix.address.isV4() && l->ipv6Gone) {
    return os::sysFail(ENXIO, op, "ipv6: IPv6 is disabled on this device");
  }
  auto it = std::find_if(s.addrs.begin(), s.addrs.end(), [&](const AddrState& a) {
    return a.addr.ifIndex == index && a.addr.prefix == prefix;
  });
  if (it == s.addrs.end()) {
    return os::sysFail(
        EADDRNOTAVAIL, op,
        prefix.address.isV4() ? "ipv4: Address not found" : "ipv6: address not found");
  }
  const AddrState removed = *it;
  s.addrs.erase(it);
  if (removed.addr.prefix.address.isV4() && !removed.secondary) {
    // promote_secondaries is 0 by default: the secondaries of a deleted primary go as well.
    const net::IpPrefix net = prefix.network();
    std::erase_if(s.addrs, [&](const AddrState& a) {
      return a.secondary && a.addr.ifIndex == index &&
             a.addr.prefix.prefixLen == prefix.prefixLen && net.contains(a.addr.prefix.address);
    });
  }
  removePrefixRoute(s, index, removed.addr);
  const bool lastIpv4 = std::none_of(s.addrs.begin(), s.addrs.end(), [index](const AddrState& a) {
    return a.addr.ifIndex == index && a.addr.prefix.address.isV4();
  });
  if (removed.addr.prefix.address.isV4() && lastIpv4) {
    // fib_inetaddr_event: the last IPv4 address is gone, so fib_disable_ip flushes every IPv4
    // route through the device, static ones included.
    std::erase_if(s.routes, [index](const RouteState& r) {
      return r.route.ifIndex == index && r.route.dst.address.isV4();
    });
  }
  return {};
}

inline os::SysResult<std::vector<nl::Route>> FakeNetlink::listRoutes(const os::Netns& ns,
                                                                     int index) {
  const std::string op =
      "list routes" + (index == 0 ? std::string() : " of " + linkRef(index)) + inNs(ns);
  if (auto err = record(Op::kListRoutes, ns, std::to_string(index), op)) {
    return std::unexpected(*err);
  }
  NsState& s = state(ns);
  if (index != 0 && find(s, index) == nullptr) {
    return os::sysFail(ENODEV, op);
  }
  std::vector<nl::Route> out;
  for (const auto& r : routes(ns)) {
    if (index == 0 || r.ifIndex == index) {
      out.push_back(r);
    }
  }
  return out;
}

inline os::SysResult<void> FakeNetlink::addRoute(const os::Netns& ns, const nl::Route& route) {
  const std::string op = "add route " + nl::describe(route) + inNs(ns);
  if (auto err = record(Op::kAddRoute, ns, nl::describe(route), op)) {
    return std::unexpected(*err);
  }
  const net::IpAddress& dst = route.dst.address;
  if (!dst.valid()) {
    return os::sysFail(EINVAL, op + ": no destination");
  }
  if ((route.gw && route.gw->family != dst.family) || (route.scope && *route.scope > 255)) {
    return os::sysFail(EINVAL, op);
  }
  const bool v4 = dst.isV4();
  NsState& s = state(ns);
  nl::Route r = route;
  r.dst = route.dst.network();  // IPv6 masks the host bits silently
  r.table = route.table.value_or(0) == 0 ? kTableMain : *route.table;
  // fib_new_table / fib6_new_table run before the route itself is checked: the table exists
  // from here on even when the route is refused.
  s.tables.emplace(dst.family, *r.table);
  if (v4) {
    // fib_table_insert, then fib_create_info: a gateway must be reachable through a link
    // route (on the given device), a device-only route needs an existing device that is up.
    if (route.dst.network() != route.dst) {
      return os::sysFail(EINVAL, op, "Invalid prefix for given prefix length");
    }
    if (r.gw) {
      int dev = 0;
      if (!coversGateway(s, r, &dev)) {
        return os::sysFail(ENETUNREACH, op, "Nexthop has invalid gateway");
      }
      r.ifIndex = dev;
    } else if (r.ifIndex == 0 || find(s, r.ifIndex) == nullptr || find(s, r.ifIndex)->ipv4Gone) {
      return os::sysFail(ENODEV, op);
    }
    if (!find(s, r.ifIndex)->link.adminUp) {
      return os::sysFail(ENETDOWN, op, "Device for nexthop is not up");
    }
  } else {
    // fib6_nh_init: the device and its IPv6 state first, then the gateway, then IFF_UP.
    const LinkState* l = r.ifIndex != 0 ? find(s, r.ifIndex) : nullptr;
    if (r.ifIndex != 0 && (l == nullptr || l->ipv6Gone)) {
      return os::sysFail(ENODEV, op);
    }
    if (r.gw) {
      // ip6_validate_gw: a global gateway must be reachable (on the given device); a
      // link-local one needs the device; neither may go through "lo".
      if (!isLinkLocal(*r.gw)) {
        int dev = 0;
        if (!coversGateway(s, r, &dev)) {
          return os::sysFail(EHOSTUNREACH, op);
        }
        r.ifIndex = dev;
        l = find(s, dev);
      }
      if (l == nullptr) {
        return os::sysFail(EINVAL, op, "Egress device not specified");
      }
      if (isLoopback(*l)) {
        return os::sysFail(EINVAL, op, "Egress device can not be loopback device for this route");
      }
    }
    if (l == nullptr) {
      return os::sysFail(ENODEV, op);
    }
    if (!l->link.adminUp) {
      return os::sysFail(ENETDOWN, op, "Nexthop device is not up");
    }
  }
  if (v4) {
    r.scope = route.scope ? *route.scope : (r.gw ? kScopeUniverse : kScopeLink);
    r.priority = route.priority.value_or(0);
  } else {
    r.scope = kScopeUniverse;  // IPv6 has no route scopes
    r.priority = route.priority.value_or(0) == 0 ? kIpv6DefaultMetric : *route.priority;
  }
  // NLM_F_CREATE without NLM_F_EXCL (as the reference plugins add routes): a route whose key
  // (table, destination, priority) is taken is refused only when it is the same route. IPv4
  // (fib_table_insert): the same fib_info, i.e. not the kernel's prefix route and the same device,
  // gateway, scope and metrics; otherwise it becomes an alias in front of the others. IPv6
  // (fib6_add_rt2node, rt6_duplicate_nexthop): the same device and gateway; otherwise it goes after
  // them (a gateway route as an ECMP sibling, which is listed per nexthop all the same).
  auto insertAt = s.routes.end();
  for (auto it = s.routes.begin(); it != s.routes.end(); ++it) {
    const nl::Route& x = it->route;
    if (x.dst != r.dst || x.table != r.table || x.priority != r.priority) {
      continue;
    }
    const bool same = v4 ? !it->kernel && x.ifIndex == r.ifIndex && x.gw == r.gw && x.scope == r.scope &&
                               x.mtu == r.mtu && x.advmss == r.advmss
                         : x.ifIndex == r.ifIndex && x.gw == r.gw;
    if (same) {
      return os::sysFail(EEXIST, op);
    }
    if (v4 && insertAt == s.routes.end()) {
      insertAt = it;
    }
  }
  s.routes.insert(insertAt, RouteState{r, false});
  return {};
}

inline os::SysResult<std::vector<nl::Rule>> FakeNetlink::listRules(const os::Netns& ns) {
  if (auto err = record(Op::kListRules, ns, "", "list rules" + inNs(ns))) {
    return std::unexpected(*err);
  }
  return state(ns).rules;
}

// A rule is its family, source, table and priority; EEXIST and ENOENT as fib_nl_newrule (with
// NLM_F_EXCL) and fib_nl_delrule answer.
inline os::SysResult<void> FakeNetlink::addRule(const os::Netns& ns, const nl::Rule& rule) {
  const std::string op = "add rule " + nl::describe(rule) + inNs(ns);
  if (auto err = record(Op::kAddRule, ns, nl::describe(rule), op)) {
    return std::unexpected(*err);
  }
  if (!rule.src.address.valid() || rule.table == 0) {
    return os::sysFail(EINVAL, op);
  }
  NsState& s = state(ns);
  if (std::find(s.rules.begin(), s.rules.end(), rule) != s.rules.end()) {
    return os::sysFail(EEXIST, op);
  }
  auto at = std::find_if(s.rules.begin(), s.rules.end(),
                         [&](const nl::Rule& r) { return r.priority > rule.priority; });
  s.rules.insert(at, rule);
  return {};
}

inline os::SysResult<void> FakeNetlink::deleteRule(const os::Netns& ns, const nl::Rule& rule) {
  const std::string op = "delete rule " + nl::describe(rule) + inNs(ns);
  if (auto err = record(Op::kDeleteRule, ns, nl::describe(rule), op)) {
    return std::unexpected(*err);
  }
  NsState& s = state(ns);
  auto it = std::find(s.rules.begin(), s.rules.end(), rule);
  if (it == s.rules.end()) {
    return os::sysFail(ENOENT, op);
  }
  s.rules.erase(it);
  return {};
}

inline os::SysResult<void> FakeNetlink::deleteRoute(const os::Netns& ns, const nl::Route& route) {
  const std::string op = "delete route " + nl::describe(route) + inNs(ns);
  if (auto err = record(Op::kDeleteRoute, ns, nl::describe(route), op)) {
    return std::unexpected(*err);
  }
  const net::IpAddress& dst = route.dst.address;
  if (!dst.valid() || (route.gw && route.gw->family != dst.family)) {
    return os::sysFail(EINVAL, op);
  }
  const bool v4 = dst.isV4();
  NsState& s = state(ns);
  const std::uint32_t table = route.table.value_or(0) == 0 ? kTableMain : *route.table;
  if (s.tables.count({dst.family, table}) == 0) {
    return os::sysFail(ESRCH, op, "FIB table does not exist");
  }
  if (v4 && route.dst.network() != route.dst) {
    return os::sysFail(EINVAL, op, "Invalid prefix for given prefix length");
  }
  const net::IpPrefix want = route.dst.network();
  // Unset fields match anything (fib_table_delete / ip6_route_del); metrics count for IPv4 only.
  auto it = std::find_if(s.routes.begin(), s.routes.end(), [&](const RouteState& x) {
    const nl::Route& r = x.route;
    return r.dst == want && r.table == table &&
           (route.priority.value_or(0) == 0 || r.priority == route.priority) &&
           (!v4 || !route.scope || r.scope == route.scope) &&
           (route.ifIndex == 0 || r.ifIndex == route.ifIndex) && (!route.gw || r.gw == route.gw) &&
           (!v4 || !route.mtu || r.mtu == route.mtu) &&
           (!v4 || !route.advmss || r.advmss == route.advmss);
  });
  if (it == s.routes.end()) {
    return os::sysFail(ESRCH, op);
  }
  s.routes.erase(it);
  return {};
}

inline os::SysResult<nl::VfInfo*> FakeNetlink::settableVf(NsState& s, int pfIndex,
                                                          std::uint32_t vf,
                                                          const std::string& op) {
  LinkState* l = find(s, pfIndex);
  if (l == nullptr) {
    return os::sysFail(ENODEV, op);
  }
  // do_setvfinfo: the VF number is checked first, then whether the driver has the hook; the
  // range check is the driver's (EINVAL, as the interface says).
  if (vf >= static_cast<std::uint32_t>(INT_MAX)) {
    return os::sysFail(EINVAL, op);
  }
  if (!l->vfs) {
    return os::sysFail(EOPNOTSUPP, op);
  }
  if (vf >= l->vfs->size()) {
    return os::sysFail(EINVAL, op);
  }
  return &(*l->vfs)[vf];
}

inline os::SysResult<nl::VfInfo> FakeNetlink::vfInfo(const os::Netns& ns, int pfIndex,
                                                     std::uint32_t vf) {
  const std::string op = "get vf " + std::to_string(vf) + " of " + linkRef(pfIndex) + inNs(ns);
  if (auto err = record(Op::kVfInfo, ns,
                        std::to_string(pfIndex) + ", vf " + std::to_string(vf), op)) {
    return std::unexpected(*err);
  }
  const LinkState* l = find(state(ns), pfIndex);
  if (l == nullptr) {
    return os::sysFail(ENODEV, op);
  }
  if (!l->vfs || l->vfs->empty()) {
    return os::sysFail(ENOENT, op + ": the link reports no VFs");
  }
  if (vf >= l->vfs->size()) {
    return os::sysFail(ENOENT, op + ": the link reports " + std::to_string(l->vfs->size()) +
                                   " VFs");
  }
  return (*l->vfs)[vf];
}

inline os::SysResult<void> FakeNetlink::setVfGuids(const os::Netns& ns, int pfIndex,
                                                   std::uint32_t vf, const net::Guid& nodeGuid,
                                                   const net::Guid& portGuid) {
  const std::string op = "set node GUID " + nodeGuid.toString() + " and port GUID " +
                         portGuid.toString() + " of vf " + std::to_string(vf) + " on " +
                         linkRef(pfIndex) + inNs(ns);
  if (auto err = record(Op::kSetVfGuids, ns,
                        std::to_string(pfIndex) + ", vf " + std::to_string(vf) + ", node " +
                            nodeGuid.toString() + ", port " + portGuid.toString(),
                        op)) {
    return std::unexpected(*err);
  }
  auto target = settableVf(state(ns), pfIndex, vf, op);
  if (!target) {
    return std::unexpected(target.error());
  }
  (*target)->nodeGuid = nodeGuid;
  (*target)->portGuid = portGuid;
  return {};
}

inline os::SysResult<void> FakeNetlink::setVfLinkState(const os::Netns& ns, int pfIndex,
                                                       std::uint32_t vf, nl::VfLinkState state) {
  const std::string op = "set state " + std::string(vfLinkStateName(state)) + " of vf " +
                         std::to_string(vf) + " on " + linkRef(pfIndex) + inNs(ns);
  if (auto err = record(Op::kSetVfLinkState, ns,
                        std::to_string(pfIndex) + ", vf " + std::to_string(vf) + ", " +
                            vfLinkStateName(state),
                        op)) {
    return std::unexpected(*err);
  }
  auto target = settableVf(this->state(ns), pfIndex, vf, op);
  if (!target) {
    return std::unexpected(target.error());
  }
  (*target)->linkState = state;
  return {};
}

inline os::SysResult<void> FakeNetlink::addIpoibChild(const os::Netns& ns,
                                                      const nl::IpoibChildSpec& spec) {
  const char* mode = spec.mode == nl::IpoibMode::kConnected ? "connected" : "datagram";
  const std::string op = "add ipoib child \"" + spec.name + "\" of " +
                         linkRef(spec.parentIndex) + " pkey " + std::to_string(spec.pkey.wire()) +
                         " mode " + mode + " umcast " + (spec.umcast ? "1" : "0") + inNs(ns);
  if (auto err = record(Op::kAddIpoibChild, ns,
                        std::to_string(spec.parentIndex) + ", " + spec.name + ", pkey " + spec.pkey.hex() +
                            ", " + mode + ", umcast " + (spec.umcast ? "1" : "0"),
                        op)) {
    return std::unexpected(*err);
  }
  NsState& s = state(ns);
  if (!net::isValidIfName(spec.name)) {
    return os::sysFail(EINVAL, op + ": not a valid interface name");
  }
  if (find(s, spec.name) != nullptr) {
    return os::sysFail(EEXIST, op);  // rtnl_newlink: the name exists and NLM_F_EXCL is set
  }
  const LinkState* parent = find(s, spec.parentIndex);
  if (parent == nullptr || parent->link.arpType != kArphrdInfiniband) {
    return os::sysFail(ENODEV, op);
  }
  if (parent->link.kind == "ipoib" && parent->link.parentIndex != 0) {
    return os::sysFail(EINVAL, op);  // "child creation disallowed for child devices"
  }
  if (!spec.pkey.valid()) {
    return os::sysFail(EINVAL, op);
  }
  std::vector<std::uint8_t> addr(20, 0);
  if (auto parsed = net::HwAddress::parse(parent->link.mac.text);
      parsed && parsed->length == addr.size()) {
    for (std::size_t i = 0; i < addr.size(); ++i) {
      addr[i] = static_cast<std::uint8_t>(std::stoul(parsed->text.substr(i * 3, 2), nullptr, 16));
    }
    if (spec.mode == nl::IpoibMode::kConnected && (addr[0] & 0x80) == 0) {
      return os::sysFail(EINVAL, op);  // ipoib_set_mode: the port has no RC (connected) support
    }
  }
  // A fresh QP number (bytes 1-3), never the parent's.
  const unsigned parentQpn = (unsigned{addr[1]} << 16) | (unsigned{addr[2]} << 8) | addr[3];
  unsigned qpn = 0;
  do {
    qpn = (0x000100 + qpnCounter_++) & 0xffffff;
  } while (qpn == parentQpn);
  addr[1] = static_cast<std::uint8_t>(qpn >> 16);
  addr[2] = static_cast<std::uint8_t>(qpn >> 8);
  addr[3] = static_cast<std::uint8_t>(qpn);

  LinkState child;
  child.link.index = allocateIndex(s);
  child.link.name = spec.name;
  child.link.kind = "ipoib";
  child.link.arpType = kArphrdInfiniband;
  child.link.mtu = parent->link.mtu;
  child.link.mac = net::HwAddress::fromBytes(addr.data(), addr.size());
  child.link.parentIndex = spec.parentIndex;
  child.link.ipoib = nl::IpoibInfo{spec.pkey.fullMember(), spec.mode, spec.umcast};
  child.minMtu = parent->minMtu;
  child.maxMtu = parent->maxMtu;
  child.link.maxMtu = parent->maxMtu;
  s.links.push_back(std::move(child));
  return {};
}

inline os::SysResult<void> FakeNetlink::deleteLink(const os::Netns& ns, int index) {
  const std::string op = "delete " + linkRef(index) + inNs(ns);
  if (auto err = record(Op::kDeleteLink, ns, std::to_string(index), op)) {
    return std::unexpected(*err);
  }
  NsState& s = state(ns);
  const LinkState* l = find(s, index);
  if (l == nullptr) {
    return os::sysFail(ENODEV, op);
  }
  if (l->link.kind.empty()) {
    return os::sysFail(EOPNOTSUPP, op);  // rtnl_delete_link: no rtnl_link_ops->dellink
  }
  if (l->link.kind == "ipoib" && l->link.parentIndex == 0) {
    return {};  // ipoib_del_child_link ignores a port (no parent); the kernel answers 0
  }
  removeLink(ns, index);
  return {};
}

}  // namespace ibcni::testing
