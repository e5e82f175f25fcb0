// SPDX-License-Identifier: Apache-2.0
// The devices ibcni-dra offers on a node: every SR-IOV VF of an InfiniBand PF (one pod each) and
// every InfiniBand port of a PF that has an IPoIB netdev (shared: pkey children for many pods),
// with what a scheduler matches them on, read from sysfs.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ibcni/net/ip.h"
#include "ibcni/os/sys_error.h"
#include "ibcni/sysfs/devices.h"
#include "ibcni/sysfs/ib_inventory.h"

namespace ibcni::dra {

enum class DeviceKind {
  kVf,         ///< an SR-IOV VF of an InfiniBand PF, handed to one pod (sriov mode)
  kIpoibPort,  ///< a PF's InfiniBand port with its IPoIB netdev, shared by pkey children (ipoib mode)
};

/// "vf" or "ipoib-port": the value of the device's `kind` attribute.
[[nodiscard]] const char* kindName(DeviceKind kind);

struct IbDevice {
  DeviceKind kind = DeviceKind::kVf;
  std::string name;                ///< the device's name in its ResourceSlice (a DNS label)
  net::PciAddress pci;             ///< the VF's function; the PF's for a port
  std::string driver;              ///< bound driver ("mlx5_core", "vfio-pci"), "" when unbound
  net::PciAddress pfPci;           ///< the PF (itself for a port)
  std::string pfName;              ///< the PF's netdev of this port, "" when it has none
  std::optional<std::uint32_t> vfIndex;  ///< N of the PF's virtfnN (VFs only)
  std::string rdmaDevice;          ///< the function's RDMA device, "" when it has none (vfio-pci, unbound)
  std::string ifName;              ///< the function's netdev (the port's IPoIB netdev), "" when none
  std::uint32_t port = 1;          ///< the RDMA port
  sysfs::PciPlacement placement;
  std::string linkLayer;           ///< of the port ("InfiniBand")
  std::string portState;           ///< "ACTIVE", "DOWN", ...; the PF port's when the VF shows none
  std::optional<std::uint32_t> rateGbps;
  std::optional<std::uint32_t> mtu;  ///< of ifName
  std::string nodeGuid;            ///< "0002:c903:00a1:b2c2"; "" when unknown (no RDMA device)
  std::string portGuid;            ///< the interface half of GID 0; "" when unknown
  /// The VF has a GUID of its own: a node GUID that is neither unknown nor all zero (ports: always).
  bool guidSet = false;
};

/// The device name of PCI function `pci` in a slice: "vf-0000-3b-00-2" for a VF,
/// "ipoib-0000-3b-00-0-p1" for port 1 of a PF (DNS labels, stable across netdev renames).
[[nodiscard]] std::string deviceName(DeviceKind kind, const net::PciAddress& pci, std::uint32_t port = 1);

/// Every InfiniBand VF and IPoIB port sysfs shows, sorted by name. RDMA devices whose ports are
/// not InfiniBand (RoCE, rxe) offer nothing; a PF's VFs are listed whatever they are bound to,
/// so that a VF bound to vfio-pci or to no driver is offered too (without RDMA device or GUID).
[[nodiscard]] os::SysResult<std::vector<IbDevice>> discoverDevices(sysfs::Devices& devices,
                                                                   sysfs::IbInventory& inventory);

/// The same, of the devices named in `only` (null: all): a VF not named is not read (Prepare reads
/// the claim's devices, not the whole node). The same device reads the same either way.
[[nodiscard]] os::SysResult<std::vector<IbDevice>> discoverDevices(sysfs::Devices& devices,
                                                                   sysfs::IbInventory& inventory,
                                                                   const std::set<std::string>* only);

}  // namespace ibcni::dra
