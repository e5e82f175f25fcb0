// SPDX-License-Identifier: Apache-2.0
// Longer than 600 lines on purpose: one suite of small cases over FakeSysfsTree layouts (PF/VF, mlx5,
// RDMA ports, drivers), each case a few lines; split, the layouts would be repeated.
#include "plugin/sysfs/sysfs_devices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fakes/fake_sysfs_tree.h"

namespace ibcni::sysfs {
namespace {

using ::ibcni::testing::FakeSysfsTree;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

namespace fs = std::filesystem;

constexpr std::string_view kPf = "0000:af:00.1";
constexpr std::string_view kVf = "0000:af:06.1";
constexpr std::string_view kVirtio = "0000:00:06.0";

/// `text` parsed as the plugin parses a deviceID.
net::PciAddress pciOf(std::string_view text) {
  auto pci = net::PciAddress::parse(text);
  EXPECT_TRUE(pci.has_value()) << text;
  return pci.value_or(net::PciAddress{std::string(text)});
}

class SysfsDevicesTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(sys_.ok()) << sys_.error(); }

  FakeSysfsTree sys_;
  SysfsDevices devices_{sys_.root()};
};

// --- netdevsOfPci ----------------------------------------------------------------------------

TEST_F(SysfsDevicesTest, ListsTheNetdevOfAPciFunction) {
  sys_.addPciNetdev(kPf, "ib0", 5);
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto netdevs = devices_.netdevsOfPci(pciOf(kPf));

  ASSERT_TRUE(netdevs.has_value()) << netdevs.error().describe();
  EXPECT_THAT(*netdevs, ElementsAre("ib0"));
}

TEST_F(SysfsDevicesTest, ListsTheNetdevOfAVirtioNetFunction) {
  // As on a QEMU VM: /sys/bus/pci/devices/0000:00:06.0/virtio3/net/eth0.
  sys_.addVirtioNetdev(kVirtio, 3, "eth0", 2);
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto netdevs = devices_.netdevsOfPci(pciOf(kVirtio));

  ASSERT_TRUE(netdevs.has_value()) << netdevs.error().describe();
  EXPECT_THAT(*netdevs, ElementsAre("eth0"));
}

TEST_F(SysfsDevicesTest, FunctionWithoutNetdevGivesAnEmptyList) {
  sys_.addPciFunction("0000:00:03.0")  // no driver at all
      .addVirtioNetdev("0000:00:04.0", 0, "eth0", 2)
      .addPciFunction("0000:00:05.0")
      .makeDir(sys_.pciDirOrEmpty("0000:00:05.0") + "/virtio1");  // a virtio device, not a NIC
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  for (std::string_view pci : {"0000:00:03.0", "0000:00:05.0"}) {
    auto netdevs = devices_.netdevsOfPci(pciOf(pci));
    ASSERT_TRUE(netdevs.has_value()) << netdevs.error().describe();
    EXPECT_THAT(*netdevs, IsEmpty()) << pci;
  }
}

TEST_F(SysfsDevicesTest, VfBoundToVfioPciHasNoNetdev) {
  sys_.addPf(kPf, "ib0", "mlx5_0", 2)
      .addVf(kPf, 1, kVf, /*netdev=*/"", /*rdmaDevice=*/"")
      .setDriver(kVf, "vfio-pci");
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto netdevs = devices_.netdevsOfPci(pciOf(kVf));

  ASSERT_TRUE(netdevs.has_value()) << netdevs.error().describe();
  EXPECT_THAT(*netdevs, IsEmpty());
}

TEST_F(SysfsDevicesTest, DriverOfNamesTheBoundDriverNothingWhenUnboundAndEnoentWithoutTheFunction) {
  sys_.addPf(kPf, "ib0", "mlx5_0", 2).addVf(kPf, 1, kVf, "", "").setDriver(kVf, "vfio-pci");
  sys_.addPciFunction(kVirtio);
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  EXPECT_EQ(devices_.driverOf(pciOf(kVf)).value_or("error"), "vfio-pci");
  EXPECT_EQ(devices_.driverOf(pciOf(kPf)).value_or("error"), "mlx5_core");
  EXPECT_EQ(devices_.driverOf(pciOf(kVirtio)).value_or("error"), "") << "bound to no driver";
  auto missing = devices_.driverOf(pciOf("0000:af:07.0"));
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().err, ENOENT);
}

