// SPDX-License-Identifier: Apache-2.0
// The VF part of sriov mode's resolve: what was asked (a GUID, a link state, an MTU, RDMA
// isolation, a pkey) judged against the VF, its PF and its RDMA device, before anything changes.
#include <cerrno>

#include "lib/log/log.h"
#include "plugin/modes/sriov_vf.h"
#include "plugin/modes/sriov_vf_guid_pool.h"
#include "plugin/modes/sriov_vf_lookup.h"

namespace ibcni::plugin {

namespace {

using cni::Errc;

const char* const kGuidHowTo =
    "request one with runtimeConfig.infinibandGUID (Multus network-selection \"infiniband-guid\"), "
    "args.cni.guid or CNI_ARGS GUID=..., or have ib-kubernetes or the SR-IOV network operator assign VF GUIDs";

const char* const kExclusiveHowTo =
    "switch the node to exclusive mode: add \"options ib_core netns_mode=0\" to /etc/modprobe.d/ib_core.conf and "
    "reboot (or run `rdma system set netns exclusive` while no network namespace other than the host's exists)";

// "runtimeConfig.infinibandGUID = \"c2:..\"": the field the requested GUID came from, and its value.
std::string guidField(const Invocation& inv, const net::Guid& guid) {
  return std::string(requestedGuidField(inv)) + " = \"" + guid.toString() + "\"";
}

// The VF `fn` in `device.vf`: its place on its PF, what the PF reports of it, the GUID requested
// for it. A VF of a non-InfiniBand PF is refused, and so are VF settings when its PF has no netdev
// to set them through.
cni::Result<void> placeVf(const ModeContext& ctx, const sysfs::PciFunction& fn, HostDevice& device,
                          const std::string& subject, const std::optional<net::Guid>& guid, bool ib) {
  VfPlace vf;
  vf.pfPci = *fn.physfn;
  vf.vfIndex = fn.vfIndex.value_or(0);
  if (auto pf = pfLinkOf(ctx, vf.pfPci)) {
    vf.pfLink = *pf;
  }
  if (!ib && vf.pfLink.arpType != nl::kArphrdInfiniband) {
    return cni::fail(Errc::kInvalidConfig,
                     subject + " is " + vfName(vf.pfPci, vf.vfIndex, vf.pfLink.name) +
                         ", which is not an InfiniBand PF (its netdev " +
                         (device.link.name.empty() ? vf.pfLink.name : device.link.name) +
                         " is not an IPoIB link): ibcni gives pods InfiniBand VFs; use sriov-cni for Ethernet "
                         "VFs, or point the network's resourceName at a pool of InfiniBand VFs");
  }
  if (vf.pfLink.index != 0) {
    if (auto info = ctx.deps.netlink.vfInfo(ctx.host, vf.pfLink.index, vf.vfIndex); info) {
      vf.info = *info;
    } else if (info.error().err != ENOENT) {
      log::debug("cannot read VF {} of {}: {}", vf.vfIndex, vf.pfLink.name, info.error().describe());
    }
  } else if (guid || ctx.inv.conf.linkState || guidPoolOf(ctx.inv.conf) != nullptr) {
    return cni::fail(Errc::kDeviceNotFound,
                     subject + ": its PF " + vf.pfPci.text +
                         " has no netdev in the host namespace, and VF GUIDs and link state are set through it");
  }
  vf.guid = guid;
  device.vf = vf;
  return {};
}

// With no GUID requested, the VF keeps the one it has: an unusable one is refused.
cni::Result<void> refuseUnusableGuid(const HostDevice& device, const std::string& subject) {
  const VfPlace& vf = *device.vf;
  auto cur = currentGuids(device);
  if (cur.port && unusableGuid(*cur.port)) {
    return cni::fail(Errc::kInvalidConfig,
                     subject + " (" + vfName(vf.pfPci, vf.vfIndex, vf.pfLink.name) +
                         ") has GUID " + cur.port->toString() +
                         " and no GUID was requested: its port would never become active. Give the VF a "
                         "GUID: " +
                         kGuidHowTo);
  }
  return {};
}

// A GUID or a link state asked of a device that is no SR-IOV VF.
std::unexpected<cni::Error> vfSettingsOnNoVf(const Invocation& inv, const sysfs::PciFunction* fn,
                                             const std::string& subject, const std::optional<net::Guid>& guid) {
  const std::string asked = guid                 ? "a GUID was requested (" + guidField(inv, *guid) + ")"
                            : inv.conf.linkState ? std::string("linkState is set")
                                                 : std::string("guidPool is set");
  return cni::fail(Errc::kInvalidConfig,
                   asked + ", but " + subject + " is no SR-IOV VF (" +
                       (fn != nullptr ? "it has no physfn" : "it has no PCI function") +
                       "): GUIDs and link state are VF settings kept by a PF; drop them to attach this device");
}

// The configured MTU is within the device's maximum.
cni::Result<void> checkMaxMtu(const config::NetConf& conf, const HostDevice& device, const std::string& subject,
                              bool ib) {
  if (conf.mtu && device.link.maxMtu != 0 && *conf.mtu > device.link.maxMtu) {
    return cni::fail(Errc::kInvalidConfig,
                     "invalid mtu = " + std::to_string(*conf.mtu) + ": the largest MTU of " + device.link.name +
                         " (" + subject + ") is " + std::to_string(device.link.maxMtu) +
                         (ib ? " (IPoIB datagram mode: the IB port MTU minus 4)" : ""));
  }
  return {};
}

// Whether ADD is to move the device's RDMA device into the pod: rdmaIsolation against the node's
// RDMA netns mode. rdmaIsolation true is refused where it cannot be done.
cni::Result<bool> isolationWanted(const ModeContext& ctx, const HostDevice& device, const std::string& subject,
                                  bool ib) {
  const auto& conf = ctx.inv.conf;
  if (conf.rdmaIsolation == config::RdmaIsolation::kOff) {
    return false;
  }
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
    return false;
  }
  if (*mode == rdma::NetnsMode::kShared) {
    if (on) {
      return cni::fail(Errc::kInvalidConfig,
                       "rdmaIsolation = true, but the node's RDMA subsystem is in shared netns mode, where every "
                       "pod sees every RDMA device: " +
                           std::string(kExclusiveHowTo) + "; or set rdmaIsolation to \"auto\" or false");
    }
    return false;
  }
  if (device.rdma) {
    return true;
  }
  if (on) {
    return cni::fail(Errc::kDeviceNotFound,
                     "rdmaIsolation = true, but " + subject + " (" + device.link.name +
                         ") has no RDMA device: load its RDMA driver (mlx5_ib) or set rdmaIsolation to false");
  }
  if (ib) {
    log::warn("{} has no RDMA device: the pod gets no RDMA access through it", device.link.name);
  }
  return false;
}

// The device's RDMA device in `device.rdma`, marked to move into the pod when it is to be isolated.
// A device to isolate must be in the host namespace, and a pkey needs an RDMA device to check.
cni::Result<void> placeRdma(const ModeContext& ctx, const sysfs::PciFunction* fn, HostDevice& device,
                            const std::string& subject, bool ib) {
  device.rdma = findRdma(ctx, fn, device.link);
  auto isolate = isolationWanted(ctx, device, subject, ib);
  if (!isolate) {
    return std::unexpected(isolate.error());
  }
  if (*isolate) {
    if (!device.rdma->visible) {
      return cni::fail(Errc::kDeviceNotFound,
                       "RDMA device " + device.rdma->name + " of " + subject +
                           " is not in the host namespace (is it attached to another pod?)");
    }
    device.rdma->isolate = true;
  }
  if (ctx.inv.conf.pkey && !device.rdma) {
    return cni::fail(Errc::kDeviceNotFound, "pkey is set, but " + subject + " (" + device.link.name +
                                                ") has no RDMA device whose pkey table could be checked");
  }
  return {};
}

}  // namespace

