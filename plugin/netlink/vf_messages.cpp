// SPDX-License-Identifier: Apache-2.0
#include "plugin/netlink/vf_messages.h"
#include "plugin/netlink/libnl_handles.h"

#include <cstddef>
#include <cstring>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <memory>

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/route/link/sriov.h>

namespace ibcni::nl {

namespace {

// libnl fills struct ifla_vf_guid on its stack without clearing the 4 bytes of padding between
// `vf` and `guid`, so they would carry whatever was there. The kernel never reads them; clear
// them so the request is deterministic and leaks nothing.
void clearGuidPadding(nl_msg* msg) {
  nlattr* list = nlmsg_find_attr(nlmsg_hdr(msg), sizeof(ifinfomsg), IFLA_VFINFO_LIST);
  if (list == nullptr) {
    return;
  }
  constexpr std::size_t kPadAt = sizeof(ifla_vf_guid::vf);
  constexpr std::size_t kPadLen = offsetof(ifla_vf_guid, guid) - kPadAt;
  nlattr* info = nullptr;
  int infoRem = 0;
  nla_for_each_nested(info, list, infoRem) {
    nlattr* a = nullptr;
    int rem = 0;
    nla_for_each_nested(a, info, rem) {
      const int type = nla_type(a);
      if ((type == IFLA_VF_IB_NODE_GUID || type == IFLA_VF_IB_PORT_GUID) &&
          nla_len(a) >= static_cast<int>(sizeof(ifla_vf_guid))) {
        std::memset(static_cast<unsigned char*>(nla_data(a)) + kPadAt, 0, kPadLen);
      }
    }
  }
}

// RTM_NEWLINK on link `pfIndex` with the VF entries of `changes`, as the bytes that go out
// (apart from nlmsg_seq and nlmsg_pid, which the sending socket fills in).
std::vector<std::uint8_t> changeRequest(int pfIndex, rtnl_link* changes) {
  RtnlLinkPtr orig(rtnl_link_alloc());
  if (!orig) {
    return {};
  }
  rtnl_link_set_ifindex(orig.get(), pfIndex);
  nl_msg* raw = nullptr;
  const int rc = rtnl_link_build_change_request(orig.get(), changes, 0, &raw);
  NlMsgPtr msg(raw);
  if (rc < 0 || !msg) {
    return {};
  }
  clearGuidPadding(msg.get());
  nlmsghdr* hdr = nlmsg_hdr(msg.get());
  // What nl_complete_msg() adds on a socket with auto-ACK, which LibnlNetlink's sockets are.
  hdr->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(hdr);
  return {bytes, bytes + hdr->nlmsg_len};
}

// A VF entry for VF `vf`; nullptr when out of memory.
RtnlLinkVfPtr vfEntry(std::uint32_t vf) {
  RtnlLinkVfPtr entry(rtnl_link_vf_alloc());
  if (entry) {
    rtnl_link_vf_set_index(entry.get(), vf);
  }
  return entry;
}

}  // namespace

std::vector<std::uint8_t> buildSetVfGuids(int pfIndex, std::uint32_t vf, const net::Guid& node,
                                          const net::Guid& port) {
  RtnlLinkPtr changes(rtnl_link_alloc());
  RtnlLinkVfPtr nodeEntry = vfEntry(vf);
  RtnlLinkVfPtr portEntry = vfEntry(vf);
  if (!changes || !nodeEntry || !portEntry) {
    return {};
  }
  rtnl_link_vf_set_ib_node_guid(nodeEntry.get(), node.value);
  rtnl_link_vf_set_ib_port_guid(portEntry.get(), port.value);
  // rtnl_link_vf_add puts each entry at the head of the list (and takes its own reference), so
  // the entry added last is written first: port, then node, gives node first on the wire.
  if (rtnl_link_vf_add(changes.get(), portEntry.get()) < 0 ||
      rtnl_link_vf_add(changes.get(), nodeEntry.get()) < 0) {
    return {};
  }
  return changeRequest(pfIndex, changes.get());
}

std::vector<std::uint8_t> buildSetVfLinkState(int pfIndex, std::uint32_t vf, VfLinkState state) {
  RtnlLinkPtr changes(rtnl_link_alloc());
  RtnlLinkVfPtr entry = vfEntry(vf);
  if (!changes || !entry) {
    return {};
  }
  rtnl_link_vf_set_linkstate(entry.get(), static_cast<std::uint32_t>(state));
  if (rtnl_link_vf_add(changes.get(), entry.get()) < 0) {
    return {};
  }
  return changeRequest(pfIndex, changes.get());
}

}  // namespace ibcni::nl