TEST_F(SysfsDevicesTest, ListsSeveralNetdevsSorted) {
  sys_.addPciNetdev(kPf, "ib2", 7).addPciNetdev(kPf, "ib10", 8).addPciNetdev(kPf, "eth0", 9);
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto netdevs = devices_.netdevsOfPci(pciOf(kPf));

  ASSERT_TRUE(netdevs.has_value()) << netdevs.error().describe();
  EXPECT_THAT(*netdevs, ElementsAre("eth0", "ib10", "ib2"));
}

TEST_F(SysfsDevicesTest, MissingPciFunctionIsEnoent) {
  sys_.addPciNetdev(kPf, "ib0", 5);
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto netdevs = devices_.netdevsOfPci(pciOf("0000:af:00.2"));

  ASSERT_FALSE(netdevs.has_value());
  EXPECT_EQ(netdevs.error().err, ENOENT);
  EXPECT_THAT(netdevs.error().op, HasSubstr("bus/pci/devices/0000:af:00.2"));
}

TEST_F(SysfsDevicesTest, DanglingBusEntryIsEnoent) {
  // A function being hot-unplugged: the bus link outlives its device directory for a moment.
  sys_.makeSymlink("bus/pci/devices/0000:af:00.2", "../../../devices/pci0000:00/0000:af:00.2");
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto netdevs = devices_.netdevsOfPci(pciOf("0000:af:00.2"));

  ASSERT_FALSE(netdevs.has_value());
  EXPECT_EQ(netdevs.error().err, ENOENT);
}

TEST_F(SysfsDevicesTest, ShortAndUpperCaseDeviceIdsFindTheFunction) {
  sys_.addPciNetdev(kPf, "ib0", 5);
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  for (std::string_view deviceId : {"af:00.1", "0000:AF:00.1", "AF:00.1"}) {
    auto netdevs = devices_.netdevsOfPci(pciOf(deviceId));
    ASSERT_TRUE(netdevs.has_value()) << deviceId << ": " << netdevs.error().describe();
    EXPECT_THAT(*netdevs, ElementsAre("ib0")) << deviceId;
  }
}

TEST_F(SysfsDevicesTest, NonCanonicalPciTextIsRejected) {
  sys_.addPciNetdev(kPf, "ib0", 5);
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  // PciAddress is a plain struct: text that did not come from parse() must not reach a path.
  for (std::string text : {"0000:AF:00.1", "af:00.1", "../../../class/net", "", "0000:af:00.1/"}) {
    auto netdevs = devices_.netdevsOfPci(net::PciAddress{text});
    ASSERT_FALSE(netdevs.has_value()) << text;
    EXPECT_EQ(netdevs.error().err, EINVAL) << text;
  }
}

TEST_F(SysfsDevicesTest, InvalidNetdevNameInSysfsIsAnError) {
  sys_.addPciNetdev(kPf, "ib0", 5)
      .makeDir(sys_.pciDirOrEmpty(kPf) + "/net/a-name-much-too-long-for-linux");
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto netdevs = devices_.netdevsOfPci(pciOf(kPf));

  ASSERT_FALSE(netdevs.has_value());
  EXPECT_EQ(netdevs.error().err, EINVAL);
  EXPECT_THAT(netdevs.error().op, HasSubstr("a-name-much-too-long-for-linux"));
}

TEST_F(SysfsDevicesTest, IgnoresEntriesThatAreNotVirtioDevicesOrNetDirectories) {
  const std::string dir = sys_.addVirtioNetdev(kVirtio, 3, "eth0", 2).pciDirOrEmpty(kVirtio);
  sys_.makeDir(dir + "/virtio-ports/net/eth7")  // not virtio<N>
      .makeDir(dir + "/virtiofs/net/eth8")
      .makeDir(dir + "/virtio/net/eth9")
      .writeFile(dir + "/virtio5", "a file, not a device\n")
      .makeDir(dir + "/virtio6")
      .writeFile(dir + "/virtio6/net", "a file, not a directory\n");
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto netdevs = devices_.netdevsOfPci(pciOf(kVirtio));

  ASSERT_TRUE(netdevs.has_value()) << netdevs.error().describe();
  EXPECT_THAT(*netdevs, ElementsAre("eth0"));
}

