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

/// PF 0000:3b:00.0 (ib0, mlx5_0) with eight VFs 0000:3b:01.0-7 (ibN / mlx5_N for VF N-1), each
/// ACTIVE with a GUID and its uverbs and umad character devices, and misc/rdma_cm.
inline void addEightVfs(testing::FakeSysfsTree& sys) {
  sys.addPf("0000:3b:00.0", "ib0", "mlx5_0", 8)
      .setNodeGuid("mlx5_0", "0002:c903:00a1:b2c2")
      .setRdmaPort("mlx5_0", 1, "InfiniBand", "4: ACTIVE", "200 Gb/sec (4X HDR)",
                   "fe80:0000:0000:0000:0002:c903:00a1:b2c2");
  for (int n = 0; n < 8; ++n) {
    const std::string rdma = "mlx5_" + std::to_string(n + 1);
    sys.addVf("0000:3b:00.0", n, "0000:3b:01." + std::to_string(n), "ib" + std::to_string(n + 1), rdma)
        .setNodeGuid(rdma, "0200:0000:0000:0a0" + std::to_string(n))
        .setRdmaPort(rdma, 1, "InfiniBand", "4: ACTIVE", "200 Gb/sec (4X HDR)",
                     "fe80:0000:0000:0000:0002:c903:00a1:b3c" + std::to_string(n))
        .addCharDevice("infiniband_verbs", "uverbs" + std::to_string(n + 1), rdma, 0, 231, 193 + n)
        .addCharDevice("infiniband_mad", "umad" + std::to_string(n + 1), rdma, 1, 231, 1 + n);
  }
  sys.addCharDevice("misc", "rdma_cm", "", 0, 10, 58);
}

/// The device name of VF `n` of addEightVfs ("vf-0000-3b-01-<n>").
inline std::string eightVfsName(int n) { return "vf-0000-3b-01-" + std::to_string(n); }

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
