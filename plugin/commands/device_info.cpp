// SPDX-License-Identifier: Apache-2.0
#include "plugin/commands/device_info.h"

#include "ibcni/os/safe_path.h"
#include "lib/log/log.h"
#include "plugin/state/device_info_pci.h"

namespace ibcni::plugin {

namespace {

const char* const kField = "runtimeConfig.CNIDeviceInfoFile";

cni::Error pathError(const std::string& path, const os::SysError& err, const std::string& doing) {
  if (os::isRefusal(err)) {
    return cni::Error{cni::Errc::kInvalidConfig,
                      std::string("invalid ") + kField + " = " + cni::quoted(path, 256) + ": " + err.op +
                          " (docs/security.md; Multus names /var/run/k8s.cni.cncf.io/devinfo/cni/<file>)",
                      {}};
  }
  return cni::sysError(cni::Errc::kStateFailure, "cannot " + doing + " the device-info file " + cni::quoted(path, 256) +
                                                     " (" + kField + ")",
                       err);
}

}  // namespace

cni::Result<std::optional<net::PciAddress>> deviceIdFromInfoFile(const Invocation& inv) {
  const auto& c = inv.conf;
  const std::string& path = c.runtime.deviceInfoFile;
  if (path.empty()) {
    return std::optional<net::PciAddress>{};
  }
  const bool named = c.deviceId || c.mode == config::Mode::kIpoib || !c.device.empty();
  auto fromFile = state::readDeviceInfoPci(path, !named);
  if (!fromFile) {
    return std::unexpected(fromFile.error());
  }
  if (!*fromFile || c.mode == config::Mode::kIpoib) {
    return std::optional<net::PciAddress>{};
  }
  if (c.deviceId && **fromFile != *c.deviceId) {
    return cni::fail(cni::Errc::kInvalidConfig, "deviceID = \"" + c.deviceId->text + "\" but the device-info file " +
                                                    cni::quoted(path, 256) + " (" + kField + ") names " +
                                                    (*fromFile)->text +
                                                    ": the device plugin and the configuration disagree");
  }
  if (!c.device.empty()) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     "both deviceID = \"" + (*fromFile)->text + "\" (from the device-info file " + cni::quoted(path, 256) +
                         ") and device = \"" + c.device +
                         "\" are set: select the device one way only (deviceID is what Multus injects from the "
                         "NetworkAttachmentDefinition's resourceName)");
  }
  if (c.deviceId) {
    return std::optional<net::PciAddress>{};  // the file names the deviceID the invocation has
  }
  return *fromFile;
}

cni::Result<bool> deviceInfoToWrite(const Invocation& inv, Deps& deps) {
  const std::string& path = inv.conf.runtime.deviceInfoFile;
  if (path.empty() || deps.deviceInfo == nullptr) {
    return false;
  }
  auto presence = deps.deviceInfo->check(path);
  if (!presence) {
    return std::unexpected(pathError(path, presence.error(), "look at"));
  }
  return *presence == state::DeviceInfoFiles::Presence::kAbsent;
}

cni::Result<void> writeDeviceInfo(const Invocation& inv, Deps& deps, state::AttachmentRecord& record,
                                  os::Rollback& rollback) {
  const std::string& path = inv.conf.runtime.deviceInfoFile;
  std::optional<net::PciAddress> pci = record.pciAddress;
  if (!pci && inv.conf.mode == config::Mode::kIpoib) {
    // The child's traffic goes through its parent's function (and its RDMA device).
    if (auto parent = deps.devices.pciOfNetdev(record.hostName, record.hostIndex); parent) {
      pci = *parent;
    }
  }
  if (!pci) {
    log::warn("{} has no PCI function: no device-info file written at {} (the spec requires pci-address)",
              record.hostName, path);
    return {};
  }
  state::DeviceInfo info;
  info.pciAddress = *pci;
  info.pfPciAddress = record.pfPci;
  if (!info.pfPciAddress) {
    if (auto fn = deps.devices.pciFunction(*pci); fn && fn->physfn) {
      info.pfPciAddress = fn->physfn;
    }
  }
  info.rdmaDevice = record.rdmaDevice;
  auto written = deps.deviceInfo->create(path, info);
  if (!written) {
    return std::unexpected(pathError(path, written.error(), "write"));
  }
  if (!*written) {
    log::info("a device-info file appeared at {} meanwhile: it is kept as it is", path);
    return {};
  }
  record.deviceInfoFile = path;
  rollback.add("remove the device-info file " + path, [&deps, path] { return deps.deviceInfo->remove(path); });
  log::info("wrote the device-info file {} ({}{})", path, info.pciAddress.text,
            info.rdmaDevice.empty() ? std::string() : ", RDMA device " + info.rdmaDevice);
  return {};
}

void removeDeviceInfo(Deps& deps, const state::AttachmentRecord& record) {
  if (record.deviceInfoFile.empty() || deps.deviceInfo == nullptr) {
    return;
  }
  if (auto r = deps.deviceInfo->remove(record.deviceInfoFile); !r) {
    log::warn("cannot remove the device-info file {}: {}", record.deviceInfoFile, r.error().describe());
  }
}

}  // namespace ibcni::plugin