TEST_F(SysfsDevicesTest, NetdevsOfAuxiliaryDevicesAreNotThePfs) {
  // An mlx5 scalable function: its netdev sits below the PF but belongs to the SF.
  sys_.addPf(kPf, "ib0", "mlx5_0", 0).addAuxiliaryNetdev(kPf, "mlx5_core.sf.4", "enp175s0f1s4", 9);
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto netdevs = devices_.netdevsOfPci(pciOf(kPf));

  ASSERT_TRUE(netdevs.has_value()) << netdevs.error().describe();
  EXPECT_THAT(*netdevs, ElementsAre("ib0"));
}

// --- pciOfNetdev -----------------------------------------------------------------------------

TEST_F(SysfsDevicesTest, FindsThePciFunctionOfAPciNetdev) {
  sys_.addPciNetdev(kPf, "ib0", 5);
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto pci = devices_.pciOfNetdev("ib0", 5);

  ASSERT_TRUE(pci.has_value()) << pci.error().describe();
  ASSERT_TRUE(pci->has_value());
  EXPECT_EQ((*pci)->text, kPf);
}

TEST_F(SysfsDevicesTest, FindsThePciFunctionOfAVirtioNetdev) {
  // device -> .../0000:00:06.0/virtio3: the function is the virtio device's parent.
  sys_.addVirtioNetdev(kVirtio, 3, "eth0", 2);
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto pci = devices_.pciOfNetdev("eth0", 2);

  ASSERT_TRUE(pci.has_value()) << pci.error().describe();
  ASSERT_TRUE(pci->has_value());
  EXPECT_EQ((*pci)->text, kVirtio);
}

TEST_F(SysfsDevicesTest, FindsTheFunctionBehindABridgeNotTheBridge) {
  sys_.addPciFunction("0000:00:02.0")
      .addPciFunction("0000:05:00.0", "0000:00:02.0")
      .addPciNetdev("0000:05:00.0", "ib3", 7);
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto pci = devices_.pciOfNetdev("ib3", 7);

  ASSERT_TRUE(pci.has_value()) << pci.error().describe();
  ASSERT_TRUE(pci->has_value());
  EXPECT_EQ((*pci)->text, "0000:05:00.0");
}

TEST_F(SysfsDevicesTest, FindsTheVfOfAVfNetdev) {
  sys_.addPf(kPf, "ib0", "mlx5_0", 2)
      .addVf(kPf, 0, "0000:af:06.0", "ib1", "mlx5_2")
      .addVf(kPf, 1, kVf, "ib2", "mlx5_3");
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto pci = devices_.pciOfNetdev("ib2", sys_.ifIndexOf("ib2"));

  ASSERT_TRUE(pci.has_value()) << pci.error().describe();
  ASSERT_TRUE(pci->has_value());
  EXPECT_EQ((*pci)->text, kVf);
}

TEST_F(SysfsDevicesTest, VirtualNetdevHasNoPciFunction) {
  sys_.addVirtualNetdev("veth0", 12).addVirtualNetdev("lo", 1);
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  for (auto [name, index] : {std::pair{"veth0", 12}, std::pair{"lo", 1}}) {
    auto pci = devices_.pciOfNetdev(name, index);
    ASSERT_TRUE(pci.has_value()) << pci.error().describe();
    EXPECT_FALSE(pci->has_value()) << name;
  }
}

TEST_F(SysfsDevicesTest, IfIndexMismatchMeansSysfsDoesNotDescribeTheDevice) {
  // The caller's eth0 (ifindex 2) is not the eth0 this sysfs shows (ifindex 7): another netns.
  sys_.addVirtioNetdev(kVirtio, 3, "eth0", 7);
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto pci = devices_.pciOfNetdev("eth0", 2);

  ASSERT_TRUE(pci.has_value()) << pci.error().describe();
  EXPECT_FALSE(pci->has_value());
}

