// SPDX-License-Identifier: Apache-2.0
// SysfsInventory over FakeSysfsTree layouts: RDMA devices and their ports, PCI placement, MTUs.
#include "plugin/sysfs/sysfs_inventory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "fakes/fake_sysfs_tree.h"

namespace ibcni::sysfs {
namespace {

using ::ibcni::testing::FakeSysfsTree;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

net::PciAddress pci(const char* text) { return net::PciAddress::parse(text).value(); }

TEST(ParseRateGbps, TakesTheWholeGbPerSecond) {
  EXPECT_EQ(parseRateGbps("100 Gb/sec (4X EDR)"), 100U);
  EXPECT_EQ(parseRateGbps("400 Gb/sec (4X NDR)"), 400U);
  EXPECT_EQ(parseRateGbps("2.5 Gb/sec (1X SDR)"), 2U);
  EXPECT_EQ(parseRateGbps("13.64 Gb/sec (1X FDR)"), 13U);
  EXPECT_EQ(parseRateGbps(""), std::nullopt);
  EXPECT_EQ(parseRateGbps("fast"), std::nullopt);
  EXPECT_EQ(parseRateGbps("100 Mb/sec"), std::nullopt);
  EXPECT_EQ(parseRateGbps("100"), std::nullopt);
}

TEST(ParsePortState, DropsTheNumber) {
  EXPECT_EQ(parsePortState("4: ACTIVE"), "ACTIVE");
  EXPECT_EQ(parsePortState("1: DOWN"), "DOWN");
  EXPECT_EQ(parsePortState("ACTIVE"), "ACTIVE");
  EXPECT_EQ(parsePortState("x: ACTIVE"), "x: ACTIVE");
  EXPECT_EQ(parsePortState(""), "");
}

class SysfsInventoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sys_.addPf("0000:3b:00.0", "ib0", "mlx5_0", 1)
        .setNodeGuid("mlx5_0", "0002:c903:00a1:b2c2")
        .setRdmaPort("mlx5_0", 1, "InfiniBand", "4: ACTIVE", "200 Gb/sec (4X HDR)",
                     "fe80:0000:0000:0000:0002:c903:00a1:b2c3")
        .setNumaNode("0000:3b:00.0", 1)
        .setMtu("ib0", 4092)
        .addVf("0000:3b:00.0", 0, "0000:3b:00.2", "ib1", "mlx5_1")
        .setNodeGuid("mlx5_1", "0000:0000:0000:0000")
        .setRdmaPort("mlx5_1", 1, "InfiniBand", "1: DOWN", "10 Gb/sec (4X SDR)",
                     "fe80:0000:0000:0000:0000:0000:0000:0000")
        .addRdmaDevice("0001:5e:00.0", "mlx5_2")
        .setNodeGuid("mlx5_2", "0002:c903:00a1:c000")
        .setRdmaPort("mlx5_2", 1, "Ethernet", "4: ACTIVE", "100 Gb/sec (4X EDR)",
                     "fe80:0000:0000:0000:0202:c9ff:fea1:c000")
        .setRdmaPort("mlx5_2", 2, "InfiniBand", "4: ACTIVE", "100 Gb/sec (4X EDR)",
                     "fe80:0000:0000:0000:0002:c903:00a1:c001")
        .setNumaNode("0001:5e:00.0", -1)
        .makeDir("devices/virtual/infiniband/rxe0")
        .makeSymlink("class/infiniband/rxe0", "../../devices/virtual/infiniband/rxe0")
        .setNodeGuid("rxe0", "5054:00ff:fe12:3456");
    ASSERT_TRUE(sys_.ok()) << sys_.error();
  }

  FakeSysfsTree sys_;
  SysfsInventory inv_{sys_.root()};
};

TEST_F(SysfsInventoryTest, ListsTheRdmaDevicesSorted) {
  EXPECT_THAT(inv_.rdmaDeviceNames().value(), ElementsAre("mlx5_0", "mlx5_1", "mlx5_2", "rxe0"));
}

