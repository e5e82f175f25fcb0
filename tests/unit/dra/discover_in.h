// SPDX-License-Identifier: Apache-2.0
// discoverDevices over a FakeSysfsTree, read by the production sysfs readers, for the dra tests.
#pragma once

#include <gtest/gtest.h>

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

}  // namespace ibcni::dra