TEST_F(SysfsDevicesTest, MissingNetdevHasNoPciFunction) {
  sys_.addPciNetdev(kPf, "ib0", 5).addPciNetdev(kVf, "ib2", 6).removeNetdev("ib2");
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  for (std::string name : {"ib1", "ib2"}) {
    auto pci = devices_.pciOfNetdev(name, 6);
    ASSERT_TRUE(pci.has_value()) << pci.error().describe();
    EXPECT_FALSE(pci->has_value()) << name;
  }
  // ...and a function whose netdev moved away lists nothing.
  auto netdevs = devices_.netdevsOfPci(pciOf(kVf));
  ASSERT_TRUE(netdevs.has_value()) << netdevs.error().describe();
  EXPECT_THAT(*netdevs, IsEmpty());
}

TEST_F(SysfsDevicesTest, AuxiliaryAndUsbNetdevsHaveNoPciFunction) {
  // Both devices sit below a PCI function that is not theirs: the SF below its PF, the USB NIC
  // below the host controller. Neither may be reported as that function.
  const std::string usb =
      sys_.addPciFunction("0000:00:14.0").pciDirOrEmpty("0000:00:14.0") + "/usb1/1-1/1-1:1.0";
  sys_.addAuxiliaryNetdev(kPf, "mlx5_core.sf.4", "enp175s0f1s4", 9)
      .makeDir(usb + "/net/usb0")
      .writeFile(usb + "/net/usb0/ifindex", "10\n")
      .makeSymlink(usb + "/net/usb0/device", "../../../1-1:1.0")
      .makeSymlink("class/net/usb0", "../../" + usb + "/net/usb0");
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  for (auto [name, index] : {std::pair{"enp175s0f1s4", 9}, std::pair{"usb0", 10}}) {
    auto pci = devices_.pciOfNetdev(name, index);
    ASSERT_TRUE(pci.has_value()) << pci.error().describe();
    EXPECT_FALSE(pci->has_value()) << name;
  }
}

TEST_F(SysfsDevicesTest, InvalidNetdevNameIsEinval) {
  sys_.addPciNetdev(kPf, "ib0", 5);
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  for (std::string name : {"", ".", "..", "../net/ib0", "ib0/device", "a-name-much-too-long"}) {
    auto pci = devices_.pciOfNetdev(name, 5);
    ASSERT_FALSE(pci.has_value()) << name;
    EXPECT_EQ(pci.error().err, EINVAL) << name;
  }
}

TEST_F(SysfsDevicesTest, IfIndexWithoutTrailingNewlineIsRead) {
  sys_.addPciNetdev(kPf, "ib0", 5).writeFile(sys_.netdevDirOrEmpty("ib0") + "/ifindex", "5");
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto pci = devices_.pciOfNetdev("ib0", 5);

  ASSERT_TRUE(pci.has_value()) << pci.error().describe();
  ASSERT_TRUE(pci->has_value());
  EXPECT_EQ((*pci)->text, kPf);
}

TEST_F(SysfsDevicesTest, GarbageIfIndexIsEinval) {
  sys_.addPciNetdev(kPf, "ib0", 5);
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  for (std::string text : {"", "\n", "5abc\n", " 5\n", "5\n\n", "-5\n", "0\n", "99999999999\n"}) {
    sys_.writeFile(sys_.netdevDirOrEmpty("ib0") + "/ifindex", text);
    ASSERT_TRUE(sys_.ok()) << sys_.error();
    auto pci = devices_.pciOfNetdev("ib0", 5);
    ASSERT_FALSE(pci.has_value()) << "'" << text << "'";
    EXPECT_EQ(pci.error().err, EINVAL) << "'" << text << "'";
  }
}

TEST_F(SysfsDevicesTest, OverlongIfIndexFileFailsInsteadOfTruncating) {
  // 5 followed by a page of zeros: a truncated read would see a plausible ifindex.
  sys_.addPciNetdev(kPf, "ib0", 5)
      .writeFile(sys_.netdevDirOrEmpty("ib0") + "/ifindex", "5" + std::string(kSysfsPageSize, '0'));
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto pci = devices_.pciOfNetdev("ib0", 5);

  ASSERT_FALSE(pci.has_value());
  EXPECT_EQ(pci.error().err, EOVERFLOW);
}

