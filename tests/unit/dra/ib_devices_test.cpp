// SPDX-License-Identifier: Apache-2.0
// discoverDevices over FakeSysfsTree layouts read by the production sysfs readers: which VFs and
// IPoIB ports a node offers, and what each says about itself.
#include "plugin/dra/ib_devices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "plugin/sysfs/sysfs_devices.h"
#include "plugin/sysfs/sysfs_inventory.h"
#include "unit/dra/dra_devices.h"
#include "fakes/fake_sysfs_tree.h"

namespace ibcni::dra {
namespace {

using ::ibcni::testing::FakeSysfsTree;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr const char* kGid = "fe80:0000:0000:0000:";

net::PciAddress pci(const char* text) { return net::PciAddress::parse(text).value(); }

class IbDevicesTest : public ::testing::Test {
 protected:
  /// An InfiniBand PF with IPoIB netdev ib0 on NUMA node 1 and two VFs: VF 0 bound to mlx5_core
  /// with a GUID, VF 1 bound to vfio-pci (no netdev, no RDMA device).
  void SetUp() override {
    sys_.addPf("0000:3b:00.0", "ib0", "mlx5_0", 2)
        .setNodeGuid("mlx5_0", "0002:c903:00a1:b2c2")
        .setRdmaPort("mlx5_0", 1, "InfiniBand", "4: ACTIVE", "200 Gb/sec (4X HDR)",
                     std::string(kGid) + "0002:c903:00a1:b2c3")
        .setNumaNode("0000:3b:00.0", 1)
        .setMtu("ib0", 4092)
        .addVf("0000:3b:00.0", 0, "0000:3b:00.2", "ib1", "mlx5_1")
        .setNodeGuid("mlx5_1", "0200:0000:0000:0a01")
        .setRdmaPort("mlx5_1", 1, "InfiniBand", "4: ACTIVE", "200 Gb/sec (4X HDR)",
                     std::string(kGid) + "0200:0000:0000:0a02")
        .setNumaNode("0000:3b:00.2", 1)
        .setMtu("ib1", 2044)
        .addVf("0000:3b:00.0", 1, "0000:3b:00.3", "", "")
        .setDriver("0000:3b:00.3", "vfio-pci")
        .setNumaNode("0000:3b:00.3", 1);
    ASSERT_TRUE(sys_.ok()) << sys_.error();
  }

  std::vector<IbDevice> discover() { return discoverIn(sys_); }

