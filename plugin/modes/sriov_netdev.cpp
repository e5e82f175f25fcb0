// SPDX-License-Identifier: Apache-2.0
#include "plugin/modes/sriov_netdev.h"

#include <cerrno>
#include <cstdint>
#include <fmt/core.h>
#include <memory>

#include "plugin/modes/record_ahead.h"
#include "plugin/modes/sriov_vf.h"
#include "plugin/modes/sriov_vf_lookup.h"
#include "plugin/modes/sriov_vfio.h"
#include "lib/log/log.h"
#include "lib/log/timing.h"

namespace ibcni::plugin {

namespace {

std::string markFor(const std::string& hostName) {
  return std::string(SriovNetdevMode::kAliasPrefix) + hostName;
}

// Registers on `rollback` the rename of `name` in `ns` back to `oldName`.
void undoRename(os::Rollback& rollback, nl::Netlink& nl, const os::Netns& ns, const std::string& name,
                const std::string& oldName) {
  rollback.add("rename " + name + " back to " + oldName, [&nl, &ns, name, oldName]() -> os::SysResult<void> {
    auto l = nl.linkByName(ns, name);
    if (!l) {
      return std::unexpected(l.error());
    }
    return nl.renameLink(ns, l->index, oldName);
  });
}

// Moves link `index` (named `name`) from `from` to `to`, named `newName` there. The link travels
// under a temporary name, so it never carries a name that could collide with an interface of
// either namespace (and the pod name never appears in the host). One namespace move, the costly
// part (the kernel synchronizes the network stack), per direction. Each step registers its undo on
// `rollback`.
// @param clashCode  the error code when `to` already has `newName`
cni::Result<void> relocate(Deps& deps, const os::Netns& from, int index, const std::string& name,
                           const os::Netns& to, const std::string& newName, os::Rollback& rollback,
                           cni::Errc clashCode) {
  auto& nl = deps.netlink;
  const std::string tmpName = temporaryLinkName();
  if (auto r = nl.renameLink(from, index, tmpName); !r) {
    return std::unexpected(sysError(cni::Errc::kNetlinkFailure, "cannot rename " + name + " to " + tmpName,
                                    r.error()));
  }
  undoRename(rollback, nl, from, tmpName, name);

  if (auto r = nl.moveLink(from, index, to); !r) {
    return std::unexpected(sysError(cni::Errc::kNetlinkFailure,
                                    "cannot move " + name + " from netns " + from.path() + " into netns " + to.path(),
                                    r.error()));
  }
  rollback.add("move " + tmpName + " back to " + from.path(), [&nl, &from, &to, tmpName]() -> os::SysResult<void> {
    auto l = nl.linkByName(to, tmpName);
    if (!l) {
      return std::unexpected(l.error());
    }
    return nl.moveLink(to, l->index, from);
  });

  auto moved = nl.linkByName(to, tmpName);
  if (!moved) {
    return std::unexpected(sysError(cni::Errc::kNetlinkFailure, "cannot find " + tmpName + " after moving it",
                                    moved.error()));
  }
  if (auto r = nl.renameLink(to, moved->index, newName); !r) {
    if (r.error().err == EEXIST) {
      return std::unexpected(sysError(clashCode,
                                      "netns " + to.path() + " already has an interface named " + newName,
                                      r.error()));
    }
    return std::unexpected(sysError(cni::Errc::kNetlinkFailure, "cannot rename " + tmpName + " to " + newName,
                                    r.error()));
  }
  undoRename(rollback, nl, to, newName, tmpName);
  return {};
}

// Finds the device of `record` in the host namespace, under its own name or (when the kernel
// returned it from a destroyed pod namespace) under another one.
std::optional<nl::Link> findInHost(const ModeContext& ctx, const state::AttachmentRecord& record) {
  auto& nl = ctx.deps.netlink;
  const std::string mark = markFor(record.hostName);
  auto ours = [&](const nl::Link& l) {
    if (l.alias == mark || (record.hostIndex != 0 && l.index == record.hostIndex)) {
      return true;
    }
    if (record.pciAddress) {
      auto pci = ctx.deps.devices.pciOfNetdev(l.name, l.index);
      return pci && *pci == record.pciAddress;
    }
    return false;
  };
  if (auto l = nl.linkByName(ctx.host, record.hostName); l && ours(*l)) {
    return *l;
  }
  if (const auto& pci = record.pciAddress) {
    if (auto names = ctx.deps.devices.netdevsOfPci(*pci); names) {
      for (const auto& n : *names) {
        if (auto l = nl.linkByName(ctx.host, n); l) {
          return *l;
        }
      }
    }
  }
  if (record.hostIndex != 0) {
    if (auto l = nl.linkByIndex(ctx.host, record.hostIndex); l && l->alias == mark) {
      return *l;
    }
  }
  return std::nullopt;
}

// Devices the node itself needs, refused whatever the configuration says (error 7: the
// configuration, or the device plugin's resource, names the wrong device). A PF with VFs: moving
// it would take the port of every VF (and every pod on them) with it. The netdev that carries the
// node's default route: moving it would cut the node off its network.
cni::Result<void> refuseNodeDevice(const ModeContext& ctx, const HostDevice& dev, const sysfs::PciFunction* fn) {
  const auto& conf = ctx.inv.conf;
  const std::string subject =
      conf.deviceId ? "deviceID = \"" + conf.deviceId->text + "\"" : "device = \"" + conf.device + "\"";
  if (fn != nullptr && !fn->vfs.empty()) {
    std::string list;
    for (std::size_t i = 0; i < fn->vfs.size() && i < 4; ++i) {
      list += (list.empty() ? "" : ", ") + fn->vfs[i].address.text;
    }
    if (fn->vfs.size() > 4) {
      list += ", ...";
    }
    return cni::fail(cni::Errc::kInvalidConfig,
                     subject + " (" + dev.link.name + ") is the SR-IOV PF " + fn->address.text + " of " +
                         std::to_string(fn->vfs.size()) + (fn->vfs.size() == 1 ? " VF (" : " VFs (") + list +
                         "): moving it into a pod would take the port of every VF with it; give the pod one of its "
                         "VFs (the device plugin's resource must select VFs, not their PF)");
  }
  auto routes = ctx.deps.netlink.listRoutes(ctx.host, dev.link.index);
  if (!routes) {
    log::debug("cannot list the routes of {}: {}", dev.link.name, routes.error().describe());
    return {};
  }
  for (const auto& r : *routes) {
    const bool mainTable = !r.table || *r.table == 0 || *r.table == 254;  // RT_TABLE_MAIN
    if (r.dst.prefixLen == 0 && mainTable) {
      return cni::fail(cni::Errc::kInvalidConfig,
                       subject + " (" + dev.link.name + ") carries the node's default route (" + nl::describe(r) +
                           "): moving it into a pod would cut the node off its network; name a secondary "
                           "interface or a VF");
    }
  }
  return {};
}

// The MAC asked for the pod interface: the MAC capability, else the legacy CNI_ARGS MAC. It cannot
// apply to a 20-byte IPoIB address: refused before any VF setting changes (a GUID would cost two
// driver rebinds for nothing).
cni::Result<std::optional<net::HwAddress>> requestedMac(const ModeContext& ctx, const nl::Link& original) {
  std::optional<net::HwAddress> mac = ctx.inv.conf.runtime.mac;
  if (!mac && !ctx.inv.cniArgs.mac.empty()) {
    mac = net::HwAddress::parse(ctx.inv.cniArgs.mac);
  }
  if (mac && original.arpType == nl::kArphrdInfiniband) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     "mac = \"" + mac->text + "\" cannot be set on InfiniBand interface " + original.name +
                         ": an IPoIB address is 20 bytes and derived from the port GID; use infinibandGUID");
  }
  return mac;
}

