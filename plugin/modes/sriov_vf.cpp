// SPDX-License-Identifier: Apache-2.0
// The VF's steps of ADD (GUIDs and rebind, link state, pkey table, RDMA device move), DEL (each put
// back) and CHECK. What they look up of the VF is in sriov_vf_lookup.cpp; resolveVf, which judges
// what was asked before any of them runs, in sriov_vf_resolve.cpp.
#include "plugin/modes/sriov_vf.h"

#include <cerrno>

#include "lib/log/log.h"
#include "plugin/modes/sriov_vf_guid_pool.h"
#include "plugin/modes/sriov_vf_lookup.h"

namespace ibcni::plugin {

namespace {

using cni::Errc;

const char* linkStateName(nl::VfLinkState s) {
  switch (s) {
    case nl::VfLinkState::kEnable:
      return "enable";
    case nl::VfLinkState::kDisable:
      return "disable";
    case nl::VfLinkState::kAuto:
      break;
  }
  return "auto";
}

// The RDMA device called `name` as `ns` sees it.
std::optional<rdma::Port> rdmaDeviceIn(const ModeContext& ctx, const os::Netns& ns, const std::string& name) {
  auto ports = ctx.deps.rdma.ports(ns);
  if (!ports) {
    return std::nullopt;
  }
  for (const auto& p : *ports) {
    if (p.deviceName == name) {
      return p;
    }
  }
  return std::nullopt;
}

// Rebinds the VF and waits for its netdev, then gives that netdev the name, MTU and state of
// `original` (a rebind makes the netdev anew, with the driver's defaults).
std::vector<cni::Error> rebindAndRestore(const ModeContext& ctx, const net::PciAddress& pci, const nl::Link* original,
                                         const std::string& preferName) {
  std::vector<cni::Error> errors;
  if (auto r = ctx.deps.devices.rebind(pci); !r) {
    errors.push_back(sysError(Errc::kNetlinkFailure, "cannot rebind " + pci.text + " to its driver", r.error()));
    return errors;
  }
  auto link = waitForNetdev(ctx, pci, original != nullptr ? original->name : preferName);
  if (!link) {
    if (original == nullptr) {
      // DEL: the GUID is restored; a netdev that does not come back is the driver's business, and
      // the DEL's later steps have nothing left to rename.
      log::warn("{}", link.error().msg);
    } else {
      errors.push_back(link.error());
    }
    return errors;
  }
  if (original == nullptr) {
    return errors;
  }
  auto& nl = ctx.deps.netlink;
  if (link->name != original->name) {
    if (link->adminUp) {
      (void)nl.setLinkUp(ctx.host, link->index, false);
      link->adminUp = false;
    }
    if (auto r = nl.renameLink(ctx.host, link->index, original->name); !r) {
      errors.push_back(sysError(Errc::kNetlinkFailure, "cannot rename " + link->name + " back to " + original->name,
                                r.error()));
    }
  }
  if (original->mtu != 0 && link->mtu != original->mtu) {
    if (auto r = nl.setMtu(ctx.host, link->index, original->mtu); !r) {
      errors.push_back(sysError(Errc::kNetlinkFailure, "cannot restore the mtu of " + original->name, r.error()));
    }
  }
  if (link->adminUp != original->adminUp) {
    if (auto r = nl.setLinkUp(ctx.host, link->index, original->adminUp); !r) {
      errors.push_back(sysError(Errc::kNetlinkFailure, "cannot restore the state of " + original->name, r.error()));
    }
  }
  return errors;
}

// How a VF takes GUIDs set through its PF: mlx5 applies them when the VF is next bound to its
// driver; a VF given to a VM is never rebound (the guest's driver reads them at its next boot, and a
// rebind would take the VF from vfio-pci under the VM).
enum class Rebind { kYes, kNo };

// Sets `node`/`port` on the VF (writableGuid: an all-zero GUID as all ones) and rebinds it.
std::vector<cni::Error> restoreGuids(const ModeContext& ctx, int pfIndex, std::uint32_t vf, net::Guid node,
                                     net::Guid port, const net::PciAddress& pci, const nl::Link* original,
                                     Rebind rebind, const std::string& preferName = {}) {
  node = writableGuid(node);
  port = writableGuid(port);
  if (auto r = ctx.deps.netlink.setVfGuids(ctx.host, pfIndex, vf, node, port); !r) {
    return {sysError(Errc::kNetlinkFailure,
                     "cannot restore the GUIDs of VF " + std::to_string(vf) + " to " + node.toString() + " / " +
                         port.toString(),
                     r.error())};
  }
  if (rebind == Rebind::kNo) {
    return {};
  }
  return rebindAndRestore(ctx, pci, original, preferName);
}

// The VF's netdev and RDMA device as ADD's VF steps leave them: a rebind makes both anew (the RDMA
// device possibly under another name, mlx5_N), and an RDMA device move the netdev.
struct VfNow {
  nl::Link link;
  std::optional<RdmaPlace> rdma;
};

// Sets `guid` as the VF's node and port GUID, written ahead with the GUIDs `cur` it replaces; its
// undo puts those back (with a rebind, unless `rebind` says no).
cni::Result<void> setRequestedGuid(const ModeContext& ctx, const HostDevice& device, const std::string& what,
                                   const net::PciAddress& vfPci, const net::Guid& guid, const VfGuids& cur,
                                   Rebind rebind, os::Rollback& rollback, state::AttachmentRecord& record,
                                   RecordAhead& ahead) {
  const VfPlace& vf = *device.vf;
  const net::Guid oldNode = cur.node.value_or(net::Guid{0});
  const net::Guid oldPort = cur.port.value_or(net::Guid{0});
  log::info("setting the node and port GUID of {} to {} (was {} / {})", what, guid.toString(), oldNode.toString(),
            oldPort.toString());
  record.guid = guid.toString();
  record.oldNodeGuid = oldNode.toString();
  record.oldPortGuid = oldPort.toString();
  if (auto r = ahead.save(); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = ctx.deps.netlink.setVfGuids(ctx.host, vf.pfLink.index, vf.vfIndex, guid, guid); !r) {
    return std::unexpected(sysError(Errc::kNetlinkFailure,
                                    "cannot set GUID " + guid.toString() + " on " + what +
                                        (r.error().err == EOPNOTSUPP
                                             ? ": the PF's driver cannot set VF GUIDs (kernel >= 5.6 with mlx5 "
                                               "is needed)"
                                             : ""),
                                    r.error()));
  }
  rollback.add("restore the GUIDs of " + what,
               [&ctx, pfIndex = vf.pfLink.index, vfIndex = vf.vfIndex, oldNode, oldPort, vfPci, rebind,
                original = device.link]() -> os::SysResult<void> {
                 auto errors = restoreGuids(ctx, pfIndex, vfIndex, oldNode, oldPort, vfPci, &original, rebind);
                 if (!errors.empty()) {
                   return os::sysFail(EIO, combine(errors).msg);
                 }
                 return {};
               });
  return {};
}

// mlx5 applies a VF's new GUIDs when the VF is next bound to its driver: rebinds it and finds its
// netdev and RDMA device anew in `now`.
cni::Result<void> rebindForGuids(const ModeContext& ctx, const HostDevice& device, const net::PciAddress& vfPci,
                                 VfNow& now) {
  if (auto r = ctx.deps.devices.rebind(vfPci); !r) {
    return std::unexpected(sysError(Errc::kNetlinkFailure,
                                    "cannot rebind " + vfPci.text + " to its driver so that its new GUID takes effect",
                                    r.error()));
  }
  auto fresh = waitForNetdev(ctx, vfPci, device.link.name);
  if (!fresh) {
    return std::unexpected(fresh.error());
  }
  now.link = *fresh;
  if (now.rdma) {
    auto fn = ctx.deps.devices.pciFunction(vfPci);
    auto found = findRdma(ctx, fn ? &*fn : nullptr, now.link);
    if (!found || (now.rdma->isolate && !found->visible)) {
      return cni::fail(Errc::kDeviceNotFound, "the RDMA device of " + vfPci.text + " (" + now.rdma->name +
                                                  ") did not come back after the VF was rebound");
    }
    if (found->name != now.rdma->name) {
      log::info("the VF's RDMA device is now {} (was {})", found->name, now.rdma->name);
    }
    found->isolate = now.rdma->isolate;
    now.rdma = found;
  }
  return {};
}

// Sets the configured linkState on the VF through its PF, written ahead with the state it
// replaces; its undo puts that back.
cni::Result<void> setLinkState(const ModeContext& ctx, const VfPlace& vf, const std::string& what,
                               os::Rollback& rollback, state::AttachmentRecord& record, RecordAhead& ahead) {
  auto& nl = ctx.deps.netlink;
  const os::Netns& host = ctx.host;
  const nl::VfLinkState want = toNl(*ctx.inv.conf.linkState);
  const nl::VfLinkState was = vf.info && vf.info->linkState ? *vf.info->linkState : nl::VfLinkState::kAuto;
  if (want == was) {
    return {};
  }
  record.oldLinkState = static_cast<std::uint32_t>(was);
  if (auto r = ahead.save(); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = nl.setVfLinkState(host, vf.pfLink.index, vf.vfIndex, want); !r) {
    return std::unexpected(sysError(Errc::kNetlinkFailure,
                                    std::string("cannot set linkState = ") + linkStateName(want) + " on " + what,
                                    r.error()));
  }
  rollback.add(std::string("restore the link state of ") + what + " to " + linkStateName(was),
               [&nl, &host, pfIndex = vf.pfLink.index, vfIndex = vf.vfIndex, was] {
                 return nl.setVfLinkState(host, pfIndex, vfIndex, was);
               });
  return {};
}

// The VF's settings on its PF: the requested GUID (then a rebind, unless `rebind` says no), the
// link state.
cni::Result<void> applyPfSettings(const ModeContext& ctx, const HostDevice& device, Rebind rebind,
                                  os::Rollback& rollback, state::AttachmentRecord& record, RecordAhead& ahead,
                                  VfNow& now) {
  const VfPlace& vf = *device.vf;
  record.pfPci = vf.pfPci;
  record.vfIndex = vf.vfIndex;
  const std::string what = vfName(vf.pfPci, vf.vfIndex, vf.pfLink.name);
  if (!device.pciAddress) {
    return cni::fail(Errc::kInternal, what + " was found without its PCI address");
  }
  const net::PciAddress& vfPci = *device.pciAddress;

  std::optional<net::Guid> guid = vf.guid;  // validated by resolveVf
  const VfGuids cur = currentGuids(device);
  VfGuids restoreTo = cur;
  if (const auto& before = vf.guidsBeforeDeadHolder) {
    restoreTo = VfGuids{before->first, before->second};
  }
  if (vf.guidFromPool) {
    auto taken = takePoolGuid(ctx, vf, rollback, record, ahead);
    if (!taken) {
      return std::unexpected(taken.error());
    }
    guid = *taken;
    restoreTo = restorableOutsidePool(restoreTo, *guidPoolOf(ctx.inv.conf));
  }
  // A pool's GUID is recorded even when the VF carries it already: DEL must take it off the VF.
  const bool carries = guid && cur.node == guid && cur.port == guid;
  if (guid && (!carries || vf.guidFromPool)) {
    if (auto r = setRequestedGuid(ctx, device, what, vfPci, *guid, restoreTo, rebind, rollback, record, ahead); !r) {
      return r;
    }
  }
  if (guid && !carries && rebind == Rebind::kYes) {
    if (auto r = rebindForGuids(ctx, device, vfPci, now); !r) {
      return r;
    }
  }
  if (ctx.inv.conf.linkState) {
    return setLinkState(ctx, vf, what, rollback, record, ahead);
  }
  return {};
}

// Moves the RDMA device `now.rdma` into `pod`, written ahead; its undo moves it back. The move
// makes the IPoIB netdev anew in the host: waits for it, in `now.link`.
cni::Result<void> moveRdmaIntoPod(const ModeContext& ctx, const std::optional<net::PciAddress>& pci,
                                  const os::Netns& pod, os::Rollback& rollback, state::AttachmentRecord& record,
                                  RecordAhead& ahead, VfNow& now) {
  const RdmaPlace& r = *now.rdma;
  log::info("moving RDMA device {} into netns {}", r.name, pod.path());
  record.rdmaMoved = true;
  if (auto s = ahead.save(); !s) {
    return std::unexpected(s.error());
  }
  if (auto m = ctx.deps.rdma.moveDevice(ctx.host, r.index, pod); !m) {
    return std::unexpected(sysError(Errc::kNetlinkFailure,
                                    "cannot move RDMA device " + r.name + " into netns " + pod.path() +
                                        (m.error().err == EOPNOTSUPP
                                             ? ": its driver cannot change namespaces (rxe cannot; mlx5 can); "
                                               "set rdmaIsolation to false to leave it shared"
                                             : ""),
                                    m.error()));
  }
  rollback.add("move RDMA device " + r.name + " back to the host", [&ctx, &pod, r]() -> os::SysResult<void> {
    auto inPod = rdmaDeviceIn(ctx, pod, r.name);
    if (!inPod) {
      return {};  // already back
    }
    return ctx.deps.rdma.moveDevice(pod, inPod->deviceIndex, ctx.host);
  });
  // Moving an RDMA device re-creates its IPoIB netdev in the host namespace.
  if (!pci) {
    return cni::fail(Errc::kInternal, "RDMA device " + r.name + " moved, but its interface " + now.link.name +
                                          " has no PCI function to wait for");
  }
  auto fresh = waitForNetdev(ctx, *pci, now.link.name);
  if (!fresh) {
    return std::unexpected(fresh.error());
  }
  now.link = *fresh;
  return {};
}

}  // namespace

cni::Result<void> checkVfPkey(const ModeContext& ctx, const RdmaPlace& rdma, net::Pkey pkey,
                              const std::optional<net::PciAddress>& pci, const std::string& fix) {
  auto table = ctx.deps.devices.pkeys(rdma.name, rdma.port);
  if (!table) {
    return std::unexpected(sysError(Errc::kDeviceNotFound,
                                    "cannot read the pkey table of " + rdma.name + " port " + std::to_string(rdma.port),
                                    table.error()));
  }
  bool member = false;
  std::string list;
  for (auto k : *table) {
    member = member || k.samePartition(pkey);
    list += (list.empty() ? "" : ", ") + k.hex();
  }
  if (member) {
    return {};
  }
  return cni::fail(Errc::kInvalidConfig,
                   "pkey = " + pkey.hex() + ": " + rdma.name + " port " + std::to_string(rdma.port) +
                       (pci ? " (deviceID " + pci->text + ")" : std::string()) +
                       " is not a member of it (its pkey table holds " +
                       (list.empty() ? std::string("nothing") : list) + "). " +
                       (fix.empty() ? "The subnet manager assigns partitions: add the VF's GUID to that partition "
                                      "(e.g. in OpenSM's partitions.conf or UFM) or use a pkey the VF has"
                                    : fix));
}

cni::Result<nl::Link> applyVfSettings(const ModeContext& ctx, const HostDevice& device, const os::Netns& pod,
                                      os::Rollback& rollback, state::AttachmentRecord& record, RecordAhead& ahead) {
  const auto& conf = ctx.inv.conf;
  VfNow now{device.link, device.rdma};
  if (ctx.deps.bootId) {
    record.bootId = ctx.deps.bootId();
  }
  if (device.vf) {
    if (auto r = applyPfSettings(ctx, device, Rebind::kYes, rollback, record, ahead, now); !r) {
      return std::unexpected(r.error());
    }
  }
  if (now.rdma) {
    record.rdmaDevice = now.rdma->name;
    record.rdmaPort = now.rdma->port;
  }
  if (conf.pkey && now.rdma) {
    const std::string fix =
        record.guidPoolDir.empty() ? std::string() : pkeyFixForPoolGuid(record.guid, record.guidPool);
    if (auto member = checkVfPkey(ctx, *now.rdma, *conf.pkey, device.pciAddress, fix); !member) {
      return std::unexpected(member.error());
    }
  }
  if (now.rdma && now.rdma->isolate) {
    if (auto r = moveRdmaIntoPod(ctx, device.pciAddress, pod, rollback, record, ahead, now); !r) {
      return std::unexpected(r.error());
    }
  }
  return now.link;
}

cni::Result<void> applyVfioVfSettings(const ModeContext& ctx, const HostDevice& device, os::Rollback& rollback,
                                     state::AttachmentRecord& record, RecordAhead& ahead) {
  if (ctx.deps.bootId) {
    record.bootId = ctx.deps.bootId();
  }
  VfNow now{device.link, std::nullopt};
  return applyPfSettings(ctx, device, Rebind::kNo, rollback, record, ahead, now);
}

namespace {

// restoreVfSettings without the pool GUID's release.
std::vector<cni::Error> restoreVfParts(const ModeContext& ctx, const state::AttachmentRecord& record,
                                       const os::Netns* pod) {
  std::vector<cni::Error> errors;
  if (record.rdmaMoved && !record.rdmaDevice.empty() && pod != nullptr) {
    if (auto inPod = rdmaDeviceIn(ctx, *pod, record.rdmaDevice)) {
      log::info("moving RDMA device {} back to the host", record.rdmaDevice);
      if (auto r = ctx.deps.rdma.moveDevice(*pod, inPod->deviceIndex, ctx.host); !r) {
        errors.push_back(sysError(Errc::kNetlinkFailure,
                                  "cannot move RDMA device " + record.rdmaDevice + " back to the host", r.error()));
      } else if (record.pciAddress) {
        // Its IPoIB netdev is made anew in the host: wait for it before going on.
        (void)waitForNetdev(ctx, *record.pciAddress, record.hostName);
      }
    }
  }
  if (!record.pfPci || !record.vfIndex || (record.guid.empty() && !record.oldLinkState)) {
    return errors;
  }
  const std::string what = vfName(*record.pfPci, *record.vfIndex, "");
  if (!record.bootId.empty() && ctx.deps.bootId && ctx.deps.bootId() != record.bootId) {
    log::info("the node rebooted since ADD: the settings of {} were reset then; leaving them alone", what);
    return errors;
  }
  // A stale DEL must not undo what a newer attachment of the same VF set.
  auto store = ctx.deps.makeStore(ctx.inv.conf.stateDir);
  if (auto all = store->list(""); all) {
    for (const auto& other : *all) {
      if (other.pciAddress == record.pciAddress &&
          (other.containerId != record.containerId || other.ifName != record.ifName || other.network != record.network)) {
        log::warn("{} is now attached to container {}: leaving its GUID and link state alone", what,
                  other.containerId);
        return errors;
      }
    }
  }
  auto pf = pfLinkOf(ctx, *record.pfPci);
  if (!pf) {
    log::info("PF {} is gone: nothing to restore on {}", record.pfPci->text, what);
    return errors;
  }
  if (record.oldLinkState) {
    auto was = static_cast<nl::VfLinkState>(*record.oldLinkState);
    if (auto r = ctx.deps.netlink.setVfLinkState(ctx.host, pf->index, *record.vfIndex, was); !r) {
      errors.push_back(sysError(Errc::kNetlinkFailure,
                                std::string("cannot restore the link state of ") + what + " to " + linkStateName(was),
                                r.error()));
    }
  }
  if (!record.guid.empty()) {
    auto node = net::Guid::parse(record.oldNodeGuid);
    auto port = net::Guid::parse(record.oldPortGuid);
    if (!record.pciAddress) {
      errors.push_back(cni::Error{Errc::kInternal, "the record of " + what + " has no PCI address: its GUIDs cannot be restored", {}});
    } else if (node && port) {
      auto current = ctx.deps.netlink.vfInfo(ctx.host, pf->index, *record.vfIndex);
      const bool already = current && current->nodeGuid && current->portGuid &&
                           current->nodeGuid->value == node->value && current->portGuid->value == port->value;
      if (!already) {
        log::info("restoring the GUIDs of {} to {} / {}", what, node->toString(), port->toString());
        const Rebind rebind = record.mode == kVfioRecordMode ? Rebind::kNo : Rebind::kYes;
        auto more = restoreGuids(ctx, pf->index, *record.vfIndex, *node, *port, *record.pciAddress, nullptr, rebind,
                                 record.hostName);
        errors.insert(errors.end(), more.begin(), more.end());
      }
    }
  }
  return errors;
}

}  // namespace

std::vector<cni::Error> restoreVfSettings(const ModeContext& ctx, const state::AttachmentRecord& record,
                                          const os::Netns* pod) {
  std::vector<cni::Error> errors = restoreVfParts(ctx, record, pod);
  releasePoolGuid(ctx, record, errors);
  return errors;
}

cni::Result<void> checkVf(const ModeContext& ctx, const state::AttachmentRecord& record, const os::Netns& pod,
                          const nl::Link& podLink) {
  const auto& ifName = ctx.inv.args.ifName;
  if (!record.guid.empty()) {
    auto g = guidOfIpoibAddress(podLink.mac);
    if (g && g->toString() != record.guid) {
      return cni::fail(Errc::kCheckFailed,
                       ifName + " has port GUID " + g->toString() + ", but ADD set " + record.guid);
    }
  }
  if (record.rdmaMoved && !rdmaDeviceIn(ctx, pod, record.rdmaDevice)) {
    return cni::fail(Errc::kCheckFailed, "RDMA device " + record.rdmaDevice + " is no longer in netns " + pod.path());
  }
  return checkPoolGuid(ctx, record);
}

}  // namespace ibcni::plugin