TEST_F(SysfsDevicesTest, DeviceLinkLeavingTheTreeHasNoPciFunction) {
  sys_.addPciNetdev(kPf, "ib0", 5)
      .removePath(sys_.netdevDirOrEmpty("ib0") + "/device")
      .makeSymlink(sys_.netdevDirOrEmpty("ib0") + "/device", "/");
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto pci = devices_.pciOfNetdev("ib0", 5);

  ASSERT_TRUE(pci.has_value()) << pci.error().describe();
  EXPECT_FALSE(pci->has_value());
}

TEST_F(SysfsDevicesTest, DeviceLinkLoopIsAnError) {
  sys_.addPciNetdev(kPf, "ib0", 5)
      .removePath(sys_.netdevDirOrEmpty("ib0") + "/device")
      .makeSymlink(sys_.netdevDirOrEmpty("ib0") + "/device", "device");
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  auto pci = devices_.pciOfNetdev("ib0", 5);

  ASSERT_FALSE(pci.has_value());
  EXPECT_EQ(pci.error().err, ELOOP);
}

TEST_F(SysfsDevicesTest, BothLookupsAgreeOnAMixedHost) {
  sys_.addPf(kPf, "ib0", "mlx5_0", 2)
      .addVf(kPf, 0, "0000:af:06.0", "ib1", "mlx5_2")
      .addVf(kPf, 1, kVf, "", "")
      .setDriver(kVf, "vfio-pci")
      .addVirtioNetdev(kVirtio, 3, "eth0", 2)
      .addVirtualNetdev("lo", 1);
  ASSERT_TRUE(sys_.ok()) << sys_.error();

  for (std::string name : {"ib0", "ib1", "eth0"}) {
    auto pci = devices_.pciOfNetdev(name, sys_.ifIndexOf(name));
    ASSERT_TRUE(pci.has_value()) << pci.error().describe();
    ASSERT_TRUE(pci->has_value()) << name;
    auto netdevs = devices_.netdevsOfPci(**pci);
    ASSERT_TRUE(netdevs.has_value()) << netdevs.error().describe();
    EXPECT_THAT(*netdevs, ElementsAre(name));
  }
}

TEST(SysfsDevices, DefaultRootIsSys) { EXPECT_EQ(SysfsDevices().root(), "/sys"); }

TEST(SysfsDevices, MissingRootGivesNoNetdevsAndNoFunctions) {
  SysfsDevices devices("/nonexistent/ibcni-sysfs");

  auto netdevs = devices.netdevsOfPci(pciOf(kPf));
  ASSERT_FALSE(netdevs.has_value());
  EXPECT_EQ(netdevs.error().err, ENOENT);
  auto pci = devices.pciOfNetdev("eth0", 2);
  ASSERT_TRUE(pci.has_value()) << pci.error().describe();
  EXPECT_FALSE(pci->has_value());
}

// --- readSysfsFile ---------------------------------------------------------------------------

class ReadSysfsFileTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(sys_.ok()) << sys_.error(); }

  std::string write(std::string_view content) {
    sys_.writeFile("attr", content);
    EXPECT_TRUE(sys_.ok()) << sys_.error();
    return sys_.root() + "/attr";
  }

  FakeSysfsTree sys_;
};

TEST_F(ReadSysfsFileTest, StripsOneTrailingNewline) {
  EXPECT_EQ(readSysfsFile(write("mlx5_core\n")), "mlx5_core");
  EXPECT_EQ(readSysfsFile(write("2")), "2");
  EXPECT_EQ(readSysfsFile(write("a\n\n")), "a\n");
  EXPECT_EQ(readSysfsFile(write("")), "");
  EXPECT_EQ(readSysfsFile(write("\n")), "");
}

TEST_F(ReadSysfsFileTest, ReadsUpToTheLimitAndFailsBeyond) {
  EXPECT_EQ(readSysfsFile(write("12345678"), 8), "12345678");
  EXPECT_EQ(readSysfsFile(write("1234567\n"), 8), "1234567");

  auto tooLong = readSysfsFile(write("123456789"), 8);
  ASSERT_FALSE(tooLong.has_value());
  EXPECT_EQ(tooLong.error().err, EOVERFLOW);
  EXPECT_THAT(tooLong.error().op, HasSubstr("/attr"));

  const std::string page(kSysfsPageSize, 'x');
  EXPECT_EQ(readSysfsFile(write(page)), page);
  auto overPage = readSysfsFile(write(page + "y"));
  ASSERT_FALSE(overPage.has_value());
  EXPECT_EQ(overPage.error().err, EOVERFLOW);
}