const char* requestedGuidField(const Invocation& inv) {
  return inv.conf.runtime.infinibandGuid ? "runtimeConfig.infinibandGUID"
         : inv.conf.argsGuid             ? "args.cni.guid"
                                         : "CNI_ARGS GUID";
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

cni::Result<void> resolveVfioFunction(const ModeContext& ctx, const sysfs::PciFunction& fn, HostDevice& device) {
  const std::string subject = "deviceID = \"" + fn.address.text + "\"";
  auto guid = requestedGuid(ctx.inv);
  if (!guid) {
    return std::unexpected(guid.error());
  }
  if (!fn.physfn) {
    if (*guid || ctx.inv.conf.linkState || guidPoolOf(ctx.inv.conf) != nullptr) {
      return vfSettingsOnNoVf(ctx.inv, &fn, subject, *guid);
    }
    return {};
  }
  // Without a netdev of the VF's own, the PF's tells whether this is InfiniBand, and it is the
  // netdev the VF's settings are made through (and DEL's restore).
  if (!pfLinkOf(ctx, *fn.physfn)) {
    return cni::fail(Errc::kDeviceNotFound,
                     subject + " is bound to " + fn.driver + ", and its PF " + fn.physfn->text +
                         " has no netdev in the host namespace: ibcni sets and restores a VM's VF's GUID and link "
                         "state through it (bind the PF to its driver, mlx5_core)");
  }
  if (auto r = placeVf(ctx, fn, device, subject, *guid, /*ib=*/false); !r) {
    return r;
  }
  if (auto r = choosePoolGuid(ctx, device); !r) {
    return r;
  }
  if (!*guid && !device.vf->guidFromPool) {
    return refuseUnusableGuid(device, subject);
  }
  return {};
}

// The VF (when `fn` is one), then the MTU, then the RDMA device.
cni::Result<void> resolveVf(const ModeContext& ctx, const sysfs::PciFunction* fn, HostDevice& device) {
  // How the user named the device, for messages.
  const std::string subject =
      fn != nullptr ? "deviceID = \"" + fn->address.text + "\"" : "device = \"" + device.link.name + "\"";
  auto guid = requestedGuid(ctx.inv);
  if (!guid) {
    return std::unexpected(guid.error());
  }
  const bool ib = device.link.arpType == nl::kArphrdInfiniband;
  if (fn != nullptr && fn->physfn) {
    if (auto r = placeVf(ctx, *fn, device, subject, *guid, ib); !r) {
      return r;
    }
    if (auto r = choosePoolGuid(ctx, device); !r) {
      return r;
    }
    if (!*guid && !device.vf->guidFromPool) {
      if (auto r = refuseUnusableGuid(device, subject); !r) {
        return r;
      }
    }
  } else if (*guid || ctx.inv.conf.linkState || guidPoolOf(ctx.inv.conf) != nullptr) {
    return vfSettingsOnNoVf(ctx.inv, fn, subject, *guid);
  }
  if (auto r = checkMaxMtu(ctx.inv.conf, device, subject, ib); !r) {
    return r;
  }
  return placeRdma(ctx, fn, device, subject, ib);
}

}  // namespace ibcni::plugin
