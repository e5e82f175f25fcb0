// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/net/ip.h"
#include "ibcni/os/sys_error.h"
#include "ibcni/sysfs/devices.h"
#include "plugin/sysfs/sysfs_paths.h"

namespace ibcni::sysfs {

/// `Devices` over a sysfs tree mounted at `root` ("/sys" in production, a FakeSysfsTree in tests).
/// Sysfs shows the network devices of the netns it was mounted in: call from the host netns.
class SysfsDevices final : public Devices {
 public:
  /// @param root the sysfs mount point; nothing is opened until a lookup.
  explicit SysfsDevices(std::string root = "/sys");

  /// Netdevs of `pci`: <root>/bus/pci/devices/<pci>/net/* plus <pci>/virtio<N>/net/* (virtio-net
  /// puts its netdev under the virtio device that the PCI function carries). Netdevs of auxiliary
  /// devices below the function (mlx5 SFs) are not the function's and are not listed.
  /// @return sorted names; EINVAL when `pci` is not canonical or an entry is not an interface
  ///         name; ENOENT when there is no such PCI function; empty when it has no netdev (no
  ///         driver, vfio-pci, ...).
  [[nodiscard]] os::SysResult<std::vector<std::string>> netdevsOfPci(
      const net::PciAddress& pci) override;

  /// The PCI function of netdev `name`: <root>/class/net/<name>/device resolved, and either that
  /// device itself or, for a virtio<N> device, its parent must be a PCI function.
  /// @return nullopt when sysfs has no netdev `name`, its ifindex is not `ifIndex`, it has no
  ///         device (veth, bridge, lo) or the device is no PCI function (USB, auxiliary, ...);
  ///         EINVAL when `name` is not an interface name or the ifindex file is garbage.
  [[nodiscard]] os::SysResult<std::optional<net::PciAddress>> pciOfNetdev(const std::string& name,
                                                                          int ifIndex) override;

  /// physfn and virtfnN links, the driver link, netdevs and <pci>/infiniband/*.
  [[nodiscard]] os::SysResult<PciFunction> pciFunction(const net::PciAddress& pci) override;
  /// <root>/bus/pci/devices/<pci>/driver resolved, its last component.
  [[nodiscard]] os::SysResult<std::string> driverOf(const net::PciAddress& pci) override;
  /// Reads <root>/class/infiniband/<dev>/ports/<port>/pkeys/* ("0xffff" each).
  [[nodiscard]] os::SysResult<std::vector<net::Pkey>> pkeys(const std::string& rdmaDevice, std::uint32_t port) override;
  /// <root>/class/infiniband/<dev> resolved; the netdevs of the device two levels up, by dev_port.
  [[nodiscard]] os::SysResult<std::vector<std::string>> netdevsOfRdmaPort(const std::string& rdmaDevice,
                                                                          std::uint32_t port) override;
  /// Writes the address to <root>/bus/pci/drivers/<drv>/unbind, then .../bind.
  [[nodiscard]] os::SysResult<void> rebind(const net::PciAddress& pci) override;

  /// The sysfs root this instance reads.
  [[nodiscard]] const std::string& root() const noexcept { return root_; }

 private:
  std::string root_;
};

}  // namespace ibcni::sysfs