TEST_F(ReadSysfsFileTest, ReportsOpenAndReadErrors) {
  auto missing = readSysfsFile(sys_.root() + "/no-such-attr");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().err, ENOENT);
  EXPECT_THAT(missing.error().op, HasSubstr("no-such-attr"));

  auto directory = readSysfsFile(sys_.root() + "/class");
  ASSERT_FALSE(directory.has_value());
  EXPECT_EQ(directory.error().err, EISDIR);
}

// --- FakeSysfsTree: the layout later SR-IOV code relies on ------------------------------------

TEST(FakeSysfsTree, BuildsPfVfLayoutLikeTheKernel) {
  FakeSysfsTree sys;
  sys.addPf(kPf, "ib0", "mlx5_0", 2)
      .addVf(kPf, 0, "0000:af:06.0", "ib1", "mlx5_2")
      .addVf(kPf, 1, kVf, "ib2", "mlx5_3");
  ASSERT_TRUE(sys.ok()) << sys.error();
  const fs::path root = sys.root();
  const fs::path pfDir = fs::canonical(root / "bus/pci/devices" / kPf);
  const fs::path vfDir = fs::canonical(root / "bus/pci/devices" / kVf);

  EXPECT_EQ(pfDir, fs::canonical(root / "devices/pci0000:00" / kPf));
  EXPECT_EQ(vfDir.parent_path(), pfDir.parent_path());  // VFs sit beside their PF
  EXPECT_EQ(fs::canonical(pfDir / "virtfn1"), vfDir);
  EXPECT_EQ(fs::canonical(vfDir / "physfn"), pfDir);
  EXPECT_EQ(readSysfsFile((pfDir / "sriov_numvfs").string()), "2");
  EXPECT_FALSE(fs::exists(vfDir / "sriov_numvfs"));
  EXPECT_EQ(fs::canonical(pfDir / "driver"), fs::canonical(root / "bus/pci/drivers/mlx5_core"));
  EXPECT_EQ(fs::canonical(root / "bus/pci/drivers/mlx5_core" / kVf), vfDir);
  EXPECT_EQ(fs::canonical(root / "class/infiniband/mlx5_3"), vfDir / "infiniband/mlx5_3");
  EXPECT_EQ(fs::canonical(root / "class/net/ib2"), vfDir / "net/ib2");
  EXPECT_EQ(fs::canonical(root / "class/net/ib2/device"), vfDir);
  EXPECT_EQ(fs::read_symlink(root / "class/net/ib2").string().substr(0, 14), "../../devices/");
  EXPECT_EQ(readSysfsFile((root / "class/net/ib2/ifindex").string()),
            std::to_string(sys.ifIndexOf("ib2")));
  EXPECT_NE(sys.ifIndexOf("ib1"), sys.ifIndexOf("ib2"));
}

TEST(FakeSysfsTree, RebindingReplacesTheDriverLinks) {
  FakeSysfsTree sys;
  sys.addPf(kPf, "", "", 1).addVf(kPf, 0, kVf, "", "").setDriver(kVf, "vfio-pci");
  ASSERT_TRUE(sys.ok()) << sys.error();
  const fs::path root = sys.root();

  EXPECT_EQ(fs::read_symlink(root / sys.pciDirOrEmpty(kVf) / "driver").filename(), "vfio-pci");
  EXPECT_TRUE(fs::is_symlink(root / "bus/pci/drivers/vfio-pci" / kVf));
  EXPECT_FALSE(fs::exists(root / "bus/pci/drivers/mlx5_core" / kVf));

  sys.setDriver(kVf, "");
  ASSERT_TRUE(sys.ok()) << sys.error();
  EXPECT_FALSE(fs::exists(root / sys.pciDirOrEmpty(kVf) / "driver"));
}

TEST(FakeSysfsTree, RecordsTheFirstErrorAndStops) {
  FakeSysfsTree sys;
  sys.addPciFunction("AF:00.1").addPciNetdev(kPf, "ib0", 5);

  EXPECT_FALSE(sys.ok());
  EXPECT_THAT(sys.error(), HasSubstr("'AF:00.1'"));
  EXPECT_EQ(sys.ifIndexOf("ib0"), -1);
}