  FakeSysfsTree sys_;
};

TEST(DeviceName, IsADnsLabelOfThePciAddress) {
  EXPECT_EQ(deviceName(DeviceKind::kVf, pci("0000:3b:00.2")), "vf-0000-3b-00-2");
  EXPECT_EQ(deviceName(DeviceKind::kIpoibPort, pci("0000:3b:00.0"), 2), "ipoib-0000-3b-00-0-p2");
}

TEST_F(IbDevicesTest, OffersTheIpoibPortAndEveryVfSortedByName) {
  EXPECT_THAT(namesOf(discover()), ElementsAre("ipoib-0000-3b-00-0-p1", "vf-0000-3b-00-2", "vf-0000-3b-00-3"));
}

// Prepare reads only the claim's devices: those named, each as the whole node's discovery reads it.
TEST_F(IbDevicesTest, OnlyTheNamedDevicesAreReadAndReadTheSame) {
  const std::vector<IbDevice> all = discover();
  sysfs::SysfsDevices devices(sys_.root());
  sysfs::SysfsInventory inventory(sys_.root());
  const std::set<std::string> only = {"vf-0000-3b-00-3", "ipoib-0000-3b-00-0-p1"};
  auto some = discoverDevices(devices, inventory, &only);
  ASSERT_TRUE(some) << some.error().describe();
  EXPECT_THAT(namesOf(*some), ElementsAre("ipoib-0000-3b-00-0-p1", "vf-0000-3b-00-3"));
  for (const auto& d : *some) {
    auto same = std::find_if(all.begin(), all.end(), [&](const IbDevice& a) { return a.name == d.name; });
    ASSERT_NE(same, all.end());
    EXPECT_EQ(same->pci.text, d.pci.text);
    EXPECT_EQ(same->pfName, d.pfName);
    EXPECT_EQ(same->vfIndex, d.vfIndex);
    EXPECT_EQ(same->driver, d.driver);
    EXPECT_EQ(same->linkLayer, d.linkLayer);
    EXPECT_EQ(same->portState, d.portState);
    EXPECT_EQ(same->nodeGuid, d.nodeGuid);
    EXPECT_EQ(same->placement.numaNode, d.placement.numaNode);
  }
  const std::set<std::string> none = {"vf-0000-99-00-1"};
  EXPECT_THAT(namesOf(*discoverDevices(devices, inventory, &none)), IsEmpty());
}

TEST_F(IbDevicesTest, AVfSaysWhereItSitsAndWhatItIs) {
  auto devices = discover();
  ASSERT_EQ(devices.size(), 3U);
  const IbDevice& vf = devices[1];
  EXPECT_EQ(vf.kind, DeviceKind::kVf);
  EXPECT_EQ(vf.pci, pci("0000:3b:00.2"));
  EXPECT_EQ(vf.driver, "mlx5_core");
  EXPECT_EQ(vf.pfPci, pci("0000:3b:00.0"));
  EXPECT_EQ(vf.pfName, "ib0");
  EXPECT_EQ(vf.vfIndex, 0U);
  EXPECT_EQ(vf.rdmaDevice, "mlx5_1");
  EXPECT_EQ(vf.ifName, "ib1");
  EXPECT_EQ(vf.mtu, 2044U);
  EXPECT_EQ(vf.placement.pcieRoot, "pci0000:00");
  EXPECT_EQ(vf.placement.numaNode, 1);
  EXPECT_EQ(vf.linkLayer, "InfiniBand");
  EXPECT_EQ(vf.portState, "ACTIVE");
  EXPECT_EQ(vf.rateGbps, 200U);
  EXPECT_EQ(vf.nodeGuid, "0200:0000:0000:0a01");
  EXPECT_EQ(vf.portGuid, "0200:0000:0000:0a02");
  EXPECT_TRUE(vf.guidSet);
}

TEST_F(IbDevicesTest, AVfWithoutRdmaDeviceTakesItsLinkFromThePfAndHasNoGuid) {
  auto devices = discover();
  ASSERT_EQ(devices.size(), 3U);
  const IbDevice& vf = devices[2];
  EXPECT_EQ(vf.driver, "vfio-pci");
  EXPECT_EQ(vf.vfIndex, 1U);
  EXPECT_EQ(vf.rdmaDevice, "");
  EXPECT_EQ(vf.ifName, "");
  EXPECT_EQ(vf.mtu, std::nullopt);
  EXPECT_EQ(vf.linkLayer, "InfiniBand");
  EXPECT_EQ(vf.portState, "ACTIVE");
  EXPECT_EQ(vf.rateGbps, 200U);
  EXPECT_EQ(vf.nodeGuid, "");
  EXPECT_FALSE(vf.guidSet);
}

TEST_F(IbDevicesTest, AnAllZeroGuidIsUnset) {
  sys_.setNodeGuid("mlx5_1", "0000:0000:0000:0000");
  auto devices = discover();
  ASSERT_EQ(devices.size(), 3U);
  EXPECT_EQ(devices[1].nodeGuid, "0000:0000:0000:0000");
  EXPECT_FALSE(devices[1].guidSet);
}

TEST_F(IbDevicesTest, TheIpoibPortIsThePfsNetdev) {
  auto devices = discover();
  ASSERT_FALSE(devices.empty());
  const IbDevice& port = devices[0];
  EXPECT_EQ(port.kind, DeviceKind::kIpoibPort);
  EXPECT_EQ(port.pci, pci("0000:3b:00.0"));
  EXPECT_EQ(port.port, 1U);
  EXPECT_EQ(port.ifName, "ib0");
  EXPECT_EQ(port.rdmaDevice, "mlx5_0");
  EXPECT_EQ(port.mtu, 4092U);
  EXPECT_EQ(port.portGuid, "0002:c903:00a1:b2c3");
  EXPECT_EQ(port.vfIndex, std::nullopt);
  EXPECT_TRUE(port.guidSet);
}

TEST_F(IbDevicesTest, APfWithoutIpoibNetdevStillOffersItsVfs) {
  sys_.removeNetdev("ib0");
  ASSERT_TRUE(sys_.ok()) << sys_.error();
  auto devices = discover();
  EXPECT_THAT(namesOf(devices), ElementsAre("vf-0000-3b-00-2", "vf-0000-3b-00-3"));
  EXPECT_EQ(devices[0].pfName, "");
  EXPECT_EQ(devices[1].portState, "ACTIVE");
}

TEST_F(IbDevicesTest, EthernetPortsAndSoftwareDevicesOfferNothing) {
  sys_.addPf("0000:5e:00.0", "ens5", "mlx5_4", 1)
      .setNodeGuid("mlx5_4", "0002:c903:00a1:c000")
      .setRdmaPort("mlx5_4", 1, "Ethernet", "4: ACTIVE", "100 Gb/sec (4X EDR)", std::string(kGid) + "0202:c9ff:fea1:c000")
      .addVf("0000:5e:00.0", 0, "0000:5e:00.2", "ens5v0", "mlx5_5")
      .setNodeGuid("mlx5_5", "0000:0000:0000:0000")
      .makeDir("devices/virtual/infiniband/rxe0")
      .makeSymlink("class/infiniband/rxe0", "../../devices/virtual/infiniband/rxe0")
      .setNodeGuid("rxe0", "5054:00ff:fe12:3456")
      .setRdmaPort("rxe0", 1, "Ethernet", "4: ACTIVE", "10 Gb/sec (1X QDR)", std::string(kGid) + "5054:00ff:fe12:3456");
  ASSERT_TRUE(sys_.ok()) << sys_.error();
  EXPECT_THAT(namesOf(discover()), ElementsAre("ipoib-0000-3b-00-0-p1", "vf-0000-3b-00-2", "vf-0000-3b-00-3"));
}

TEST_F(IbDevicesTest, APortThatIsDownIsSaidSo) {
  sys_.setRdmaPort("mlx5_0", 1, "InfiniBand", "1: DOWN", "10 Gb/sec (4X SDR)", std::string(kGid) + "0002:c903:00a1:b2c3");
  auto devices = discover();
  ASSERT_EQ(devices.size(), 3U);
  EXPECT_EQ(devices[0].portState, "DOWN");
  EXPECT_EQ(devices[2].portState, "DOWN");  // the vfio VF's link is its PF's
  EXPECT_EQ(devices[1].portState, "ACTIVE");  // VF 0 shows its own port
}

TEST_F(IbDevicesTest, NoRdmaDeviceIsNoDevice) {
  FakeSysfsTree empty;
  ASSERT_TRUE(empty.ok()) << empty.error();
  EXPECT_THAT(discoverIn(empty), IsEmpty());
}

}  // namespace
}  // namespace ibcni::dra
