// SPDX-License-Identifier: Apache-2.0
// The dra tests' devices: discoverDevices over a FakeSysfsTree (read by the production sysfs
// readers), and VFs made up directly.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "fakes/fake_sysfs_tree.h"
#include "plugin/dra/ib_devices.h"
#include "plugin/sysfs/sysfs_devices.h"
#include "plugin/sysfs/sysfs_inventory.h"

namespace ibcni::dra {

/// The devices `sys` offers (a failure is a test failure and no device).
inline std::vector<IbDevice> discoverIn(const testing::FakeSysfsTree& sys) {
  sysfs::SysfsDevices devices(sys.root());
  sysfs::SysfsInventory inventory(sys.root());
  auto found = discoverDevices(devices, inventory);
  EXPECT_TRUE(found) << found.error().describe();
  return found.value_or(std::vector<IbDevice>{});
}

/// Their names, in order.
inline std::vector<std::string> namesOf(const std::vector<IbDevice>& devices) {
  std::vector<std::string> out;
  for (const auto& d : devices) {
    out.push_back(d.name);
  }
  return out;
}

/// VF `n` of PF 0000:3b:00.0 as discovery would find it: ACTIVE, with a GUID, on pci0000:3a.
inline IbDevice vf(int n) {
  IbDevice d;
  d.kind = DeviceKind::kVf;
  char text[16];
  std::snprintf(text, sizeof text, "0000:%02x:%02x.%x", 0x3b + n / 256, (n / 8) % 32, n % 8);
  d.pci = net::PciAddress::parse(text).value();
  d.name = deviceName(d.kind, d.pci);
  d.driver = "mlx5_core";
  d.pfPci = net::PciAddress::parse("0000:3b:00.0").value();
  d.pfName = "ib0";
  d.vfIndex = static_cast<std::uint32_t>(n);
  d.rdmaDevice = "mlx5_" + std::to_string(n + 1);
  d.ifName = "ib" + std::to_string(n + 1);
  d.placement = {"pci0000:3a", 1};
  d.linkLayer = "InfiniBand";
  d.portState = "ACTIVE";
  d.rateGbps = 200;
  d.mtu = 4092;
  d.nodeGuid = "0200:0000:0000:0a01";
  d.portGuid = "0200:0000:0000:0a02";
  d.guidSet = true;
  return d;
}

/// VFs 0 .. count-1.
inline std::vector<IbDevice> vfs(int count) {
  std::vector<IbDevice> out;
  for (int i = 0; i < count; ++i) {
    out.push_back(vf(i));
  }
  return out;
}

}  // namespace ibcni::dra
