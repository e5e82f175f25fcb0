// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ibcni/net/ip.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::sysfs {

/// Lookups of PCI functions and their network devices in sysfs. Sysfs shows the network devices of
/// the namespace it was mounted in (the host's), so call these from the host netns, before a device
/// is moved.
class Devices {
 public:
  virtual ~Devices() = default;

  /// Netdev names of PCI function `pci`: the entries of <root>/bus/pci/devices/<pci>/net/, or of
  /// <pci>/virtio*/net/ for virtio-net functions. Sorted.
  /// @return ENOENT when there is no such PCI function; an empty list when it has no netdev.
  [[nodiscard]] virtual os::SysResult<std::vector<std::string>> netdevsOfPci(const net::PciAddress& pci) = 0;

  /// The PCI function behind netdev `name`, resolved through <root>/class/net/<name>/device. The
  /// sysfs entry is only trusted when its ifindex equals `ifIndex` (sysfs may belong to another
  /// namespace than the caller's).
  /// @return nullopt when the netdev has no PCI function or sysfs does not describe this device.
  [[nodiscard]] virtual os::SysResult<std::optional<net::PciAddress>> pciOfNetdev(const std::string& name,
                                                                                int ifIndex) = 0;
};

}  // namespace ibcni::sysfs