TEST_F(SysfsInventoryTest, NoInfinibandFolderIsNoDevice) {
  FakeSysfsTree empty;
  empty.removePath("class/infiniband");
  ASSERT_TRUE(empty.ok()) << empty.error();
  EXPECT_THAT(SysfsInventory(empty.root()).rdmaDeviceNames().value(), IsEmpty());
}

TEST_F(SysfsInventoryTest, ReadsADeviceWithItsPciFunctionAndPort) {
  auto d = inv_.rdmaDevice("mlx5_0");
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->name, "mlx5_0");
  EXPECT_EQ(d->nodeGuid, "0002:c903:00a1:b2c2");
  EXPECT_EQ(d->pci, pci("0000:3b:00.0"));
  ASSERT_EQ(d->ports.size(), 1U);
  EXPECT_EQ(d->ports[0].number, 1U);
  EXPECT_EQ(d->ports[0].linkLayer, "InfiniBand");
  EXPECT_EQ(d->ports[0].state, "ACTIVE");
  EXPECT_EQ(d->ports[0].rateGbps, 200U);
  EXPECT_EQ(d->ports[0].portGuid, "0002:c903:00a1:b2c3");
  EXPECT_EQ(d->ports[0].subnetPrefix, "fe80:0000:0000:0000");
}

TEST_F(SysfsInventoryTest, ReadsEveryPortInOrder) {
  auto d = inv_.rdmaDevice("mlx5_2");
  ASSERT_TRUE(d) << d.error().describe();
  ASSERT_EQ(d->ports.size(), 2U);
  EXPECT_EQ(d->ports[0].linkLayer, "Ethernet");
  EXPECT_EQ(d->ports[1].number, 2U);
  EXPECT_EQ(d->ports[1].portGuid, "0002:c903:00a1:c001");
}

TEST_F(SysfsInventoryTest, ASoftwareDeviceHasNoPciFunctionAndMissingAttributesAreEmpty) {
  auto d = inv_.rdmaDevice("rxe0");
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->pci, std::nullopt);
  EXPECT_THAT(d->ports, IsEmpty());
  sys_.writeFile("devices/virtual/infiniband/rxe0/ports/1/state", "4: ACTIVE\n");
  d = inv_.rdmaDevice("rxe0");
  ASSERT_TRUE(d) << d.error().describe();
  ASSERT_EQ(d->ports.size(), 1U);
  EXPECT_EQ(d->ports[0].state, "ACTIVE");
  EXPECT_EQ(d->ports[0].linkLayer, "");
  EXPECT_EQ(d->ports[0].rateGbps, std::nullopt);
  EXPECT_EQ(d->ports[0].portGuid, "");
}

TEST_F(SysfsInventoryTest, RefusesUnknownAndUnsafeNames) {
  EXPECT_EQ(inv_.rdmaDevice("mlx5_9").error().err, ENOENT);
  EXPECT_EQ(inv_.rdmaDevice("../mlx5_0").error().err, EINVAL);
  EXPECT_EQ(inv_.rdmaDevice("").error().err, EINVAL);
  EXPECT_EQ(inv_.mtu("../ib0").error().err, EINVAL);
  EXPECT_EQ(inv_.placement(net::PciAddress{"3b:00.0"}).error().err, EINVAL);
}

TEST_F(SysfsInventoryTest, PlacementIsTheRootBelowDevicesAndTheNumaNode) {
  auto pf = inv_.placement(pci("0000:3b:00.0"));
  ASSERT_TRUE(pf) << pf.error().describe();
  EXPECT_EQ(pf->pcieRoot, "pci0000:00");
  EXPECT_EQ(pf->numaNode, 1);
  auto other = inv_.placement(pci("0001:5e:00.0"));
  ASSERT_TRUE(other) << other.error().describe();
  EXPECT_EQ(other->pcieRoot, "pci0001:00");
  EXPECT_EQ(other->numaNode, std::nullopt);  // -1
  auto vf = inv_.placement(pci("0000:3b:00.2"));
  ASSERT_TRUE(vf) << vf.error().describe();
  EXPECT_EQ(vf->pcieRoot, "pci0000:00");
  EXPECT_EQ(vf->numaNode, std::nullopt);  // no numa_node file
  EXPECT_EQ(inv_.placement(pci("0000:99:00.0")).error().err, ENOENT);
}