// What DEL needs to find the device and put it back as it was before ADD.
void recordHostSide(const HostDevice& device, state::AttachmentRecord& record) {
  const nl::Link& original = device.link;
  record.pciAddress = device.pciAddress;
  record.deviceKey = device.deviceKey;
  record.hostName = original.name;
  record.hostIndex = original.index;
  record.hostMtu = original.mtu;
  record.hostUp = original.adminUp;
  record.hostAlias = original.alias;
  record.hostMac = original.mac.text;
}

// Before the move, in the host: `link` down and carrying ibcni's alias, each undone on failure.
cni::Result<void> prepareInHost(const ModeContext& ctx, const nl::Link& link, const nl::Link& original,
                                os::Rollback& rollback) {
  auto& nl = ctx.deps.netlink;
  const os::Netns& host = ctx.host;
  const std::string hostName = link.name;
  if (link.adminUp) {
    if (auto r = nl.setLinkUp(host, link.index, false); !r) {
      return std::unexpected(sysError(cni::Errc::kNetlinkFailure, "cannot bring " + hostName + " down", r.error()));
    }
    rollback.add("bring " + hostName + " up again", [&nl, &host, hostName]() -> os::SysResult<void> {
      auto l = nl.linkByName(host, hostName);
      if (!l) {
        return std::unexpected(l.error());
      }
      return nl.setLinkUp(host, l->index, true);
    });
  }
  // The alias keeps the host name on the device itself, so that a DEL without a record (or after
  // the kernel returned the device under another name) can still restore it.
  if (auto r = nl.setAlias(host, link.index, markFor(original.name)); !r) {
    return std::unexpected(sysError(cni::Errc::kNetlinkFailure, "cannot set the alias of " + hostName, r.error()));
  }
  rollback.add("restore the alias of " + hostName, [&nl, &host, hostName, alias = original.alias]() -> os::SysResult<void> {
    auto l = nl.linkByName(host, hostName);
    if (!l) {
      return std::unexpected(l.error());
    }
    return nl.setAlias(host, l->index, alias);
  });
  return {};
}

