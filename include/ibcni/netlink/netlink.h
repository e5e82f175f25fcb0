// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/net/ip.h"
#include "ibcni/net/pkey.h"
#include "ibcni/os/netns.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::nl {

/// IPOIB_MODE_*: how an IPoIB link carries IP.
enum class IpoibMode : std::uint16_t {
  kDatagram = 0,   ///< UD QPs; MTU at most the IB port MTU minus 4
  kConnected = 1,  ///< RC QPs; MTU up to 65520
};

/// The IPoIB settings of a link (IFLA_INFO_DATA of kind "ipoib").
struct IpoibInfo {
  net::Pkey pkey;          ///< IFLA_IPOIB_PKEY, as the kernel reports it (full-membership bit set)
  IpoibMode mode = IpoibMode::kDatagram;
  bool umcast = false;     ///< IFLA_IPOIB_UMCAST
  bool operator==(const IpoibInfo&) const = default;
};

/// What addIpoibChild creates.
struct IpoibChildSpec {
  int parentIndex = 0;     ///< IFLA_LINK: the IPoIB parent in the same namespace
  std::string name;        ///< IFLA_IFNAME
  net::Pkey pkey;          ///< IFLA_IPOIB_PKEY, sent as given (its wire())
  IpoibMode mode = IpoibMode::kDatagram;
  bool umcast = false;
};

/// ARPHRD_INFINIBAND: the link type (Link::arpType) of IPoIB netdevs.
inline constexpr std::uint16_t kArphrdInfiniband = 32;

/// A network link as rtnetlink reports it.
struct Link {
  int index = 0;
  std::string name;
  std::string alias;           ///< IFLA_IFALIAS, empty when unset
  std::uint32_t mtu = 0;
  bool adminUp = false;        ///< IFF_UP
  net::HwAddress mac;          ///< IFLA_ADDRESS (20 bytes for IPoIB)
  std::uint16_t arpType = 0;   ///< ARPHRD_* (ARPHRD_INFINIBAND = 32)
  std::string kind;            ///< IFLA_INFO_KIND ("veth", "ipoib"), empty for physical devices
  std::uint32_t maxMtu = 0;    ///< IFLA_MAX_MTU; 0 when the kernel does not say
  int parentIndex = 0;         ///< IFLA_LINK when it differs from the link's own index (a child's parent)
  std::optional<IpoibInfo> ipoib;  ///< set for links of kind "ipoib"
};

/// IFLA_VF_LINK_STATE_*: how a PF presents the link of one of its VFs.
enum class VfLinkState : std::uint32_t {
  kAuto = 0,     ///< follows the PF's (the port's) link
  kEnable = 1,   ///< always up
  kDisable = 2,  ///< always down
};

/// What a PF reports about one of its VFs (RTM_GETLINK with RTEXT_FILTER_VF).
struct VfInfo {
  std::uint32_t vf = 0;
  std::optional<VfLinkState> linkState;  ///< IFLA_VF_LINK_STATE, when reported
  std::optional<net::Guid> nodeGuid;     ///< IFLA_VF_IB_NODE_GUID, when the driver reports it
  std::optional<net::Guid> portGuid;     ///< IFLA_VF_IB_PORT_GUID, when the driver reports it
  bool operator==(const VfInfo&) const = default;
};

/// An address assigned to a link.
struct Address {
  int ifIndex = 0;
  net::IpPrefix prefix;
  bool operator==(const Address&) const = default;
};

/// A unicast route. `table` 0 means the main table.
struct Route {
  net::IpPrefix dst;
  std::optional<net::IpAddress> gw;
  int ifIndex = 0;
  std::optional<std::uint32_t> mtu;
  std::optional<std::uint32_t> advmss;
  std::optional<std::uint32_t> priority;
  std::optional<std::uint32_t> table;
  std::optional<std::uint32_t> scope;
};

/// "dst via gw dev N table T metric P scope S mtu M advmss A", for messages.
[[nodiscard]] std::string describe(const Route& route);

