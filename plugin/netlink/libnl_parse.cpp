// SPDX-License-Identifier: Apache-2.0
#include "plugin/netlink/libnl_parse.h"

#include <cstring>
#include <linux/if.h>
#include <linux/rtnetlink.h>
#include <string>
#include <sys/socket.h>

#include <netlink/msg.h>

namespace ibcni::nl {

std::optional<net::IpAddress> ipFromNlAddr(const nl_addr* a) {
  if (a == nullptr) {
    return std::nullopt;
  }
  int family = nl_addr_get_family(a);
  if (family != AF_INET && family != AF_INET6) {
    return std::nullopt;
  }
  net::IpAddress ip;
  ip.family = family;
  const unsigned len = nl_addr_get_len(a);
  if (len == 0) {
    return ip;  // libnl's stand-in for a missing RTA_DST: the default route
  }
  if (len != ip.size()) {
    return std::nullopt;
  }
  std::memcpy(ip.bytes.data(), nl_addr_get_binary_addr(a), len);
  return ip;
}

NlAddrPtr nlAddrFromIp(const net::IpAddress& ip, int prefixLen) {
  NlAddrPtr a(nl_addr_build(ip.family, ip.bytes.data(), ip.size()));
  if (a) {
    nl_addr_set_prefixlen(a.get(), prefixLen);
  }
  return a;
}

std::optional<std::vector<std::uint8_t>> macBytes(const net::HwAddress& mac) {
  auto parsed = net::HwAddress::parse(mac.text);  // canonical "xx:xx:...": 3 chars per octet
  if (!parsed || parsed->length == 0) {
    return std::nullopt;
  }
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < parsed->text.size(); i += 3) {
    out.push_back(
        static_cast<std::uint8_t>(nibble(parsed->text[i]) * 16 + nibble(parsed->text[i + 1])));
  }
  return out;
}

Link linkFrom(rtnl_link* l) {
  Link link;
  link.index = rtnl_link_get_ifindex(l);
  if (const char* name = rtnl_link_get_name(l); name != nullptr) {
    link.name = name;
  }
  if (const char* alias = rtnl_link_get_ifalias(l); alias != nullptr) {
    link.alias = alias;
  }
  link.mtu = rtnl_link_get_mtu(l);
  link.adminUp = (rtnl_link_get_flags(l) & IFF_UP) != 0;
  if (const nl_addr* a = rtnl_link_get_addr(l); a != nullptr && nl_addr_get_len(a) > 0) {
    link.mac = net::HwAddress::fromBytes(
        static_cast<const std::uint8_t*>(nl_addr_get_binary_addr(a)), nl_addr_get_len(a));
  }
  link.arpType = static_cast<std::uint16_t>(rtnl_link_get_arptype(l));
  if (const char* kind = rtnl_link_get_type(l); kind != nullptr) {
    link.kind = kind;
  }
  return link;
}

bool linkAttributes(nl_msg* msg, std::array<nlattr*, IFLA_MAX + 1>& tb) {
  nlmsghdr* hdr = nlmsg_hdr(msg);
  if (hdr->nlmsg_type != RTM_NEWLINK) {
    return false;
  }
  return nlmsg_parse(hdr, sizeof(ifinfomsg), tb.data(), IFLA_MAX, nullptr) == 0;
}

std::optional<IpoibInfo> ipoibFrom(nlattr* linkinfo) {
  if (linkinfo == nullptr) {
    return std::nullopt;
  }
  std::array<nlattr*, IFLA_INFO_MAX + 1> info{};
  if (nla_parse_nested(info.data(), IFLA_INFO_MAX, linkinfo, nullptr) < 0 ||
      info[IFLA_INFO_KIND] == nullptr) {
    return std::nullopt;
  }
  const auto* kind = static_cast<const char*>(nla_data(info[IFLA_INFO_KIND]));
  const int kindLen = nla_len(info[IFLA_INFO_KIND]);
  if (std::string(kind, ::strnlen(kind, static_cast<std::size_t>(kindLen))) != "ipoib") {
    return std::nullopt;
  }
  IpoibInfo out;
  std::array<nlattr*, IFLA_IPOIB_MAX + 1> data{};
  if (info[IFLA_INFO_DATA] == nullptr ||
      nla_parse_nested(data.data(), IFLA_IPOIB_MAX, info[IFLA_INFO_DATA], nullptr) < 0) {
    return out;
  }
  auto u16 = [&data](int type) -> std::optional<std::uint16_t> {
    if (data[static_cast<std::size_t>(type)] == nullptr ||
        nla_len(data[static_cast<std::size_t>(type)]) < 2) {
      return std::nullopt;
    }
    return nla_get_u16(data[static_cast<std::size_t>(type)]);
  };
  out.pkey = net::Pkey::fromWire(u16(IFLA_IPOIB_PKEY).value_or(0));
  out.mode = u16(IFLA_IPOIB_MODE).value_or(IPOIB_MODE_DATAGRAM) == IPOIB_MODE_CONNECTED
                 ? IpoibMode::kConnected
                 : IpoibMode::kDatagram;
  out.umcast = u16(IFLA_IPOIB_UMCAST).value_or(0) != 0;
  return out;
}