// After the move, in the pod: the configured MTU and MAC, and up, each undone on failure.
// @return the pod link as it is then.
cni::Result<nl::Link> configureInPod(const ModeContext& ctx, const os::Netns& pod, const std::string& hostName,
                                     const std::optional<net::HwAddress>& mac, os::Rollback& rollback,
                                     state::AttachmentRecord& record) {
  auto& nl = ctx.deps.netlink;
  const auto& conf = ctx.inv.conf;
  const auto& ifName = ctx.inv.args.ifName;
  auto inPod = nl.linkByName(pod, ifName);
  if (!inPod) {
    return std::unexpected(sysError(cni::Errc::kNetlinkFailure, "cannot find " + ifName + " in the pod", inPod.error()));
  }
  const int idx = inPod->index;
  if (conf.mtu && *conf.mtu != inPod->mtu) {
    if (auto r = nl.setMtu(pod, idx, *conf.mtu); !r) {
      return std::unexpected(sysError(cni::Errc::kNetlinkFailure,
                                      "cannot set mtu = " + std::to_string(*conf.mtu) + " on " + hostName +
                                          ": pick an MTU the device supports",
                                      r.error()));
    }
    rollback.add("restore the mtu of " + ifName, [&nl, &pod, idx, old = inPod->mtu] { return nl.setMtu(pod, idx, old); });
    record.podMtu = *conf.mtu;
  }
  if (mac && *mac != inPod->mac) {
    if (auto r = nl.setHwAddress(pod, idx, *mac); !r) {
      return std::unexpected(sysError(cni::Errc::kNetlinkFailure,
                                      "cannot set mac = \"" + mac->text + "\" on " + ifName, r.error()));
    }
    rollback.add("restore the mac of " + ifName, [&nl, &pod, idx, old = inPod->mac] { return nl.setHwAddress(pod, idx, old); });
    record.podMac = mac->text;
  }
  if (auto r = nl.setLinkUp(pod, idx, true); !r) {
    return std::unexpected(sysError(cni::Errc::kNetlinkFailure, "cannot bring " + ifName + " up", r.error()));
  }
  rollback.add("bring " + ifName + " down", [&nl, &pod, idx] { return nl.setLinkUp(pod, idx, false); });

  auto final = nl.linkByIndex(pod, idx);
  if (!final) {
    return std::unexpected(sysError(cni::Errc::kNetlinkFailure, "cannot read " + ifName + " back", final.error()));
  }
  record.podIndex = idx;
  return *final;
}

// The device ADD put in `pod`: CNI_IFNAME, else (an ADD or DEL that died half-way left it in the pod
// under its temporary name) the link with the index it had, carrying ibcni's alias `mark`.
std::optional<nl::Link> findInPod(const ModeContext& ctx, const state::AttachmentRecord& record, const os::Netns& pod,
                                  const std::string& mark) {
  auto& nl = ctx.deps.netlink;
  if (auto l = nl.linkByName(pod, record.ifName); l) {
    return *l;
  }
  // A link keeps its index across a move when it can, and ibcni's alias tells it apart.
  for (int index : {record.podIndex, record.hostIndex}) {
    if (index == 0) {
      continue;
    }
    if (auto byIndex = nl.linkByIndex(pod, index); byIndex && byIndex->alias == mark) {
      return *byIndex;
    }
  }
  return std::nullopt;
}

