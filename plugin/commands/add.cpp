// SPDX-License-Identifier: Apache-2.0
// ADD: netns → device lock → mode setUp → IPAM → addresses and routes → record → result.
// Every change registers its undo right after it succeeds; any failure undoes them all, newest
// first, so a failed ADD leaves the host and the pod as they were and the IPAM allocation released.
#include <cerrno>
#include <linux/rtnetlink.h>

#include "plugin/commands/commands.h"
#include "plugin/commands/common.h"
#include "plugin/commands/device_info.h"
#include "plugin/commands/policy_routing.h"
#include "plugin/modes/device_holders.h"
#include "plugin/modes/verbs_check.h"
#include "lib/log/log.h"
#include "lib/log/timing.h"

namespace ibcni::plugin {

namespace {

// What the records say of a device missing from the host (`notFound`, error 100): 101 naming a
// live holder, else one whose netns cannot be checked from here (which may be alive); with
// neither, the answer stays 100 and says where the device was last seen (a record whose pod netns
// is gone is stale, its pod having died without a DEL: never the holder).
std::optional<cni::Error> busyError(const Invocation& inv, Deps& deps, const cni::Error& notFound) {
  auto store = deps.makeStore(inv.conf.stateDir);
  auto records = store->list("");
  if (!records) {
    return std::nullopt;
  }
  const std::string subject =
      inv.conf.deviceId ? "deviceID = \"" + inv.conf.deviceId->text + "\"" : "device = \"" + inv.conf.device + "\"";
  const DeviceHolders holders = deviceHolders(inv, deps, *records, [&inv](const state::AttachmentRecord& r) {
    return inv.conf.deviceId ? r.pciAddress == inv.conf.deviceId : r.hostName == inv.conf.device;
  });
  if (holders.holder() != nullptr) {
    return busyWith(subject, holders);
  }
  if (!holders.gone.empty()) {
    const state::AttachmentRecord& stale = *holders.gone.front();
    cni::Error e = notFound;
    e.msg += "; it was last seen attached to " + attachmentText(stale) +
             ", whose netns is gone (the pod ended without a DEL)" +
             (!stale.pciAddress
                  ? ": a device without a PCI function (veth, macvlan, ...) is destroyed with its namespace and does not "
                    "come back; `ibcni reconcile` (run by the ibcni DaemonSet) removes the stale record"
                  : ": the kernel returns it to the host when that namespace ends, and `ibcni reconcile` (run by the "
                    "ibcni DaemonSet) or a DEL of that container then restores it");
    return e;
  }
  return std::nullopt;
}

// Adds IPAM's addresses and the routes to the pod link. A route without a gateway uses the
// gateway of the first address of its family, as the reference plugins do, unless it is a link
// route (scope link).
cni::Result<void> configureAddresses(const Invocation& inv, Deps& deps, const os::Netns& pod, int index,
                                     const cni::AddResult& ipam, os::Rollback& rollback) {
  auto& nl = deps.netlink;
  const auto& ifName = inv.args.ifName;
  for (const auto& ip : ipam.ips) {
    if (auto r = nl.addAddress(pod, index, ip.address); !r) {
      return std::unexpected(sysError(cni::Errc::kNetlinkFailure,
                                      "cannot add address " + ip.address.toString() + " to " + ifName, r.error()));
    }
    rollback.add("remove address " + ip.address.toString(),
                 [&nl, &pod, index, a = ip.address] { return nl.deleteAddress(pod, index, a); });
  }
  for (const auto& rt : ipam.routes) {
    nl::Route route{rt.dst, rt.gw, index, rt.mtu, rt.advmss, rt.priority, rt.table, rt.scope};
    if (!route.gw && route.scope != RT_SCOPE_LINK) {
      for (const auto& ip : ipam.ips) {
        if (ip.gateway && ip.address.address.family == rt.dst.address.family) {
          route.gw = ip.gateway;
          break;
        }
      }
    }
    if (auto r = nl.addRoute(pod, route); !r) {
      std::string text = rt.dst.toString() + (route.gw ? " via " + route.gw->toString() : "");
      return std::unexpected(sysError(cni::Errc::kNetlinkFailure,
                                      "cannot add route " + text + " on " + ifName +
                                          (r.error().err == EEXIST ? ": ipam.routes lists it twice (or the IPAM "
                                                                     "result does); drop the duplicate"
                                                                   : ""),
                                      r.error()));
    }
    rollback.add("remove route " + rt.dst.toString(), [&nl, &pod, route] { return nl.deleteRoute(pod, route); });
  }
  return {};
}

// The device the mode resolves; when it finds none, the busy error if another attachment holds it.
cni::Result<HostDevice> resolveDevice(const Invocation& inv, Deps& deps, AttachmentMode& mode, const ModeContext& ctx) {
  auto device = mode.resolve(ctx);
  if (!device && device.error().code == cni::Errc::kDeviceNotFound) {
    if (auto busy = busyError(inv, deps, device.error())) {
      return std::unexpected(*busy);
    }
  }
  return device;
}

// CNI_IFNAME taken in the pod already, when the mode puts a netdev there under that name; the
// policyRouting table another interface of the pod uses.
cni::Result<void> refuseClashes(const Invocation& inv, Deps& deps, const AttachmentMode& mode, const os::Netns& pod) {
  if (mode.givesPodNetdev() && deps.netlink.linkByName(pod, inv.args.ifName)) {
    return cni::fail(cni::Errc::kIfNameExists, "CNI_IFNAME=" + inv.args.ifName + " already exists in netns " +
                                                   inv.args.netns + ": pick another interface name");
  }
  return refuseTakenTable(inv, deps, pod);
}

// An ADD of an attachment that exists already (ADD twice without DEL) changes nothing.
cni::Result<void> refuseSecondAdd(const Invocation& inv, state::AttachmentStore& store) {
  auto existing = store.load(inv.conf.name, inv.args.containerId, inv.args.ifName);
  if (existing && *existing) {
    return cni::fail(cni::Errc::kIfNameExists,
                     "container " + inv.args.containerId + " already has " + inv.args.ifName + " on network " +
                         inv.conf.name + " (ADD twice without DEL)");
  }
  return {};
}

// The IPAM's addresses and routes on the pod's interface (nothing without an IPAM), and
// policyRouting's sysctls and rules; each undone on failure, the allocation released.
cni::Result<cni::AddResult> allocateAddresses(const Invocation& inv, Deps& deps, const os::Netns& pod, int index,
                                              state::AttachmentRecord& record, os::Rollback& rollback) {
  // The sysctls first: the interface answers ARP as a rail from its first address on.
  if (auto r = setPolicySysctls(inv, deps, pod, rollback); !r) {
    return std::unexpected(r.error());
  }
  if (inv.conf.ipamType.empty()) {
    return cni::AddResult{};
  }
  auto request = ipamRequest(inv);
  auto allocated = deps.ipam.add(request);
  if (!allocated) {
    return std::unexpected(allocated.error());
  }
  log::timing::lap("ipam");
  rollback.add("release the IPAM allocation", [&deps, request]() -> os::SysResult<void> {
    if (auto r = deps.ipam.del(request); !r) {
      return os::sysFail(EIO, "ipam DEL: " + r.error().msg);
    }
    return {};
  });
  // With policyRouting the routes are the interface's table's (policy_routing.h).
  allocated->routes = podRoutes(inv, *allocated);
  if (auto r = configureAddresses(inv, deps, pod, index, *allocated, rollback); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = addPolicyRules(inv, deps, pod, allocated->ips, record, rollback); !r) {
    return std::unexpected(r.error());
  }
  log::timing::lap("addr");
  return allocated;
}

// The verbs check, from inside the pod's netns, once the interface is complete. An interface
// without an RDMA device is judged too: require means RDMA.
cni::Result<void> checkVerbs(const Invocation& inv, Deps& deps, const os::Netns& host, const HostDevice& device,
                             const state::AttachmentRecord& record, const cni::AddResult& addresses) {
  const auto& conf = inv.conf;
  if (conf.verbsCheck.mode == config::VerbsCheck::Mode::kOff) {
    return {};
  }
  const RdmaFacts facts = rdmaFacts(deps, host, inv, device.pciAddress, device.link, record.rdmaDevice, record.rdmaMoved);
  std::vector<net::IpAddress> ips;
  for (const auto& ip : addresses.ips) {
    ips.push_back(ip.address.address);
  }
  return runVerbsCheck(inv, deps, inv.args.netns, facts, verbsExpectations(conf, record, std::move(ips)));
}

// The result: a chained prevResult passed through with ibcni's interface appended, and the IPAM's
// addresses (on that interface), routes and DNS (else the configuration's).
cni::AddResult addResult(const Invocation& inv, const nl::Link& podLink, const state::AttachmentRecord& record,
                         const cni::AddResult& addresses) {
  cni::AddResult result = inv.conf.prevResult.value_or(cni::AddResult{});
  const int ourIndex = static_cast<int>(result.interfaces.size());
  // A VF given to a VM has no netdev in the pod: its entry is the name, the sandbox (Multus
  // reports only interfaces with one) and, at 1.1.0, the PCI address KubeVirt looks for.
  result.interfaces.push_back(cni::Interface{inv.args.ifName, podLink.mac.text, inv.args.netns,
                                             podLink.mtu != 0 ? std::optional<std::uint32_t>(podLink.mtu) : std::nullopt,
                                             record.pciAddress ? record.pciAddress->text : "", {}});
  for (auto ip : addresses.ips) {
    ip.interface = ourIndex;
    result.ips.push_back(std::move(ip));
  }
  for (const auto& rt : addresses.routes) {
    result.routes.push_back(rt);
  }
  if (!addresses.dns.empty()) {
    result.dns = addresses.dns;
  } else if (result.dns.empty()) {
    result.dns = inv.conf.dns;
  }
  return result;
}

// Before 1.1.0 a route cannot name its table: one ADD put in another table than main (policyRouting's)
// would read as one of main, so it is left out of the printed result (the record keeps it).
void forgetUnsayableRoutes(cni::SpecVersion version, cni::AddResult& result) {
  if (!cni::hasV11Fields(version)) {
    std::erase_if(result.routes, [](const cni::Route& rt) { return rt.table && *rt.table != RT_TABLE_MAIN; });
  }
}

// The device as the host knows it, for the log: its netdev, else (a VF given to a VM) its PCI function.
std::string hostSideName(const state::AttachmentRecord& record) {
  return !record.hostName.empty() ? record.hostName : record.pciAddress ? record.pciAddress->text : "?";
}

// ADD: open the namespaces, refuse what cannot be done before anything changes, resolve and lock
// the device (and resolve it again under the lock), set it up in the pod, give it addresses, check
// RDMA, write the device-info file and the record. Every change registers its undo on `rollback`,
// which undoes them all unless the record is written.
cni::Result<cni::AddResult> attach(const Invocation& inv, Deps& deps) {
  const auto& conf = inv.conf;
  auto namespaces = openNamespaces(inv, deps);
  if (!namespaces) {
    return std::unexpected(namespaces.error());
  }
  const os::Netns& host = namespaces->host;
  const os::Netns& pod = namespaces->pod;
  log::timing::lap("netns");
  ModeContext ctx{inv, deps, host};
  auto& mode = modeFor(ctx);
  // The device-info path is judged before anything changes (error 7 for a hostile one).
  auto writeInfo = deviceInfoToWrite(inv, deps);
  if (!writeInfo) {
    return std::unexpected(writeInfo.error());
  }
  if (auto r = prepareStateDir(conf); !r) {
    return std::unexpected(r.error());
  }
  auto store = deps.makeStore(conf.stateDir);
  if (auto r = refuseSecondAdd(inv, *store); !r) {
    return std::unexpected(r.error());
  }
  log::timing::lap("state-read");

  auto device = resolveDevice(inv, deps, mode, ctx);
  if (!device) {
    return std::unexpected(device.error());
  }
  auto lock = lockDevice(inv, deps, device->deviceKey);
  if (!lock) {
    return std::unexpected(lock.error());
  }
  // Resolve again under the lock: another ADD may have taken the device while this one waited.
  device = resolveDevice(inv, deps, mode, ctx);
  if (!device) {
    return std::unexpected(device.error());
  }
  if (auto r = refuseClashes(inv, deps, mode, pod); !r) {
    return std::unexpected(r.error());
  }
  log::timing::lap("resolve");

  os::Rollback rollback(log::failedUndo);
  state::AttachmentRecord record = recordFor(inv);
  record.netnsInode = static_cast<std::uint64_t>(pod.inode());
  record.ipamType = conf.ipamType;
  auto podLink = mode.setUp(ctx, *device, pod, rollback, record);
  if (!podLink) {
    return std::unexpected(podLink.error());
  }
  log::timing::lap("link");
  auto addresses = allocateAddresses(inv, deps, pod, podLink->index, record, rollback);
  if (!addresses) {
    return std::unexpected(addresses.error());
  }
  if (!mode.givesPodNetdev()) {
    log::debug("no verbs check: the VF goes to a VM, and the host has no RDMA device of it");
  } else if (auto r = checkVerbs(inv, deps, host, *device, record, *addresses); !r) {
    return std::unexpected(r.error());
  }
  // The device-info file for Multus' network-status, when the runtime asked and no file is there.
  if (*writeInfo) {
    if (auto r = writeDeviceInfo(inv, deps, record, rollback); !r) {
      return std::unexpected(r.error());
    }
  }
  cni::AddResult result = addResult(inv, *podLink, record, *addresses);
  log::timing::lap("result");
  record.result = result;
  record.createdAt = deps.now ? deps.now() : "";
  if (auto r = store->save(record); !r) {
    return std::unexpected(sysError(cni::Errc::kStateFailure,
                                    "cannot write the attachment record in stateDir = " + conf.stateDir, r.error()));
  }
  log::timing::lap("state-write");
  rollback.commit();
  log::info("attached {} as {} in {}", hostSideName(record), inv.args.ifName, inv.args.netns);
  return result;
}

}  // namespace

cni::Result<cni::AddResult> cmdAdd(const Invocation& given, Deps& deps) {
  auto result = withDeviceFromInfoFile(given, [&deps](const Invocation& inv) { return attach(inv, deps); });
  if (result) {
    forgetUnsayableRoutes(given.conf.version, *result);
  }
  return result;
}

}  // namespace ibcni::plugin
