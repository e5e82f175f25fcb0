// SPDX-License-Identifier: Apache-2.0
// CHECK: the attachment is still what ADD made — checked against prevResult (which may include
// later plugins' changes), ibcni's record and the IPAM plugin.
#include <algorithm>

#include "plugin/commands/commands.h"
#include "plugin/commands/common.h"
#include "plugin/commands/device_info.h"
#include "plugin/commands/policy_routing.h"
#include "plugin/modes/verbs_check.h"
#include "lib/log/log.h"

namespace ibcni::plugin {

namespace {

// Our interface in prevResult: by name and sandbox, not by position (later plugins may add some).
cni::Result<int> ourInterface(const Invocation& inv, const cni::AddResult& prev) {
  int ourIndex = -1;
  for (std::size_t i = 0; i < prev.interfaces.size(); ++i) {
    if (prev.interfaces[i].name == inv.args.ifName && prev.interfaces[i].sandbox == inv.args.netns) {
      ourIndex = static_cast<int>(i);
    }
  }
  if (ourIndex < 0) {
    return cni::fail(cni::Errc::kCheckFailed,
                     "prevResult has no interface " + inv.args.ifName + " with sandbox " + inv.args.netns);
  }
  return ourIndex;
}

// prevResult's addresses on our interface.
std::vector<net::IpAddress> ourAddresses(const cni::AddResult& prev, int ourIndex) {
  std::vector<net::IpAddress> ips;
  for (const auto& ip : prev.ips) {
    if (ip.interface == ourIndex) {
      ips.push_back(ip.address.address);
    }
  }
  return ips;
}

// prevResult's addresses on our interface, the record's routes and its policyRouting rules and
// sysctls are all in the pod.
cni::Result<void> checkAddressesAndRoutes(const Invocation& inv, Deps& deps, const os::Netns& pod, const nl::Link& link,
                                          const cni::AddResult& prev, int ourIndex,
                                          const state::AttachmentRecord& record) {
  const auto& ifName = inv.args.ifName;
  auto addrs = deps.netlink.listAddresses(pod, link.index);
  if (!addrs) {
    return std::unexpected(sysError(cni::Errc::kNetlinkFailure, "cannot list the addresses of " + ifName, addrs.error()));
  }
  for (const auto& ip : prev.ips) {
    if (ip.interface != ourIndex) {
      continue;
    }
    bool present = std::any_of(addrs->begin(), addrs->end(),
                               [&](const nl::Address& a) { return a.prefix == ip.address; });
    if (!present) {
      return cni::fail(cni::Errc::kCheckFailed,
                       "address " + ip.address.toString() + " is missing from " + ifName);
    }
  }
  auto routes = deps.netlink.listRoutes(pod, 0);
  if (!routes) {
    return std::unexpected(sysError(cni::Errc::kNetlinkFailure, "cannot list the routes of netns " + inv.args.netns,
                                    routes.error()));
  }
  for (const auto& rt : record.result.routes) {
    bool present = std::any_of(routes->begin(), routes->end(), [&](const nl::Route& r) {
      return r.dst.network() == rt.dst.network() && (!rt.gw || (r.gw && *r.gw == *rt.gw)) &&
             (!rt.table || r.table == rt.table);
    });
    if (!present) {
      return cni::fail(cni::Errc::kCheckFailed, "route " + rt.dst.toString() +
                                                    (rt.gw ? " via " + rt.gw->toString() : "") +
                                                    (rt.table ? " table " + std::to_string(*rt.table) : "") +
                                                    " is missing from netns " + inv.args.netns);
    }
  }
  return checkPolicyRouting(inv, deps, pod, record, ourAddresses(prev, ourIndex));
}

// The verbs check; an interface without an RDMA device is judged too: require means RDMA.
cni::Result<void> checkVerbs(const Invocation& inv, Deps& deps, const os::Netns& host, const nl::Link& link,
                             const cni::AddResult& prev, int ourIndex, const state::AttachmentRecord& rec) {
  const auto& conf = inv.conf;
  if (conf.verbsCheck.mode == config::VerbsCheck::Mode::kOff) {
    return {};
  }
  // The device as the host knows it: its name there and its link type (ipoib: the parent).
  nl::Link hostSide = link;
  hostSide.name = rec.hostName;
  hostSide.index = 0;
  if (conf.mode == config::Mode::kIpoib) {
    if (auto parent = deps.netlink.linkByName(host, rec.hostName); parent) {
      hostSide = *parent;
    }
  }
  const RdmaFacts facts = rdmaFacts(deps, host, inv, rec.pciAddress, hostSide, rec.rdmaDevice, rec.rdmaMoved);
  return runVerbsCheck(inv, deps, inv.args.netns, facts, verbsExpectations(conf, rec, ourAddresses(prev, ourIndex)));
}

// CHECK: the record, our interface in prevResult and in the pod, what the mode set up, the
// addresses and routes, the IPAM's own CHECK, the verbs check.
cni::Result<void> checkAttachment(const Invocation& inv, Deps& deps) {
  const auto& conf = inv.conf;
  const auto& ifName = inv.args.ifName;
  if (!conf.prevResult) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     "prevResult is missing: CHECK needs the ADD result, which the runtime passes from its cache");
  }
  auto namespaces = openNamespaces(inv, deps);
  if (!namespaces) {
    return std::unexpected(namespaces.error());
  }
  const os::Netns& host = namespaces->host;
  const os::Netns& pod = namespaces->pod;
  if (auto r = prepareStateDir(conf); !r) {
    return r;
  }
  auto store = deps.makeStore(conf.stateDir);
  auto record = store->load(conf.name, inv.args.containerId, ifName);
  if (!record) {
    return std::unexpected(sysError(cni::Errc::kStateFailure, "cannot read the attachment record", record.error()));
  }
  if (!*record) {
    return cni::fail(cni::Errc::kCheckFailed, "ibcni has no record of attaching " + ifName + " to container " +
                                                  inv.args.containerId + " on network " + conf.name);
  }
  const auto& prev = *conf.prevResult;
  auto ourIndex = ourInterface(inv, prev);
  if (!ourIndex) {
    return std::unexpected(ourIndex.error());
  }
  ModeContext ctx{inv, deps, host};
  AttachmentMode* recorded = modeByName((*record)->mode);
  AttachmentMode& mode = recorded != nullptr ? *recorded : modeFor(conf.mode);
  if (!mode.givesPodNetdev()) {
    // A VF given to a VM: nothing of it is in the pod, and it has no address or RDMA device here.
    return mode.check(ctx, **record, pod, nl::Link{});
  }
  auto link = deps.netlink.linkByName(pod, ifName);
  if (!link) {
    return std::unexpected(sysError(cni::Errc::kCheckFailed, "interface " + ifName + " is missing from netns " +
                                                                 inv.args.netns,
                                    link.error()));
  }
  const auto& ours = prev.interfaces[static_cast<std::size_t>(*ourIndex)];
  if (!ours.mac.empty() && ours.mac != link->mac.text) {
    return cni::fail(cni::Errc::kCheckFailed,
                     ifName + " has mac " + link->mac.text + ", prevResult says " + ours.mac);
  }
  // prevResult is the chain's final word on our interface: a later plugin (tuning's "mtu" or
  // "mac") may have changed what ADD set, and reported it there. The record only knows ADD's values.
  state::AttachmentRecord expected = **record;
  if (ours.mtu) {
    expected.podMtu = *ours.mtu;
  }
  if (!ours.mac.empty()) {
    expected.podMac = ours.mac;
  }
  if (auto r = mode.check(ctx, expected, pod, *link); !r) {
    return r;
  }
  if (auto r = checkAddressesAndRoutes(inv, deps, pod, *link, prev, *ourIndex, **record); !r) {
    return r;
  }
  if (!conf.ipamType.empty()) {
    if (auto r = deps.ipam.check(ipamRequest(inv)); !r) {
      return r;
    }
  }
  return checkVerbs(inv, deps, host, *link, prev, *ourIndex, **record);
}

}  // namespace

cni::Result<void> cmdCheck(const Invocation& given, Deps& deps) {
  return withDeviceFromInfoFile(given, [&deps](const Invocation& inv) { return checkAttachment(inv, deps); });
}

}  // namespace ibcni::plugin