// Moves ibcni's device out of `pod` back to the host, under its host name. Another device under
// CNI_IFNAME is left alone.
cni::Result<void> returnToHost(const ModeContext& ctx, const state::AttachmentRecord& record, const os::Netns& pod) {
  auto& nl = ctx.deps.netlink;
  const std::string mark = markFor(record.hostName);
  auto l = findInPod(ctx, record, pod, mark);
  if (l && (l->alias == mark || l->index == record.podIndex)) {
    log::info("moving {} out of netns {} back to the host as {}", record.ifName, pod.path(), record.hostName);
    if (l->adminUp) {
      if (auto r = nl.setLinkUp(pod, l->index, false); !r) {
        log::warn("cannot bring {} down before moving it: {}", record.ifName, r.error().describe());
      }
    }
    // If the way back fails half-way, put the device back in the pod as it was, so that a retried
    // DEL finds it where it expects it.
    os::Rollback rollback(log::failedUndo);
    auto r = relocate(ctx.deps, pod, l->index, record.ifName, ctx.host, record.hostName, rollback,
                      cni::Errc::kNetlinkFailure);
    if (!r) {
      auto e = r.error();
      e.msg = "cannot return " + record.ifName + " to the host as " + record.hostName + ": " + e.msg;
      return std::unexpected(e);
    }
    rollback.commit();
  } else if (l) {
    log::warn("{} in netns {} is not the device ibcni attached (alias \"{}\"): leaving it alone", record.ifName,
              pod.path(), l->alias);
  }
  return {};
}

// The host settings of `found` back as the record has them: name, MTU, MAC, alias, state. Each
// failure is added to `errors`, and the rest is still restored.
void restoreHostSettings(const ModeContext& ctx, const state::AttachmentRecord& record, nl::Link& found,
                         std::vector<cni::Error>& errors) {
  auto& nl = ctx.deps.netlink;
  const os::Netns& host = ctx.host;
  const std::string mark = markFor(record.hostName);
  const int idx = found.index;
  if (found.name != record.hostName) {
    // The kernel returns a physical device from a destroyed namespace under its pod name (or
    // dev<ifindex> on a clash): give it its host name back.
    log::info("device {} came back as {}: renaming it", record.hostName, found.name);
    if (found.adminUp) {
      (void)nl.setLinkUp(host, idx, false);
      found.adminUp = false;
    }
    if (auto r = nl.renameLink(host, idx, record.hostName); !r) {
      errors.push_back(sysError(cni::Errc::kNetlinkFailure,
                                "cannot rename " + found.name + " back to " + record.hostName, r.error()));
    }
  }
  if (record.hostMtu != 0 && found.mtu != record.hostMtu) {
    if (auto r = nl.setMtu(host, idx, record.hostMtu); !r) {
      errors.push_back(sysError(cni::Errc::kNetlinkFailure, "cannot restore the mtu of " + record.hostName, r.error()));
    }
  }
  if (!record.podMac.empty() && !record.hostMac.empty() && found.mac.text != record.hostMac) {
    if (auto m = net::HwAddress::parse(record.hostMac)) {
      if (auto r = nl.setHwAddress(host, idx, *m); !r) {
        errors.push_back(sysError(cni::Errc::kNetlinkFailure, "cannot restore the mac of " + record.hostName, r.error()));
      }
    }
  }
  if (found.alias == mark) {
    if (auto r = nl.setAlias(host, idx, record.hostAlias); !r) {
      errors.push_back(sysError(cni::Errc::kNetlinkFailure, "cannot restore the alias of " + record.hostName, r.error()));
    }
  }
  if (found.adminUp != record.hostUp) {
    if (auto r = nl.setLinkUp(host, idx, record.hostUp); !r) {
      errors.push_back(sysError(cni::Errc::kNetlinkFailure, "cannot restore the state of " + record.hostName, r.error()));
    }
  }
}

// Why a function bound to `fn.driver` has no netdev: vfio-pci makes none (a VM's VF, refused by a
// network for pods only).
std::string noNetdevReason(const config::NetConf& conf, const sysfs::PciFunction& fn) {
  if (!SriovVfioMode::isVfioDriver(fn.driver)) {
    return ", and has no netdev";
  }
  return conf.vfio == config::VfioUse::kOff
             ? ", which makes no netdev: a VF for a VM, and this network is for pods (\"vfio\": false); have the "
               "device plugin's resource for it select VFs bound to their netdev driver (mlx5_core), or set vfio "
               "to \"auto\" to give VMs their VFs"
             : ", which makes no netdev (a VF for a VM, not a pod)";
}

}  // namespace