/// A policy routing rule, as `ip rule add from SRC lookup TABLE pref PRIORITY` makes it: packets
/// whose source is in `src` look up `table`. Its family is `src`'s.
struct Rule {
  net::IpPrefix src;
  std::uint32_t table = 0;
  std::uint32_t priority = 0;
  bool operator==(const Rule&) const = default;
};

/// "from SRC lookup TABLE pref PRIORITY", for messages.
[[nodiscard]] std::string describe(const Rule& rule);

/// rtnetlink operations on links, addresses and routes in a given network namespace. Every call
/// names the namespace it acts in; the implementation talks to it through a netlink socket created
/// inside that namespace, so the calling thread never leaves its own.
/// Errors carry the errno and, where the kernel sent one, its extended-ACK text.
class Netlink {
 public:
  virtual ~Netlink() = default;

  /// @return the link, or ENODEV when `ns` has no link of that name.
  [[nodiscard]] virtual os::SysResult<Link> linkByName(const os::Netns& ns, const std::string& name) = 0;
  /// @return the link, or ENODEV when `ns` has no link with that index.
  [[nodiscard]] virtual os::SysResult<Link> linkByIndex(const os::Netns& ns, int index) = 0;
  /// Sets or clears IFF_UP.
  [[nodiscard]] virtual os::SysResult<void> setLinkUp(const os::Netns& ns, int index, bool up) = 0;
  /// Renames a link. EEXIST when the name is taken. Kernels before 6.2 refuse to rename an up link
  /// (EBUSY), so portable callers set it down first.
  [[nodiscard]] virtual os::SysResult<void> renameLink(const os::Netns& ns, int index,
                                                       const std::string& newName) = 0;
  [[nodiscard]] virtual os::SysResult<void> setMtu(const os::Netns& ns, int index, std::uint32_t mtu) = 0;
  /// Sets IFLA_IFALIAS; an empty string clears it.
  [[nodiscard]] virtual os::SysResult<void> setAlias(const os::Netns& ns, int index,
                                                     const std::string& alias) = 0;
  [[nodiscard]] virtual os::SysResult<void> setHwAddress(const os::Netns& ns, int index,
                                                         const net::HwAddress& mac) = 0;
  /// Moves link `index` of `from` into `to` (IFLA_NET_NS_FD). The link keeps its name, alias, MTU
  /// and MAC, and arrives down without its addresses and routes; its index may change if taken in
  /// `to`, so look it up again by name. EEXIST when `to` has that name.
  [[nodiscard]] virtual os::SysResult<void> moveLink(const os::Netns& from, int index,
                                                     const os::Netns& to) = 0;

  /// Addresses of one link (both families).
  [[nodiscard]] virtual os::SysResult<std::vector<Address>> listAddresses(const os::Netns& ns,
                                                                          int index) = 0;
  /// Adds an address; IPv6 addresses are added with IFA_F_NODAD so they are usable at once.
  [[nodiscard]] virtual os::SysResult<void> addAddress(const os::Netns& ns, int index,
                                                       const net::IpPrefix& prefix) = 0;
  [[nodiscard]] virtual os::SysResult<void> deleteAddress(const os::Netns& ns, int index,
                                                          const net::IpPrefix& prefix) = 0;

  /// Unicast routes of every table in `ns` whose output link is `index` (0: all links).
  [[nodiscard]] virtual os::SysResult<std::vector<Route>> listRoutes(const os::Netns& ns, int index) = 0;
  /// Adds a route as the reference plugins do (NLM_F_CREATE, not NLM_F_EXCL): beside any route to
  /// the same destination through another nexthop (IPv4: an alias in front of it; IPv6: after it,
  /// gateway routes as ECMP siblings). EEXIST when the same route is already there.
  [[nodiscard]] virtual os::SysResult<void> addRoute(const os::Netns& ns, const Route& route) = 0;
  [[nodiscard]] virtual os::SysResult<void> deleteRoute(const os::Netns& ns, const Route& route) = 0;

