// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/net/ip.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::sysfs {

/// One port of an RDMA device, as <dev>/ports/<n>/ shows it.
struct RdmaPort {
  std::uint32_t number = 1;
  std::string linkLayer;             ///< "InfiniBand" or "Ethernet" (link_layer)
  std::string state;                 ///< "ACTIVE", "DOWN", "INIT", "ARMED" (state, without "4: ")
  std::optional<std::uint32_t> rateGbps;  ///< rate's "100 Gb/sec (4X EDR)" as 100; nullopt when unknown
  std::string portGuid;              ///< the interface half of GID 0 ("0002:c903:00a1:b2c3"), "" when unreadable
  std::string subnetPrefix;          ///< the prefix half of GID 0 ("fe80:0000:0000:0000")
};

/// An RDMA device (<root>/class/infiniband/<name>).
struct RdmaDevice {
  std::string name;
  std::string nodeGuid;              ///< node_guid ("0002:c903:00a1:b2c2")
  std::optional<net::PciAddress> pci;  ///< the PCI function it sits on, nullopt for a software device (rxe)
  std::vector<RdmaPort> ports;       ///< by number
};

/// Where a PCI function sits: what a scheduler matches to place a NIC beside a GPU.
struct PciPlacement {
  std::string pcieRoot;              ///< the root complex the function hangs below: "pci0000:3a"
  std::optional<std::int32_t> numaNode;  ///< numa_node, nullopt when the kernel says -1 or nothing
};

/// A character device of the RDMA stack (<root>/class/<class>/<name>/dev): what a container needs
/// under /dev/infiniband to use an RDMA device.
struct CharDevice {
  std::string name;        ///< "uverbs3", "umad3", "issm3", "rdma_cm"
  std::uint32_t major = 0;
  std::uint32_t minor = 0;
  bool operator==(const CharDevice&) const = default;
};

/// The character devices of one RDMA device.
struct RdmaCharDevices {
  std::optional<CharDevice> uverbs;  ///< the verbs device (infiniband_verbs), nullopt without ib_uverbs
  std::vector<CharDevice> umad;      ///< one per port (infiniband_mad umadN), by port
  std::vector<CharDevice> issm;      ///< one per port (infiniband_mad issmN), by port
};

/// What a node's InfiniBand hardware looks like in sysfs, for the DRA driver's inventory. Read from
/// the host netns (sysfs shows the netdevs and RDMA devices of the namespace it was mounted in).
class IbInventory {
 public:
  virtual ~IbInventory() = default;

  /// The names of <root>/class/infiniband/*, sorted.
  [[nodiscard]] virtual os::SysResult<std::vector<std::string>> rdmaDeviceNames() = 0;
  /// RDMA device `name` with its ports.
  /// @return ENOENT when there is no such device.
  [[nodiscard]] virtual os::SysResult<RdmaDevice> rdmaDevice(const std::string& name) = 0;
  /// Placement of PCI function `pci`.
  /// @return ENOENT when there is no such PCI function.
  [[nodiscard]] virtual os::SysResult<PciPlacement> placement(const net::PciAddress& pci) = 0;
  /// The MTU of netdev `name` (<root>/class/net/<name>/mtu).
  /// @return ENOENT when there is no such netdev.
  [[nodiscard]] virtual os::SysResult<std::uint32_t> mtu(const std::string& name) = 0;
  /// The character devices of RDMA device `name` (<root>/class/infiniband_verbs/* and
  /// <root>/class/infiniband_mad/* whose ibdev is `name`). Read them after any rebind: their
  /// numbers change when the device is made anew.
  [[nodiscard]] virtual os::SysResult<RdmaCharDevices> charDevices(const std::string& name) = 0;
  /// The RDMA connection manager's device (<root>/class/misc/rdma_cm), nullopt without rdma_ucm.
  [[nodiscard]] virtual os::SysResult<std::optional<CharDevice>> rdmaCm() = 0;
};

}  // namespace ibcni::sysfs