cni::Result<HostDevice> SriovNetdevMode::resolve(const ModeContext& ctx) {
  const auto& conf = ctx.inv.conf;
  auto& nl = ctx.deps.netlink;
  HostDevice dev;
  std::optional<sysfs::PciFunction> fn;
  if (conf.deviceId) {
    const std::string& pci = conf.deviceId->text;
    auto found = deviceIdFunction(ctx, *conf.deviceId);
    if (!found) {
      return std::unexpected(found.error());
    }
    fn = std::move(*found);
    const auto* names = &fn->netdevs;
    if (names->empty()) {
      return cni::fail(cni::Errc::kDeviceNotFound,
                       "deviceID = \"" + pci + "\" has no network interface in the host namespace: " +
                           (fn->driver.empty() ? std::string("it is bound to no driver (bind it to its network "
                                                             "driver, e.g. mlx5_core)")
                                               : "it is bound to " + fn->driver + noNetdevReason(conf, *fn)) +
                           ", or it is attached to another pod");
    }
    if (names->size() > 1) {
      std::string list;
      for (const auto& n : *names) {
        list += (list.empty() ? "" : ", ") + n;
      }
      return cni::fail(cni::Errc::kDeviceNotFound,
                       "deviceID = \"" + pci + "\" has several network interfaces (" + list +
                           "); ibcni moves exactly one: select it with \"device\" instead");
    }
    auto link = nl.linkByName(ctx.host, names->front());
    if (!link) {
      return std::unexpected(sysError(cni::Errc::kDeviceNotFound,
                                      "deviceID = \"" + pci + "\": its interface " + names->front() +
                                          " is not in the host namespace",
                                      link.error()));
    }
    dev.link = *link;
    dev.pciAddress = conf.deviceId;
  } else {
    auto link = nl.linkByName(ctx.host, conf.device);
    if (!link) {
      if (link.error().err == ENODEV) {
        return cni::fail(cni::Errc::kDeviceNotFound,
                         "device = \"" + conf.device + "\": no such network interface in the host namespace",
                         link.error().describe());
      }
      return std::unexpected(sysError(cni::Errc::kNetlinkFailure, "cannot look up device = \"" + conf.device + "\"",
                                      link.error()));
    }
    dev.link = *link;
    if (auto pci = ctx.deps.devices.pciOfNetdev(link->name, link->index); pci && *pci) {
      dev.pciAddress = *pci;
      if (auto f = ctx.deps.devices.pciFunction(**pci); f) {
        fn = std::move(*f);
      }
    }
  }
  if (dev.link.name == "lo") {
    return cni::fail(cni::Errc::kInvalidConfig, "device = \"lo\": the loopback interface cannot be moved");
  }
  if (auto r = refuseNodeDevice(ctx, dev, fn ? &*fn : nullptr); !r) {
    return std::unexpected(r.error());
  }
  dev.deviceKey = dev.pciAddress ? "pci-" + dev.pciAddress->text : "netdev-" + dev.link.name;
  if (auto r = resolveVf(ctx, fn ? &*fn : nullptr, dev); !r) {
    return std::unexpected(r.error());
  }
  return dev;
}

cni::Result<nl::Link> SriovNetdevMode::setUp(const ModeContext& ctx, const HostDevice& device, const os::Netns& pod,
                                             os::Rollback& rollback, state::AttachmentRecord& record) {
  const auto& conf = ctx.inv.conf;
  const auto& ifName = ctx.inv.args.ifName;
  const os::Netns& host = ctx.host;
  // The host name and settings DEL restores are those from before ADD; the VF steps (a driver
  // rebind, an RDMA device move) may hand back a new netdev, which is the one to move.
  const nl::Link& original = device.link;
  auto mac = requestedMac(ctx, original);
  if (!mac) {
    return std::unexpected(mac.error());
  }

  // What DEL needs to put the device back is written ahead of the first change (the VF's
  // settings, then the netdev): a process that dies half-way (SIGKILL, the OOM killer) leaves DEL
  // what it needs to find the device wherever it was left, under its temporary name too, and to
  // restore what it was.
  recordHostSide(device, record);
  RecordAhead ahead(ctx, record, rollback);
  auto applied = applyVfSettings(ctx, device, pod, rollback, record, ahead);
  if (!applied) {
    return std::unexpected(applied.error());
  }
  const nl::Link link = *applied;
  record.hostIndex = link.index;  // a rebind or an RDMA move makes the netdev anew
  if (conf.mtu && *conf.mtu != link.mtu) {
    record.podMtu = *conf.mtu;
  }
  if (*mac && **mac != link.mac) {
    record.podMac = (*mac)->text;
  }
  if (auto r = ahead.save(); !r) {
    return std::unexpected(r.error());
  }

  log::info("moving {} ({}) into netns {} as {}", link.name,
            device.pciAddress ? device.pciAddress->text : "no PCI function", pod.path(), ifName);
  if (auto r = prepareInHost(ctx, link, original, rollback); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = relocate(ctx.deps, host, link.index, link.name, pod, ifName, rollback, cni::Errc::kIfNameExists); !r) {
    return std::unexpected(r.error());
  }
  return configureInPod(ctx, pod, link.name, *mac, rollback, record);
}

