// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/net/ip.h"
#include "ibcni/net/pkey.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::sysfs {

/// One VF of a PF: N of its <pf>/virtfnN link and the function that link points to.
struct VirtFn {
  std::uint32_t index = 0;
  net::PciAddress address;
};

/// A PCI function as sysfs describes it: what an SR-IOV VF handed out as deviceID resolves to.
struct PciFunction {
  net::PciAddress address;
  std::optional<net::PciAddress> physfn;  ///< the PF, when this is an SR-IOV VF (<pci>/physfn)
  std::optional<std::uint32_t> vfIndex;   ///< N of the PF's virtfnN link that points here
  std::string driver;                     ///< bound driver ("mlx5_core", "vfio-pci"), empty when none
  std::vector<std::string> netdevs;       ///< as netdevsOfPci
  std::vector<std::string> rdmaDevices;   ///< RDMA devices of the function (<pci>/infiniband/*), sorted
  std::vector<VirtFn> vfs;                ///< on a PF: its VFs, by N (empty for a VF or without SR-IOV)
};

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

  /// Everything sysfs says about PCI function `pci` that an SR-IOV attachment needs.
  /// @return ENOENT when there is no such PCI function.
  [[nodiscard]] virtual os::SysResult<PciFunction> pciFunction(const net::PciAddress& pci) = 0;

  /// The driver PCI function `pci` is bound to ("mlx5_core", "vfio-pci"): one readlink, for the
  /// choice of a mode before the function is read in full.
  /// @return "" when it is bound to none; ENOENT when there is no such PCI function.
  [[nodiscard]] virtual os::SysResult<std::string> driverOf(const net::PciAddress& pci) = 0;

  /// The partition keys in port `port`'s pkey table of RDMA device `rdmaDevice`
  /// (<root>/class/infiniband/<dev>/ports/<port>/pkeys/<i>), with the membership bit, in table
  /// order; empty entries (0x0000) are left out. Only RDMA devices of the caller's netns are shown.
  /// @return ENOENT when there is no such device or port.
  [[nodiscard]] virtual os::SysResult<std::vector<net::Pkey>> pkeys(const std::string& rdmaDevice,
                                                                    std::uint32_t port) = 0;

  /// The netdevs of port `port` of RDMA device `rdmaDevice`: the netdevs of the device it sits on
  /// (<root>/class/infiniband/<dev>/../../net/*) whose dev_port is `port` - 1 (a missing dev_port
  /// counts as 0). Sorted. This is how an IPoIB parent is found when its name differs per node.
  /// @return ENOENT when there is no such RDMA device.
  [[nodiscard]] virtual os::SysResult<std::vector<std::string>> netdevsOfRdmaPort(const std::string& rdmaDevice,
                                                                                  std::uint32_t port) = 0;

  /// Unbinds PCI function `pci` from its driver and binds it again (<root>/bus/pci/drivers/<drv>/
  /// unbind, then bind), as mlx5 needs for a new VF GUID to take effect. The function's netdev and
  /// RDMA device are destroyed and made anew, possibly under other names.
  /// @return EINVAL when the function has no driver; the errno of a failed write otherwise.
  [[nodiscard]] virtual os::SysResult<void> rebind(const net::PciAddress& pci) = 0;
};

}  // namespace ibcni::sysfs
