// SPDX-License-Identifier: Apache-2.0
// SysfsDevices against a real kernel's /sys, inside the kernel-lab VM:
//   ../shared/kernel-lab/run.sh --nics 2 -- <build>/tests/kernel-lab/sysfs_devices_vm_test
// The VM's NICs are virtio-net PCI functions (/sys/class/net/eth0/device -> .../0000:00:06.0/
// virtio3): a PCI function handed out as deviceID, like a VF, with the virtio level in between.
// Outside the VM every test skips: the host's /sys is not ours to reason about.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "plugin/sysfs/sysfs_devices.h"
#include "vm_test_util.h"

namespace ibcni::sysfs {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;

/// A netdev of the test's netns whose device is, by the kernel's `subsystem` links, a PCI
/// function or a virtio device on one. Found without SysfsDevices, to check it against.
struct PciNetdev {
  std::string name;
  int ifIndex = 0;
  std::string pci;  ///< the function's directory name
  fs::path device;  ///< `readlink -f /sys/class/net/<name>/device`
};

using ::ibcni::testing::lab::inKernelLab;

/// The bus a device directory belongs to ("pci", "virtio", ...), empty when it has none.
std::string busOf(const fs::path& device) {
  std::error_code ec;
  auto subsystem = fs::canonical(device / "subsystem", ec);
  return ec ? std::string() : subsystem.filename().string();
}

std::vector<PciNetdev> pciNetdevs() {
  std::vector<PciNetdev> out;
  for (const auto& entry : fs::directory_iterator("/sys/class/net")) {
    const std::string name = entry.path().filename().string();
    std::error_code ec;
    fs::path device = fs::canonical(entry.path() / "device", ec);
    if (ec) {
      continue;  // no device: lo, veth, bridge
    }
    fs::path function = device;
    if (busOf(function) == "virtio") {
      function = function.parent_path();
    }
    if (busOf(function) != "pci") {
      continue;
    }
    out.push_back({name, static_cast<int>(::if_nametoindex(name.c_str())),
                   function.filename().string(), device});
  }
  return out;
}

class SysfsDevicesVmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!inKernelLab()) {
      GTEST_SKIP() << "needs the kernel-lab VM (KERNEL_LAB=1): run "
                      "../shared/kernel-lab/run.sh --nics 2 -- <this binary> from the repository";
    }
    netdevs_ = pciNetdevs();
  }

  /// Skips the calling test when the VM has no PCI NIC to check.
  void requirePciNetdevs() {
    if (netdevs_.empty()) {
      GTEST_SKIP() << "no netdev in /sys/class/net has a PCI device: boot the VM with --nics N";
    }
  }

  SysfsDevices devices_;  // the real /sys
  std::vector<PciNetdev> netdevs_;
};

TEST_F(SysfsDevicesVmTest, PciOfNetdevAgreesWithTheDeviceLink) {
  requirePciNetdevs();
  if (IsSkipped()) {
    return;
  }
  for (const auto& netdev : netdevs_) {
    ASSERT_GT(netdev.ifIndex, 0) << netdev.name;
    auto pci = devices_.pciOfNetdev(netdev.name, netdev.ifIndex);

    ASSERT_TRUE(pci.has_value()) << netdev.name << ": " << pci.error().describe();
    ASSERT_TRUE(pci->has_value()) << netdev.name << " -> " << netdev.device;
    EXPECT_EQ((*pci)->text, netdev.pci) << netdev.name << " -> " << netdev.device;
    std::cout << "pciOfNetdev(" << netdev.name << ", " << netdev.ifIndex << ") = " << (*pci)->text
              << "  (device -> " << netdev.device.string() << ")\n";
  }
}

TEST_F(SysfsDevicesVmTest, NetdevsOfPciListsEachNetdevUnderItsFunction) {
  requirePciNetdevs();
  if (IsSkipped()) {
    return;
  }
  for (const auto& netdev : netdevs_) {
    auto pci = net::PciAddress::parse(netdev.pci);
    ASSERT_TRUE(pci.has_value()) << netdev.pci;
    auto names = devices_.netdevsOfPci(*pci);

    ASSERT_TRUE(names.has_value()) << netdev.pci << ": " << names.error().describe();
    EXPECT_THAT(*names, Contains(netdev.name)) << netdev.pci;
  }
}

TEST_F(SysfsDevicesVmTest, EveryPciFunctionListsExactlyItsNetdevs) {
  std::map<std::string, std::vector<std::string>> expected;  // pci -> sorted netdevs
  for (const auto& netdev : netdevs_) {
    expected[netdev.pci].push_back(netdev.name);
  }
  int functions = 0;
  for (const auto& entry : fs::directory_iterator("/sys/bus/pci/devices")) {
    const std::string text = entry.path().filename().string();
    auto pci = net::PciAddress::parse(text);
    ASSERT_TRUE(pci.has_value()) << text;
    ASSERT_EQ(pci->text, text);  // sysfs spells PCI addresses canonically
    auto names = devices_.netdevsOfPci(*pci);

    ASSERT_TRUE(names.has_value()) << text << ": " << names.error().describe();
    auto want = expected[text];
    std::sort(want.begin(), want.end());
    EXPECT_EQ(*names, want) << text;
    ++functions;
  }
  EXPECT_GT(functions, 0);
}

TEST_F(SysfsDevicesVmTest, WrongIfIndexMeansNoAnswer) {
  requirePciNetdevs();
  if (IsSkipped()) {
    return;
  }
  for (const auto& netdev : netdevs_) {
    auto pci = devices_.pciOfNetdev(netdev.name, netdev.ifIndex + 1000);

    ASSERT_TRUE(pci.has_value()) << netdev.name << ": " << pci.error().describe();
    EXPECT_FALSE(pci->has_value()) << netdev.name;
  }
}

TEST_F(SysfsDevicesVmTest, LoopbackHasNoPciFunction) {
  auto pci = devices_.pciOfNetdev("lo", static_cast<int>(::if_nametoindex("lo")));

  ASSERT_TRUE(pci.has_value()) << pci.error().describe();
  EXPECT_FALSE(pci->has_value());
}

TEST_F(SysfsDevicesVmTest, AbsentFunctionIsEnoent) {
  auto pci = net::PciAddress::parse("ffff:ff:1f.7");
  ASSERT_TRUE(pci.has_value());
  ASSERT_FALSE(fs::exists("/sys/bus/pci/devices/ffff:ff:1f.7"));

  auto names = devices_.netdevsOfPci(*pci);

  ASSERT_FALSE(names.has_value());
  EXPECT_EQ(names.error().err, ENOENT);
}

}  // namespace
}  // namespace ibcni::sysfs