bool SriovNetdevMode::awaitsReturn(const ModeContext& ctx, const state::AttachmentRecord& record) {
  const auto& pci = record.pciAddress;
  if (!pci || findInHost(ctx, record)) {
    return false;  // a netdev without a PCI function is virtual: destroyed with its namespace
  }
  // ENOENT: the function itself is gone (its VFs were removed): nothing will come back.
  return ctx.deps.devices.netdevsOfPci(*pci).has_value();
}

cni::Result<void> SriovNetdevMode::tearDown(const ModeContext& ctx, const state::AttachmentRecord& record,
                                            const os::Netns* pod) {
  if (pod != nullptr) {
    if (auto r = returnToHost(ctx, record, *pod); !r) {
      return r;
    }
  }

  std::vector<cni::Error> errors = restoreVfSettings(ctx, record, pod);

  auto found = findInHost(ctx, record);
  if (!found) {
    if (!errors.empty()) {
      return std::unexpected(combine(errors));
    }
    log::info("device {} is in neither the pod nor the host: nothing to restore (a virtual device is destroyed "
              "with its namespace)",
              record.hostName);
    return {};
  }
  restoreHostSettings(ctx, record, *found, errors);
  if (!errors.empty()) {
    return std::unexpected(combine(errors));
  }
  return {};
}

cni::Result<void> SriovNetdevMode::check(const ModeContext& ctx, const state::AttachmentRecord& record,
                                         const os::Netns& pod, const nl::Link& podLink) {
  const auto& ifName = ctx.inv.args.ifName;
  if (podLink.alias != markFor(record.hostName)) {
    return cni::fail(cni::Errc::kCheckFailed,
                     ifName + " in the pod is not the device ibcni attached: its alias is \"" + podLink.alias +
                         "\", expected \"" + markFor(record.hostName) + "\"");
  }
  if (!podLink.adminUp) {
    return cni::fail(cni::Errc::kCheckFailed, ifName + " in the pod is down");
  }
  if (record.podMtu && podLink.mtu != *record.podMtu) {
    return cni::fail(cni::Errc::kCheckFailed, ifName + " has mtu " + std::to_string(podLink.mtu) + ", expected " +
                                                  std::to_string(*record.podMtu));
  }
  if (!record.podMac.empty() && podLink.mac.text != record.podMac) {
    return cni::fail(cni::Errc::kCheckFailed,
                     ifName + " has mac " + podLink.mac.text + ", expected " + record.podMac);
  }
  return checkVf(ctx, record, pod, podLink);
}

std::optional<state::AttachmentRecord> SriovNetdevMode::recover(const ModeContext& ctx, const nl::Link& podLink) {
  if (!podLink.alias.starts_with(kAliasPrefix)) {
    return std::nullopt;
  }
  std::string hostName = podLink.alias.substr(kAliasPrefix.size());
  if (!net::isValidIfName(hostName)) {
    return std::nullopt;
  }
  state::AttachmentRecord r = recordFor(ctx.inv);
  r.hostName = hostName;
  r.podIndex = podLink.index;
  // What the host settings were is unknown without the record: the device comes back down, with
  // its MTU and MAC as the pod left them, and no alias.
  return r;
}

std::string SriovNetdevMode::deviceKeyFromConfig(const ModeContext& ctx) {
  const auto& conf = ctx.inv.conf;
  return conf.deviceId ? "pci-" + conf.deviceId->text : "netdev-" + conf.device;
}

}  // namespace ibcni::plugin
