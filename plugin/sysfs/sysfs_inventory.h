// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ibcni/sysfs/ib_inventory.h"

namespace ibcni::sysfs {

/// `IbInventory` over a sysfs tree mounted at `root` ("/sys" in production, a FakeSysfsTree in tests).
class SysfsInventory final : public IbInventory {
 public:
  /// @param root the sysfs mount point; nothing is opened until a lookup.
  explicit SysfsInventory(std::string root = "/sys");

  /// <root>/class/infiniband/*, sorted; empty when the folder is missing (no RDMA core loaded).
  [[nodiscard]] os::SysResult<std::vector<std::string>> rdmaDeviceNames() override;
  /// node_guid, the PCI function it sits on (none for rxe, siw) and <dev>/ports/*: link_layer, state,
  /// rate and GID 0 of each. A port attribute the kernel does not show is left empty.
  [[nodiscard]] os::SysResult<RdmaDevice> rdmaDevice(const std::string& name) override;
  /// <root>/bus/pci/devices/<pci> resolved: the "pci<domain>:<bus>" folder below devices/ it hangs
  /// from, and its numa_node.
  [[nodiscard]] os::SysResult<PciPlacement> placement(const net::PciAddress& pci) override;
  /// <root>/class/net/<name>/mtu.
  [[nodiscard]] os::SysResult<std::uint32_t> mtu(const std::string& name) override;
  [[nodiscard]] os::SysResult<RdmaCharDevices> charDevices(const std::string& name) override;
  [[nodiscard]] os::SysResult<std::optional<CharDevice>> rdmaCm() override;

 private:
  [[nodiscard]] os::SysResult<RdmaPort> port(const std::string& portDir, std::uint32_t number);
  /// <root>/class/<cls>/<name>: its dev ("231:192"); nullopt when it has none.
  [[nodiscard]] os::SysResult<std::optional<CharDevice>> charDevice(const std::string& cls, const std::string& name);

  std::string root_;
};

/// The Gb/s of a port's rate attribute ("100 Gb/sec (4X EDR)" -> 100, "2.5 Gb/sec (1X SDR)" -> 2):
/// whole Gb/s, rounded down; nullopt when it does not start with a number and " Gb/sec".
[[nodiscard]] std::optional<std::uint32_t> parseRateGbps(std::string_view rate);

/// A dev attribute ("231:192") as its numbers; nullopt when it is not one.
[[nodiscard]] std::optional<std::pair<std::uint32_t, std::uint32_t>> parseDevNumbers(std::string_view dev);

/// A port's state attribute without its number ("4: ACTIVE" -> "ACTIVE"); the text itself when it
/// has no "N: " prefix.
[[nodiscard]] std::string parsePortState(std::string_view state);

}  // namespace ibcni::sysfs