namespace {

// Copies the fixed-size payload of `a` into `out` when it is at least that long.
template <class T>
bool attrStruct(const nlattr* a, T* out) {
  if (a == nullptr || nla_len(a) < static_cast<int>(sizeof(T))) {
    return false;
  }
  std::memcpy(out, nla_data(a), sizeof(T));
  return true;
}

// One IFLA_VF_INFO. The VF number comes from any of its per-VF structs (the kernel puts it in
// each; IFLA_VF_MAC is always there), else from the entry's position in the list.
VfInfo vfFrom(nlattr* info, std::uint32_t position) {
  std::array<nlattr*, IFLA_VF_MAX + 1> t{};
  VfInfo vf;
  vf.vf = position;
  if (nla_parse_nested(t.data(), IFLA_VF_MAX, info, nullptr) < 0) {
    return vf;
  }
  ifla_vf_mac mac{};
  ifla_vf_link_state state{};
  ifla_vf_guid node{};
  ifla_vf_guid port{};
  const bool hasMac = attrStruct(t[IFLA_VF_MAC], &mac);
  const bool hasState = attrStruct(t[IFLA_VF_LINK_STATE], &state);
  const bool hasNode = attrStruct(t[IFLA_VF_IB_NODE_GUID], &node);
  const bool hasPort = attrStruct(t[IFLA_VF_IB_PORT_GUID], &port);
  if (hasMac) {
    vf.vf = mac.vf;
  } else if (hasState) {
    vf.vf = state.vf;
  } else if (hasNode) {
    vf.vf = node.vf;
  }
  if (hasState && state.link_state <= static_cast<std::uint32_t>(VfLinkState::kDisable)) {
    vf.linkState = static_cast<VfLinkState>(state.link_state);
  }
  if (hasNode) {
    vf.nodeGuid = net::Guid{node.guid};
  }
  if (hasPort) {
    vf.portGuid = net::Guid{port.guid};
  }
  return vf;
}

}  // namespace

std::vector<VfInfo> vfsFrom(nlattr* list) {
  std::vector<VfInfo> out;
  if (list == nullptr) {
    return out;
  }
  nlattr* info = nullptr;
  int rem = 0;
  nla_for_each_nested(info, list, rem) {
    if (nla_type(info) == IFLA_VF_INFO) {
      out.push_back(vfFrom(info, static_cast<std::uint32_t>(out.size())));
    }
  }
  return out;
}

std::optional<Route> routeBase(rtnl_route* r) {
  if (rtnl_route_get_type(r) != RTN_UNICAST) {
    return std::nullopt;
  }
  const int family = rtnl_route_get_family(r);
  if (family != AF_INET && family != AF_INET6) {
    return std::nullopt;
  }
  const nl_addr* dst = rtnl_route_get_dst(r);
  Route route;
  if (dst == nullptr) {
    route.dst.address.family = family;
  } else {
    auto ip = ipFromNlAddr(dst);
    if (!ip) {
      return std::nullopt;
    }
    route.dst.address = *ip;
    route.dst.prefixLen = static_cast<int>(nl_addr_get_prefixlen(dst));
  }
  route.table = rtnl_route_get_table(r);
  route.scope = rtnl_route_get_scope(r);
  if (std::uint32_t prio = rtnl_route_get_priority(r); prio != 0) {
    route.priority = prio;
  }
  std::uint32_t value = 0;
  if (rtnl_route_get_metric(r, RTAX_MTU, &value) == 0) {
    route.mtu = value;
  }
  if (rtnl_route_get_metric(r, RTAX_ADVMSS, &value) == 0) {
    route.advmss = value;
  }
  return route;
}

}  // namespace ibcni::nl
