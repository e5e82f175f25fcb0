// SPDX-License-Identifier: Apache-2.0
#include "plugin/modes/sriov_vfio.h"

#include <cerrno>

#include "lib/log/log.h"
#include "plugin/modes/device_holders.h"
#include "plugin/modes/record_ahead.h"
#include "plugin/modes/sriov_vf.h"
#include "plugin/modes/sriov_vf_guid_pool.h"
#include "plugin/modes/sriov_vf_lookup.h"

namespace ibcni::plugin {

namespace {

using cni::Errc;

// deviceID as the configuration (or the device-info file) gave it, for messages.
std::string subjectOf(const net::PciAddress& pci) { return "deviceID = \"" + pci.text + "\""; }

// The function behind deviceID, bound to vfio-pci. `vfio: true` with a device named by netdev, a
// function that is gone, or one bound to another driver (or rebound while ADD waited for its lock)
// is refused.
cni::Result<sysfs::PciFunction> vfioFunction(const ModeContext& ctx) {
  const auto& conf = ctx.inv.conf;
  if (!conf.deviceId) {
    return cni::fail(Errc::kInvalidConfig,
                     "vfio = true, but the device is selected by device = \"" + conf.device +
                         "\", a netdev name: a VF bound to vfio-pci has no netdev; select it by deviceID (the "
                         "VF's PCI address, which Multus injects from the network's resourceName)");
  }
  const std::string subject = subjectOf(*conf.deviceId);
  auto fn = deviceIdFunction(ctx, *conf.deviceId);
  if (!fn) {
    return std::unexpected(fn.error());
  }
  if (!SriovVfioMode::isVfioDriver(fn->driver)) {
    const std::string bound = subject + " is bound to " +
                              (fn->driver.empty() ? std::string("no driver") : fn->driver) + ", not vfio-pci";
    return cni::fail(Errc::kDeviceNotFound,
                     conf.vfio == config::VfioUse::kOn
                         ? bound + ", and this network gives VMs their VFs (\"vfio\": true): have the device "
                                   "plugin's resource for this network select VFs bound to vfio-pci, or set vfio "
                                   "to \"auto\""
                         : bound + " any more: it was rebound while this ADD waited for it; retry");
  }
  if (!fn->vfs.empty()) {
    return cni::fail(Errc::kInvalidConfig,
                     subject + " is the SR-IOV PF of " + std::to_string(fn->vfs.size()) +
                         " VFs: passing it to a VM would take the port of every VF with it; give the VM one of its "
                         "VFs, or disable SR-IOV on the PF (sriov_numvfs = 0) to pass it through whole");
  }
  return std::move(*fn);
}

// What applies to a pod's netdev and not to a VF in a VM is refused with the reason (error 7): the
// guest configures its interface, and nothing of the VF is in the pod.
cni::Result<void> refusePodSettings(const ModeContext& ctx, const std::string& subject) {
  const auto& conf = ctx.inv.conf;
  const std::string vm = subject + " is bound to vfio-pci: the VF goes to a VM, whose guest configures its interface";
  if (!conf.ipamType.empty()) {
    return cni::fail(Errc::kInvalidConfig,
                     "ipam (type \"" + conf.ipamType + "\") is set, but " + vm +
                         " (an address allocated here would never be on it); remove ipam from this network and "
                         "give the guest its address (cloud-init), or use a network without ipam for VMs");
  }
  if (conf.mtu) {
    return cni::fail(Errc::kInvalidConfig,
                     "mtu = " + std::to_string(*conf.mtu) + " is set, but " + vm +
                         " and sets its MTU; remove mtu from this network");
  }
  if (conf.runtime.mac || !ctx.inv.cniArgs.mac.empty()) {
    return cni::fail(Errc::kInvalidConfig, "a MAC address is requested, but " + vm +
                                               ", and an InfiniBand VF has no MAC to set; drop the mac request");
  }
  if (conf.rdmaIsolation == config::RdmaIsolation::kOn) {
    return cni::fail(Errc::kInvalidConfig,
                     "rdmaIsolation = true, but " + vm +
                         ": the host has no RDMA device of it to move (the guest's mlx5_ib makes its own); set "
                         "rdmaIsolation to \"auto\" or false");
  }
  if (conf.policyRouting) {
    return cni::fail(Errc::kInvalidConfig, "policyRouting is set, but " + vm +
                                               " and its routing; remove policyRouting from this network");
  }
  if (conf.verbsCheck.mode == config::VerbsCheck::Mode::kRequire) {
    return cni::fail(Errc::kInvalidConfig,
                     "verbsCheck.mode = \"require\", but " + vm +
                         ": the host has no RDMA device of it to probe (run the check in the guest); set "
                         "verbsCheck to \"warn\" or \"off\" for this network");
  }
  return {};
}

// Another attachment that holds `pci` (device_holders.h: a VF given to a VM stays in the host,
// bound to vfio-pci, whether a VM has it or not). A holder whose pod netns is gone does not hold it:
// its late DEL (or `ibcni reconcile`) leaves the VF's settings to the newer attachment, which
// restores the GUIDs that holder replaced (in `device.vf`).
cni::Result<void> refuseHeld(const ModeContext& ctx, HostDevice& device, const std::string& subject) {
  const net::PciAddress& pci = *device.pciAddress;
  const Invocation& inv = ctx.inv;
  auto records = ctx.deps.makeStore(inv.conf.stateDir)->list("");
  if (!records) {
    return std::unexpected(sysError(Errc::kStateFailure,
                                    "cannot read the attachment records in stateDir = " + inv.conf.stateDir,
                                    records.error()));
  }
  const DeviceHolders holders = deviceHolders(
      inv, ctx.deps, *records, [&pci](const state::AttachmentRecord& r) { return r.pciAddress == pci; });
  if (holders.holder() != nullptr) {
    return std::unexpected(busyWith(subject, holders));
  }
  for (const auto* r : holders.gone) {
    log::info("{} was attached to container {}, whose netns is gone: taking it", subject, r->containerId);
    auto node = net::Guid::parse(r->oldNodeGuid);
    auto port = net::Guid::parse(r->oldPortGuid);
    if (device.vf && !r->guid.empty() && node && port) {
      device.vf->guidsBeforeDeadHolder = std::pair{*node, *port};
    }
  }
  return {};
}

}  // namespace

bool SriovVfioMode::isVfioDriver(std::string_view driver) {
  return driver == "vfio-pci" || driver.ends_with("_vfio_pci") || driver.ends_with("-vfio-pci");
}

cni::Result<HostDevice> SriovVfioMode::resolve(const ModeContext& ctx) {
  auto fn = vfioFunction(ctx);
  if (!fn) {
    return std::unexpected(fn.error());
  }
  const std::string subject = subjectOf(fn->address);
  if (auto r = refusePodSettings(ctx, subject); !r) {
    return std::unexpected(r.error());
  }
  HostDevice dev;
  dev.pciAddress = fn->address;
  dev.deviceKey = deviceKeyFromConfig(ctx);  // deviceID is the function's address
  if (auto r = resolveVfioFunction(ctx, *fn, dev); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = refuseHeld(ctx, dev, subject); !r) {
    return std::unexpected(r.error());
  }
  if (ctx.inv.conf.pkey) {
    // mlx5 shows no VF's pkey table in the host (the guest's port has it): the SM's partitions for
    // the VF's GUID decide, as they do for a pod's VF.
    log::info("{}: pkey {} is not checked for a VF bound to vfio-pci (its pkey table is the guest's to see)",
              subject, ctx.inv.conf.pkey->hex());
  }
  return dev;
}

cni::Result<nl::Link> SriovVfioMode::setUp(const ModeContext& ctx, const HostDevice& device, const os::Netns& pod,
                                           os::Rollback& rollback, state::AttachmentRecord& record) {
  record.mode = std::string(kVfioRecordMode);
  record.pciAddress = device.pciAddress;
  record.deviceKey = device.deviceKey;
  if (device.vf) {
    RecordAhead ahead(ctx, record, rollback);
    if (auto r = applyVfioVfSettings(ctx, device, rollback, record, ahead); !r) {
      return std::unexpected(r.error());
    }
  }
  log::info("{} stays bound to vfio-pci for the VM of netns {} ({})", device.pciAddress->text, pod.path(),
            ctx.inv.args.ifName);
  return nl::Link{};
}

cni::Result<void> SriovVfioMode::tearDown(const ModeContext& ctx, const state::AttachmentRecord& record,
                                          const os::Netns* /*pod*/) {
  // Nothing is in the pod: the VF's settings on its PF are all there is to put back.
  auto errors = restoreVfSettings(ctx, record, nullptr);
  if (!errors.empty()) {
    return std::unexpected(combine(errors));
  }
  return {};
}

bool SriovVfioMode::awaitsReturn(const ModeContext& /*ctx*/, const state::AttachmentRecord& /*record*/) {
  return false;
}

cni::Result<void> SriovVfioMode::check(const ModeContext& ctx, const state::AttachmentRecord& record,
                                       const os::Netns& /*pod*/, const nl::Link& /*podLink*/) {
  if (!record.pciAddress) {
    return cni::fail(Errc::kCheckFailed, "the record of " + ctx.inv.args.ifName + " has no PCI address");
  }
  const std::string& pci = record.pciAddress->text;
  auto driver = ctx.deps.devices.driverOf(*record.pciAddress);
  if (!driver) {
    return std::unexpected(sysError(Errc::kCheckFailed, "the VM's VF " + pci + " is gone", driver.error()));
  }
  if (!isVfioDriver(*driver)) {
    return cni::fail(Errc::kCheckFailed, "the VM's VF " + pci + " is bound to " +
                                             (driver->empty() ? std::string("no driver") : *driver) +
                                             " now, not vfio-pci: the VM no longer has it");
  }
  if (!record.guid.empty() && record.pfPci && record.vfIndex) {
    const std::string what = vfName(*record.pfPci, *record.vfIndex, "");
    auto pf = pfLinkOf(ctx, *record.pfPci);
    auto info = pf ? ctx.deps.netlink.vfInfo(ctx.host, pf->index, *record.vfIndex)
                   : os::SysResult<nl::VfInfo>(os::sysFail(ENODEV, "PF " + record.pfPci->text + " has no netdev"));
    if (!info) {
      return std::unexpected(sysError(Errc::kCheckFailed, "cannot read the GUIDs of " + what, info.error()));
    }
    for (const auto& [name, g] : {std::pair{"node", info->nodeGuid}, std::pair{"port", info->portGuid}}) {
      if (g && g->toString() != record.guid) {
        return cni::fail(Errc::kCheckFailed,
                         what + " has " + name + " GUID " + g->toString() + ", but ADD set " + record.guid);
      }
    }
  }
  return checkPoolGuid(ctx, record);
}

std::optional<state::AttachmentRecord> SriovVfioMode::recover(const ModeContext& /*ctx*/,
                                                              const nl::Link& /*podLink*/) {
  return std::nullopt;
}

std::string SriovVfioMode::deviceKeyFromConfig(const ModeContext& ctx) {
  return modeFor(config::Mode::kSriov).deviceKeyFromConfig(ctx);
}

}  // namespace ibcni::plugin