TEST(FakeSysfsTree, DuplicateNetdevIsAnError) {
  FakeSysfsTree sys;
  sys.addPciNetdev(kPf, "ib0", 5).addVirtualNetdev("ib0", 6);

  EXPECT_FALSE(sys.ok());
  EXPECT_THAT(sys.error(), HasSubstr("ib0"));
}

TEST(FakeSysfsTree, DestructorRemovesTheTree) {
  fs::path base;
  {
    FakeSysfsTree sys;
    sys.addPciNetdev(kPf, "ib0", 5);
    ASSERT_TRUE(sys.ok()) << sys.error();
    base = fs::path(sys.root()).parent_path();
    ASSERT_TRUE(fs::is_directory(base));
  }
  EXPECT_FALSE(fs::exists(base));
}

// --- pciFunction, pkeys, rebind (the mlx5 SR-IOV layout) --------------------------------------

TEST_F(SysfsDevicesTest, VfResolvesToItsPfVfNumberDriverNetdevAndRdmaDevice) {
  sys_.addPf(kPf, "ibp175s0f1", "mlx5_1", 8)
      .addVf(kPf, 0, "0000:af:00.2", "ibp175s0f1v0", "mlx5_2")
      .addVf(kPf, 5, kVf, "ibp175s0f1v5", "mlx5_7");
  ASSERT_TRUE(sys_.ok()) << sys_.error();
  auto f = devices_.pciFunction(pciOf(kVf));
  ASSERT_TRUE(f) << f.error().describe();
  ASSERT_TRUE(f->physfn);
  EXPECT_EQ(f->physfn->text, kPf);
  EXPECT_EQ(f->vfIndex, 5u);
  EXPECT_EQ(f->driver, "mlx5_core");
  EXPECT_THAT(f->netdevs, ElementsAre("ibp175s0f1v5"));
  EXPECT_THAT(f->rdmaDevices, ElementsAre("mlx5_7"));
}

TEST_F(SysfsDevicesTest, PfListsItsVfsByNumber) {
  sys_.addPf(kPf, "ibp175s0f1", "mlx5_1", 12)
      .addVf(kPf, 10, "0000:af:01.4", "ibp175s0f1v10", "mlx5_12")
      .addVf(kPf, 0, "0000:af:00.2", "ibp175s0f1v0", "mlx5_2")
      .addVf(kPf, 5, kVf, "ibp175s0f1v5", "mlx5_7");
  ASSERT_TRUE(sys_.ok()) << sys_.error();
  auto f = devices_.pciFunction(pciOf(kPf));
  ASSERT_TRUE(f) << f.error().describe();
  ASSERT_EQ(f->vfs.size(), 3u);
  EXPECT_EQ(f->vfs[0].index, 0u);
  EXPECT_EQ(f->vfs[0].address.text, "0000:af:00.2");
  EXPECT_EQ(f->vfs[1].index, 5u);
  EXPECT_EQ(f->vfs[1].address.text, kVf);
  EXPECT_EQ(f->vfs[2].index, 10u) << "by number, not by name (virtfn10 sorts before virtfn5)";
  EXPECT_THAT(devices_.pciFunction(pciOf(kVf))->vfs, IsEmpty()) << "a VF has no VFs";
}

TEST_F(SysfsDevicesTest, PfAndVirtioFunctionsAreNoVfs) {
  sys_.addPf(kPf, "ibp175s0f1", "mlx5_1", 2).addVirtioNetdev(kVirtio, 0, "eth0", 2);
  for (auto pci : {kPf, kVirtio}) {
    auto f = devices_.pciFunction(pciOf(pci));
    ASSERT_TRUE(f) << f.error().describe();
    EXPECT_FALSE(f->physfn) << pci;
    EXPECT_FALSE(f->vfIndex) << pci;
  }
  EXPECT_EQ(devices_.pciFunction(pciOf(kVirtio))->driver, "virtio-pci");
  EXPECT_THAT(devices_.pciFunction(pciOf(kVirtio))->rdmaDevices, IsEmpty());
}

