// SPDX-License-Identifier: Apache-2.0
#include "plugin/netlink/ipoib_messages.h"

#include <array>
#include <cstddef>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>

#include "ibcni/net/ip.h"

namespace ibcni::nl {

namespace {

// Room for the largest request: headers (32) + IFLA_LINK (8) + IFLA_IFNAME (20) + IFLA_LINKINFO
// (4 + 12 + 28) = 100 bytes; a little more so that the _check variants never refuse.
constexpr std::size_t kBufferSize = 256;

}  // namespace

std::vector<std::uint8_t> buildAddIpoibChild(const IpoibChildSpec& spec) {
  if (!net::isValidIfName(spec.name)) {
    return {};
  }
  alignas(nlmsghdr) std::array<char, kBufferSize> buf{};  // zeroed: all padding stays 0
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_NEWLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
  auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifi->ifi_family = AF_UNSPEC;

  // The order of iproute2's iplink_modify(): IFLA_LINK, IFLA_IFNAME, then the kind's nest, whose
  // IFLA_INFO_DATA ipoib_parse_opt() fills in the order pkey, mode, umcast.
  bool ok = mnl_attr_put_u32_check(nlh, buf.size(), IFLA_LINK,
                                   static_cast<std::uint32_t>(spec.parentIndex)) &&
            mnl_attr_put_strz_check(nlh, buf.size(), IFLA_IFNAME, spec.name.c_str());
  nlattr* linkinfo = ok ? mnl_attr_nest_start_check(nlh, buf.size(), IFLA_LINKINFO) : nullptr;
  // The kind goes without a terminating NUL, as iproute2 sends it (addattr_l with strlen); the
  // kernel's policy for it is NLA_STRING, which takes both.
  static constexpr char kKind[] = {'i', 'p', 'o', 'i', 'b'};
  ok = linkinfo != nullptr &&
       mnl_attr_put_check(nlh, buf.size(), IFLA_INFO_KIND, sizeof kKind, kKind);
  nlattr* data = ok ? mnl_attr_nest_start_check(nlh, buf.size(), IFLA_INFO_DATA) : nullptr;
  ok = data != nullptr &&
       mnl_attr_put_u16_check(nlh, buf.size(), IFLA_IPOIB_PKEY, spec.pkey.wire()) &&
       mnl_attr_put_u16_check(nlh, buf.size(), IFLA_IPOIB_MODE,
                              static_cast<std::uint16_t>(spec.mode)) &&
       mnl_attr_put_u16_check(nlh, buf.size(), IFLA_IPOIB_UMCAST, spec.umcast ? 1 : 0);
  if (!ok) {
    return {};
  }
  mnl_attr_nest_end(nlh, data);
  mnl_attr_nest_end(nlh, linkinfo);
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(nlh);
  return {bytes, bytes + nlh->nlmsg_len};
}

}  // namespace ibcni::nl