TEST_F(SysfsInventoryTest, PlacementBelowABridgeIsItsRoot) {
  sys_.addPciFunction("0002:00:01.0").addPciFunction("0002:17:00.0", "0002:00:01.0").setNumaNode("0002:17:00.0", 3);
  ASSERT_TRUE(sys_.ok()) << sys_.error();
  auto p = inv_.placement(pci("0002:17:00.0"));
  ASSERT_TRUE(p) << p.error().describe();
  EXPECT_EQ(p->pcieRoot, "pci0002:00");
  EXPECT_EQ(p->numaNode, 3);
}

TEST_F(SysfsInventoryTest, ReadsMtu) {
  EXPECT_EQ(inv_.mtu("ib0"), 4092U);
  EXPECT_EQ(inv_.mtu("ib9").error().err, ENOENT);
  sys_.setMtu("ib1", 0).writeFile(sys_.netdevDirOrEmpty("ib1") + "/mtu", "big\n");
  EXPECT_EQ(inv_.mtu("ib1").error().err, EINVAL);
}

TEST(ParseDevNumbers, TakesMajorAndMinor) {
  EXPECT_EQ(parseDevNumbers("231:192"), std::pair(231U, 192U));
  EXPECT_EQ(parseDevNumbers("10:58"), std::pair(10U, 58U));
  EXPECT_EQ(parseDevNumbers("231"), std::nullopt);
  EXPECT_EQ(parseDevNumbers("231:"), std::nullopt);
  EXPECT_EQ(parseDevNumbers(":1"), std::nullopt);
  EXPECT_EQ(parseDevNumbers("a:b"), std::nullopt);
}

TEST_F(SysfsInventoryTest, FindsTheCharacterDevicesOfAnRdmaDevice) {
  sys_.addCharDevice("infiniband_verbs", "uverbs0", "mlx5_0", 0, 231, 192)
      .addCharDevice("infiniband_verbs", "uverbs1", "mlx5_1", 0, 231, 193)
      .addCharDevice("infiniband_mad", "umad0", "mlx5_0", 1, 231, 0)
      .addCharDevice("infiniband_mad", "issm0", "mlx5_0", 1, 231, 64)
      .addCharDevice("infiniband_mad", "umad1", "mlx5_1", 1, 231, 1)
      .addCharDevice("infiniband_mad", "issm1", "mlx5_1", 1, 231, 65)
      .addCharDevice("infiniband_mad", "umad2", "mlx5_1", 2, 231, 2)
      .addCharDevice("misc", "rdma_cm", "", 0, 10, 58);
  ASSERT_TRUE(sys_.ok()) << sys_.error();
  auto c = inv_.charDevices("mlx5_1");
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->uverbs, (CharDevice{"uverbs1", 231, 193}));
  EXPECT_THAT(c->umad, ElementsAre(CharDevice{"umad1", 231, 1}, CharDevice{"umad2", 231, 2}));
  EXPECT_THAT(c->issm, ElementsAre(CharDevice{"issm1", 231, 65}));
  EXPECT_EQ(inv_.rdmaCm().value(), (CharDevice{"rdma_cm", 10, 58}));
}

TEST_F(SysfsInventoryTest, NoCharacterDeviceModulesIsNoDevice) {
  auto c = inv_.charDevices("mlx5_0");
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->uverbs, std::nullopt);
  EXPECT_THAT(c->umad, IsEmpty());
  EXPECT_EQ(inv_.rdmaCm().value(), std::nullopt);
  EXPECT_EQ(inv_.charDevices("../x").error().err, EINVAL);
  sys_.writeFile("class/misc/rdma_cm/dev", "ten\n");
  EXPECT_EQ(inv_.rdmaCm().error().err, EINVAL);
}

}  // namespace
}  // namespace ibcni::sysfs