TEST_F(SysfsDevicesTest, VfBoundToVfioHasNoNetdevAndSaysItsDriver) {
  sys_.addPf(kPf, "ibp175s0f1", "mlx5_1", 8).addVf(kPf, 5, kVf, "", "").setDriver(kVf, "vfio-pci");
  auto f = devices_.pciFunction(pciOf(kVf));
  ASSERT_TRUE(f);
  EXPECT_THAT(f->netdevs, IsEmpty());
  EXPECT_EQ(f->driver, "vfio-pci");
  sys_.setDriver(kVf, "");
  EXPECT_EQ(devices_.pciFunction(pciOf(kVf))->driver, "");
}

TEST_F(SysfsDevicesTest, MissingFunctionIsEnoent) {
  auto f = devices_.pciFunction(pciOf("0000:01:00.0"));
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().err, ENOENT);
}

TEST_F(SysfsDevicesTest, PkeyTableInIndexOrderWithoutEmptySlots) {
  sys_.addPf(kPf, "ibp175s0f1", "mlx5_1", 1).addVf(kPf, 0, kVf, "ibp175s0f1v0", "mlx5_2");
  std::vector<std::string> entries(12, "0x0000");
  entries[0] = "0xffff";
  entries[10] = "0x8001";
  entries[2] = "0x0042";
  sys_.setPkeys("mlx5_2", 1, entries);
  auto keys = devices_.pkeys("mlx5_2", 1);
  ASSERT_TRUE(keys) << keys.error().describe();
  EXPECT_THAT(*keys, ElementsAre(net::Pkey::fromWire(0xffff), net::Pkey::fromWire(0x0042), net::Pkey::fromWire(0x8001)))
      << "numeric index order (10 after 2)";
  EXPECT_EQ(devices_.pkeys("mlx5_2", 2).error().err, ENOENT);
  EXPECT_EQ(devices_.pkeys("mlx5_9", 1).error().err, ENOENT);
  EXPECT_EQ(devices_.pkeys("../x", 1).error().err, EINVAL);
  sys_.setPkeys("mlx5_2", 1, {"garbage"});
  EXPECT_EQ(devices_.pkeys("mlx5_2", 1).error().err, EINVAL);
}

TEST_F(SysfsDevicesTest, RebindWritesUnbindThenBindOfItsDriver) {
  sys_.addPf(kPf, "ibp175s0f1", "mlx5_1", 8).addVf(kPf, 5, kVf, "ibp175s0f1v5", "mlx5_7");
  ASSERT_TRUE(devices_.rebind(pciOf(kVf)));
  EXPECT_EQ(sys_.driverWrites("mlx5_core", "unbind"), std::string(kVf) + "\n");
  EXPECT_EQ(sys_.driverWrites("mlx5_core", "bind"), std::string(kVf) + "\n");
  sys_.setDriver(kVf, "");
  auto r = devices_.rebind(pciOf(kVf));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().err, EINVAL);
  EXPECT_THAT(r.error().describe(), HasSubstr("no driver"));
}

TEST_F(SysfsDevicesTest, NetdevsOfAnRdmaPortByDevPort) {
  // A two-port HCA on one function: ib0 is port 1 (dev_port 0), ib1 port 2 (dev_port 1).
  sys_.addPf(kPf, "ib0", "mlx5_0", 0).addPciNetdev(kPf, "ib1", FakeSysfsTree::kAutoIfIndex);
  const std::string dir = sys_.pciDirOrEmpty(kPf);
  sys_.writeFile(dir + "/net/ib0/dev_port", "0\n").writeFile(dir + "/net/ib1/dev_port", "1\n");
  ASSERT_TRUE(sys_.ok()) << sys_.error();
  EXPECT_THAT(*devices_.netdevsOfRdmaPort("mlx5_0", 1), ElementsAre("ib0"));
  EXPECT_THAT(*devices_.netdevsOfRdmaPort("mlx5_0", 2), ElementsAre("ib1"));
  EXPECT_THAT(*devices_.netdevsOfRdmaPort("mlx5_0", 3), IsEmpty());
  EXPECT_EQ(devices_.netdevsOfRdmaPort("mlx5_9", 1).error().err, ENOENT);
  EXPECT_EQ(devices_.netdevsOfRdmaPort("../mlx5_0", 1).error().err, EINVAL);
}

}  // namespace
}  // namespace ibcni::sysfs
