// SPDX-License-Identifier: Apache-2.0
// Longer than 600 lines on purpose: the VF steps of ADD, DEL and CHECK (GUIDs and rebind, link state,
// pkey table, RDMA device move) share private helpers (rebind and wait, RDMA look-ups) that one file keeps
// private to the VF.
#include "plugin/modes/sriov_vf.h"

#include <cerrno>
#include <chrono>
#include <thread>

#include "lib/log/log.h"

namespace ibcni::plugin {

namespace {

using cni::Errc;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kAllOnes = ~std::uint64_t{0};

const char* const kGuidHowTo =
    "request one with runtimeConfig.infinibandGUID (Multus network-selection \"infiniband-guid\"), "
    "args.cni.guid or CNI_ARGS GUID=..., or have ib-kubernetes or the SR-IOV network operator assign VF GUIDs";

const char* const kExclusiveHowTo =
    "switch the node to exclusive mode: add \"options ib_core netns_mode=0\" to /etc/modprobe.d/ib_core.conf and "
    "reboot (or run `rdma system set netns exclusive` while no network namespace other than the host's exists)";

bool unusableGuid(const net::Guid& g) { return g.value == 0 || g.value == kAllOnes; }

nl::VfLinkState toNl(config::VfLinkState s) {
  switch (s) {
    case config::VfLinkState::kEnable:
      return nl::VfLinkState::kEnable;
    case config::VfLinkState::kDisable:
      return nl::VfLinkState::kDisable;
    case config::VfLinkState::kAuto:
      break;
  }
  return nl::VfLinkState::kAuto;
}

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

std::string vfName(const net::PciAddress& pfPci, std::uint32_t vf, const std::string& pfName) {
  return "VF " + std::to_string(vf) + " of PF " + pfPci.text + (pfName.empty() ? "" : " (" + pfName + ")");
}

struct Guids {
  std::optional<net::Guid> node;
  std::optional<net::Guid> port;
};

// The VF's GUIDs now: as the PF reports them, else the port GUID from the netdev's address.
Guids currentGuids(const HostDevice& d) {
  Guids g;
  if (d.vf && d.vf->info) {
    g.node = d.vf->info->nodeGuid;
    g.port = d.vf->info->portGuid;
  }
  if (!g.port) {
    g.port = guidOfIpoibAddress(d.link.mac);
  }
  if (!g.node) {
    g.node = g.port;
  }
  return g;
}

// The RDMA device of `link`: RDMA netlink's own netdev mapping first (RoCE and rxe ports report
// their netdev), then the PCI function's infiniband/ directory in sysfs (IPoIB ports of an HCA do
// not report the IPoIB netdev).
std::optional<RdmaPlace> findRdma(const ModeContext& ctx, const sysfs::PciFunction* fn, const nl::Link& link) {
  auto ports = ctx.deps.rdma.ports(ctx.host);
  if (!ports) {
    log::debug("RDMA netlink: {}", ports.error().describe());
  }
  if (ports && link.index != 0) {
    for (const auto& p : *ports) {
      if (p.netdevIndex == link.index) {
        return RdmaPlace{p.deviceName, p.deviceIndex, true, p.port, false};
      }
    }
  }
  if (fn == nullptr || fn->rdmaDevices.empty()) {
    return std::nullopt;
  }
  if (fn->rdmaDevices.size() > 1) {
    log::warn("PCI function {} has several RDMA devices; using {}", fn->address.text, fn->rdmaDevices.front());
  }
  RdmaPlace place{fn->rdmaDevices.front(), 0, false, 1, false};
  if (ports) {
    for (const auto& p : *ports) {
      if (p.deviceName == place.name) {
        place.index = p.deviceIndex;
        place.visible = true;
        place.port = p.port;
        break;
      }
    }
  }
  return place;
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

// Sets `node`/`port` on the VF (an all-zero GUID is written as all ones, as ib-sriov-cni does: the
// kernel refuses zero, and all ones is what mlx5 shows for "no GUID") and rebinds it.
std::vector<cni::Error> restoreGuids(const ModeContext& ctx, int pfIndex, std::uint32_t vf, net::Guid node,
                                     net::Guid port, const net::PciAddress& pci, const nl::Link* original,
                                     const std::string& preferName = {}) {
  if (node.value == 0) {
    node.value = kAllOnes;
  }
  if (port.value == 0) {
    port.value = kAllOnes;
  }
  if (auto r = ctx.deps.netlink.setVfGuids(ctx.host, pfIndex, vf, node, port); !r) {
    return {sysError(Errc::kNetlinkFailure,
                     "cannot restore the GUIDs of VF " + std::to_string(vf) + " to " + node.toString() + " / " +
                         port.toString(),
                     r.error())};
  }
  return rebindAndRestore(ctx, pci, original, preferName);
}

// The PF's netdev in the host, found from its PCI address.
std::optional<nl::Link> pfLinkOf(const ModeContext& ctx, const net::PciAddress& pfPci) {
  auto names = ctx.deps.devices.netdevsOfPci(pfPci);
  if (!names) {
    return std::nullopt;
  }
  for (const auto& n : *names) {
    if (auto l = ctx.deps.netlink.linkByName(ctx.host, n); l) {
      return *l;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<net::Guid> guidOfIpoibAddress(const net::HwAddress& mac) {
  // "aa:bb:...": 20 octets of 3 characters (the last without ':'); the GUID is the last 8.
  if (mac.length != 20 || mac.text.size() != 59) {
    return std::nullopt;
  }
  return net::Guid::parse(std::string_view(mac.text).substr(12 * 3));
}

cni::Result<std::optional<net::Guid>> requestedGuid(const Invocation& inv) {
  if (inv.conf.runtime.infinibandGuid) {
    return inv.conf.runtime.infinibandGuid;
  }
  if (inv.conf.argsGuid) {
    return inv.conf.argsGuid;
  }
  if (!inv.cniArgs.guid.empty()) {
    auto g = config::parseVfGuid("CNI_ARGS GUID", inv.cniArgs.guid);
    if (!g) {
      return std::unexpected(g.error());
    }
    return std::optional<net::Guid>(*g);
  }
  return std::optional<net::Guid>{};
}

namespace {

// "runtimeConfig.infinibandGUID = \"c2:..\"": the field the requested GUID came from, and its value.
std::string guidField(const Invocation& inv, const net::Guid& guid) {
  const char* field = inv.conf.runtime.infinibandGuid ? "runtimeConfig.infinibandGUID"
                      : inv.conf.argsGuid             ? "args.cni.guid"
                                                      : "CNI_ARGS GUID";
  return std::string(field) + " = \"" + guid.toString() + "\"";
}

}  // namespace

cni::Result<void> resolveVf(const ModeContext& ctx, const sysfs::PciFunction* fn, HostDevice& device) {
  const auto& conf = ctx.inv.conf;
  auto& nl = ctx.deps.netlink;
  const std::string pci = fn != nullptr ? fn->address.text : "(none)";
  // How the user named the device, for messages.
  const std::string subject =
      fn != nullptr ? "deviceID = \"" + pci + "\"" : "device = \"" + device.link.name + "\"";
  auto guid = requestedGuid(ctx.inv);
  if (!guid) {
    return std::unexpected(guid.error());
  }
  const bool ib = device.link.arpType == nl::kArphrdInfiniband;

  if (fn != nullptr && fn->physfn) {
    VfPlace vf;
    vf.pfPci = *fn->physfn;
    vf.vfIndex = fn->vfIndex.value_or(0);
    if (auto pf = pfLinkOf(ctx, vf.pfPci)) {
      vf.pfLink = *pf;
    }
    if (!ib && vf.pfLink.arpType != nl::kArphrdInfiniband) {
      return cni::fail(Errc::kInvalidConfig,
                       subject + " is " + vfName(vf.pfPci, vf.vfIndex, vf.pfLink.name) +
                           ", which is not an InfiniBand PF (its netdev " + device.link.name +
                           " is not an IPoIB link): ibcni gives pods InfiniBand VFs; use sriov-cni for Ethernet "
                           "VFs, or point the network's resourceName at a pool of InfiniBand VFs");
    }
    if (vf.pfLink.index != 0) {
      if (auto info = nl.vfInfo(ctx.host, vf.pfLink.index, vf.vfIndex); info) {
        vf.info = *info;
      } else if (info.error().err != ENOENT) {
        log::debug("cannot read VF {} of {}: {}", vf.vfIndex, vf.pfLink.name, info.error().describe());
      }
    } else if (*guid || conf.linkState) {
      return cni::fail(Errc::kDeviceNotFound,
                       subject + ": its PF " + vf.pfPci.text +
                           " has no netdev in the host namespace, and VF GUIDs and link state are set through it");
    }
    vf.guid = *guid;
    device.vf = vf;
    if (!*guid) {
      auto cur = currentGuids(device);
      if (cur.port && unusableGuid(*cur.port)) {
        return cni::fail(Errc::kInvalidConfig,
                         subject + " (" + vfName(vf.pfPci, vf.vfIndex, vf.pfLink.name) +
                             ") has GUID " + cur.port->toString() +
                             " and no GUID was requested: its port would never become active. Give the VF a "
                             "GUID: " +
                             kGuidHowTo);
      }
    }
  } else if (*guid || conf.linkState) {
    return cni::fail(Errc::kInvalidConfig,
                     (*guid ? "a GUID was requested (" + guidField(ctx.inv, **guid) + ")"
                            : std::string("linkState is set")) +
                         ", but " + subject +
                         " is no SR-IOV VF (" + (fn != nullptr ? "it has no physfn" : "it has no PCI function") +
                         "): GUIDs and link state are VF settings kept by a PF; drop them to attach this device");
  }

  if (conf.mtu && device.link.maxMtu != 0 && *conf.mtu > device.link.maxMtu) {
    return cni::fail(Errc::kInvalidConfig,
                     "invalid mtu = " + std::to_string(*conf.mtu) + ": the largest MTU of " + device.link.name +
                         " (" + subject + ") is " + std::to_string(device.link.maxMtu) +
                         (ib ? " (IPoIB datagram mode: the IB port MTU minus 4)" : ""));
  }

  device.rdma = findRdma(ctx, fn, device.link);
  bool isolate = false;
  if (conf.rdmaIsolation != config::RdmaIsolation::kOff) {
    auto mode = ctx.deps.rdma.netnsMode(ctx.host);
    const bool on = conf.rdmaIsolation == config::RdmaIsolation::kOn;
    if (!mode) {
      if (on) {
        return std::unexpected(sysError(Errc::kInvalidConfig,
                                        "rdmaIsolation = true, but the RDMA subsystem's netns mode cannot be read "
                                        "through RDMA netlink: load ib_core (`modprobe ib_core`, or the HCA's RDMA "
                                        "driver, e.g. mlx5_ib) and " +
                                            std::string(kExclusiveHowTo) + "; or set rdmaIsolation to \"auto\" or false",
                                        mode.error()));
      }
      log::debug("RDMA netns mode unknown ({}): not isolating", mode.error().describe());
    } else if (*mode == rdma::NetnsMode::kShared) {
      if (on) {
        return cni::fail(Errc::kInvalidConfig,
                         "rdmaIsolation = true, but the node's RDMA subsystem is in shared netns mode, where every "
                         "pod sees every RDMA device: " +
                             std::string(kExclusiveHowTo) + "; or set rdmaIsolation to \"auto\" or false");
      }
    } else if (device.rdma) {
      isolate = true;
    } else if (on) {
      return cni::fail(Errc::kDeviceNotFound,
                       "rdmaIsolation = true, but " + subject + " (" + device.link.name +
                           ") has no RDMA device: load its RDMA driver (mlx5_ib) or set rdmaIsolation to false");
    } else if (ib) {
      log::warn("{} has no RDMA device: the pod gets no RDMA access through it", device.link.name);
    }
  }
  if (isolate) {
    if (!device.rdma->visible) {
      return cni::fail(Errc::kDeviceNotFound,
                       "RDMA device " + device.rdma->name + " of " + subject +
                           " is not in the host namespace (is it attached to another pod?)");
    }
    device.rdma->isolate = true;
  }
  if (conf.pkey && !device.rdma) {
    return cni::fail(Errc::kDeviceNotFound, "pkey is set, but " + subject + " (" + device.link.name +
                                                ") has no RDMA device whose pkey table could be checked");
  }
  return {};
}

cni::Result<nl::Link> waitForNetdev(const ModeContext& ctx, const net::PciAddress& pci, const std::string& preferName) {
  // A new netdev may be renamed by udev right after it appears: take it once it has the name it
  // had before, or once its name has stayed the same for a while.
  constexpr auto kStable = std::chrono::milliseconds(300);
  const auto deadline = Clock::now() + ctx.deps.settleTimeout;
  std::optional<nl::Link> seen;
  auto seenSince = Clock::now();
  for (;;) {
    if (auto names = ctx.deps.devices.netdevsOfPci(pci); names && !names->empty()) {
      if (auto l = ctx.deps.netlink.linkByName(ctx.host, names->front()); l) {
        if (l->name == preferName || preferName.empty()) {
          return *l;
        }
        if (!seen || seen->name != l->name || seen->index != l->index) {
          seen = *l;
          seenSince = Clock::now();
        } else if (Clock::now() - seenSince >= kStable) {
          return *l;
        }
      }
    }
    if (Clock::now() >= deadline) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (seen) {
    return *seen;
  }
  return cni::fail(Errc::kDeviceNotFound,
                   "PCI function " + pci.text + " has no netdev " +
                       std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(ctx.deps.settleTimeout).count()) +
                       " ms after its driver was rebound or its RDMA device moved");
}

cni::Result<void> checkVfPkey(const ModeContext& ctx, const RdmaPlace& rdma, net::Pkey pkey,
                              const std::optional<net::PciAddress>& pci) {
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
                       (list.empty() ? std::string("nothing") : list) +
                       "). The subnet manager assigns partitions: add the VF's GUID to that partition (e.g. in "
                       "OpenSM's partitions.conf or UFM) or use a pkey the VF has");
}

cni::Result<nl::Link> applyVfSettings(const ModeContext& ctx, const HostDevice& device, const os::Netns& pod,
                                      os::Rollback& rollback, state::AttachmentRecord& record, RecordAhead& ahead) {
  const auto& conf = ctx.inv.conf;
  auto& nl = ctx.deps.netlink;
  const os::Netns& host = ctx.host;
  const std::optional<net::PciAddress>& pci = device.pciAddress;
  nl::Link current = device.link;
  // A rebind makes the RDMA device anew too, possibly under another name (mlx5_N): `rdmaNow` is
  // the one to check and move.
  std::optional<RdmaPlace> rdmaNow = device.rdma;
  if (ctx.deps.bootId) {
    record.bootId = ctx.deps.bootId();
  }

  if (device.vf) {
    const VfPlace& vf = *device.vf;
    record.pfPci = vf.pfPci;
    record.vfIndex = vf.vfIndex;
    const std::string what = vfName(vf.pfPci, vf.vfIndex, vf.pfLink.name);
    if (!pci) {
      return cni::fail(Errc::kInternal, what + " was found without its PCI address");
    }
    const net::PciAddress& vfPci = *pci;

    const std::optional<net::Guid>& guid = vf.guid;  // validated by resolveVf
    auto cur = currentGuids(device);
    if (guid && !(cur.node == guid && cur.port == guid)) {
      const net::Guid oldNode = cur.node.value_or(net::Guid{0});
      const net::Guid oldPort = cur.port.value_or(net::Guid{0});
      log::info("setting the node and port GUID of {} to {} (was {} / {})", what, guid->toString(),
                oldNode.toString(), oldPort.toString());
      record.guid = guid->toString();
      record.oldNodeGuid = oldNode.toString();
      record.oldPortGuid = oldPort.toString();
      if (auto r = ahead.save(); !r) {
        return std::unexpected(r.error());
      }
      if (auto r = nl.setVfGuids(host, vf.pfLink.index, vf.vfIndex, *guid, *guid); !r) {
        return std::unexpected(sysError(Errc::kNetlinkFailure,
                                        "cannot set GUID " + guid->toString() + " on " + what +
                                            (r.error().err == EOPNOTSUPP
                                                 ? ": the PF's driver cannot set VF GUIDs (kernel >= 5.6 with mlx5 "
                                                   "is needed)"
                                                 : ""),
                                        r.error()));
      }
      rollback.add("restore the GUIDs of " + what,
                   [&ctx, pfIndex = vf.pfLink.index, vfIndex = vf.vfIndex, oldNode, oldPort, vfPci,
                    original = device.link]() -> os::SysResult<void> {
                     auto errors = restoreGuids(ctx, pfIndex, vfIndex, oldNode, oldPort, vfPci, &original);
                     if (!errors.empty()) {
                       return os::sysFail(EIO, combine(errors).msg);
                     }
                     return {};
                   });
      // mlx5 applies a VF's new GUIDs when the VF is next bound to its driver.
      if (auto r = ctx.deps.devices.rebind(vfPci); !r) {
        return std::unexpected(sysError(Errc::kNetlinkFailure,
                                        "cannot rebind " + vfPci.text + " to its driver so that its new GUID takes effect",
                                        r.error()));
      }
      auto fresh = waitForNetdev(ctx, vfPci, device.link.name);
      if (!fresh) {
        return std::unexpected(fresh.error());
      }
      current = *fresh;
      if (rdmaNow) {
        auto fn = ctx.deps.devices.pciFunction(vfPci);
        auto found = findRdma(ctx, fn ? &*fn : nullptr, current);
        if (!found || (rdmaNow->isolate && !found->visible)) {
          return cni::fail(Errc::kDeviceNotFound, "the RDMA device of " + vfPci.text + " (" + rdmaNow->name +
                                                      ") did not come back after the VF was rebound");
        }
        if (found->name != rdmaNow->name) {
          log::info("the VF's RDMA device is now {} (was {})", found->name, rdmaNow->name);
        }
        found->isolate = rdmaNow->isolate;
        rdmaNow = found;
      }
    }

    if (conf.linkState) {
      const nl::VfLinkState want = toNl(*conf.linkState);
      const nl::VfLinkState was = vf.info && vf.info->linkState ? *vf.info->linkState : nl::VfLinkState::kAuto;
      if (want != was) {
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
      }
    }
  }

  if (rdmaNow) {
    record.rdmaDevice = rdmaNow->name;
    record.rdmaPort = rdmaNow->port;
  }
  if (conf.pkey && rdmaNow) {
    if (auto member = checkVfPkey(ctx, *rdmaNow, *conf.pkey, pci); !member) {
      return std::unexpected(member.error());
    }
  }

  if (rdmaNow && rdmaNow->isolate) {
    const RdmaPlace& r = *rdmaNow;
    log::info("moving RDMA device {} into netns {}", r.name, pod.path());
    record.rdmaMoved = true;
    if (auto s = ahead.save(); !s) {
      return std::unexpected(s.error());
    }
    if (auto m = ctx.deps.rdma.moveDevice(host, r.index, pod); !m) {
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
      return cni::fail(Errc::kInternal, "RDMA device " + r.name + " moved, but its interface " + current.name +
                                            " has no PCI function to wait for");
    }
    auto fresh = waitForNetdev(ctx, *pci, current.name);
    if (!fresh) {
      return std::unexpected(fresh.error());
    }
    current = *fresh;
  }
  return current;
}

std::vector<cni::Error> restoreVfSettings(const ModeContext& ctx, const state::AttachmentRecord& record,
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
        auto more = restoreGuids(ctx, pf->index, *record.vfIndex, *node, *port, *record.pciAddress, nullptr,
                                 record.hostName);
        errors.insert(errors.end(), more.begin(), more.end());
      }
    }
  }
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
  return {};
}

}  // namespace ibcni::plugin