  // ---- policy routing rules ----

  /// The IPv4 and IPv6 rules of `ns` that look up a table for a source prefix (a rule with another
  /// selector or action, such as the kernel's own `from all lookup main`, is left out).
  [[nodiscard]] virtual os::SysResult<std::vector<Rule>> listRules(const os::Netns& ns) = 0;
  /// Adds a rule (RTM_NEWRULE with NLM_F_CREATE|NLM_F_EXCL, FR_ACT_TO_TBL, FRA_SRC, FRA_TABLE,
  /// FRA_PRIORITY), as `ip rule add from SRC lookup TABLE pref PRIORITY` does.
  /// @return EEXIST when the same rule is there.
  [[nodiscard]] virtual os::SysResult<void> addRule(const os::Netns& ns, const Rule& rule) = 0;
  /// Deletes the rule with this source, table and priority. ENOENT when there is none.
  [[nodiscard]] virtual os::SysResult<void> deleteRule(const os::Netns& ns, const Rule& rule) = 0;

  // ---- IPoIB child links ----

  /// Creates an IPoIB child link (RTM_NEWLINK, NLM_F_CREATE|NLM_F_EXCL, IFLA_LINK = parent,
  /// IFLA_LINKINFO {kind "ipoib", IFLA_INFO_DATA {PKEY, MODE, UMCAST}}), as `ip link add link PARENT
  /// name NAME type ipoib pkey P mode M umcast U` does. Built with libmnl (libnl has no ipoib kind).
  /// Several children of one parent may share a pkey (the kernel refuses duplicates only for
  /// children made through sysfs' create_child).
  /// @return EEXIST when the name is taken; ENODEV when the parent is missing or not IPoIB; the
  ///         kernel's errno and extended ACK otherwise.
  [[nodiscard]] virtual os::SysResult<void> addIpoibChild(const os::Netns& ns, const IpoibChildSpec& spec) = 0;
  /// Deletes link `index` (RTM_DELLINK). ENODEV when there is none.
  [[nodiscard]] virtual os::SysResult<void> deleteLink(const os::Netns& ns, int index) = 0;

  // ---- SR-IOV: VF settings kept by the PF (IFLA_VFINFO_LIST), addressed by PF link and VF number ----

  /// VF `vf` of PF link `pfIndex`, as the PF reports it.
  /// @return ENOENT when the PF reports no such VF (or no VFs at all).
  [[nodiscard]] virtual os::SysResult<VfInfo> vfInfo(const os::Netns& ns, int pfIndex, std::uint32_t vf) = 0;
  /// Sets the InfiniBand node and port GUID of VF `vf`: one RTM_NEWLINK whose IFLA_VFINFO_LIST holds
  /// two IFLA_VF_INFO entries, IFLA_VF_IB_NODE_GUID then IFLA_VF_IB_PORT_GUID. (The kernel's
  /// do_setvfinfo() applies only the first GUID of one entry, so `ip link set PF vf N node_guid G
  /// port_guid G` would set the node GUID alone.) mlx5 applies them when the VF is next bound to
  /// its driver.
  /// @return EOPNOTSUPP when the PF cannot set VF GUIDs; EINVAL for a VF number out of range.
  [[nodiscard]] virtual os::SysResult<void> setVfGuids(const os::Netns& ns, int pfIndex, std::uint32_t vf,
                                                       const net::Guid& nodeGuid, const net::Guid& portGuid) = 0;
  /// Sets the link state of VF `vf` (IFLA_VF_LINK_STATE, as `ip link set PF vf N state auto|enable|disable`).
  [[nodiscard]] virtual os::SysResult<void> setVfLinkState(const os::Netns& ns, int pfIndex, std::uint32_t vf,
                                                           VfLinkState state) = 0;
};

}  // namespace ibcni::nl
