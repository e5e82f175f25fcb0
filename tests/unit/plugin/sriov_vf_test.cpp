// SPDX-License-Identifier: Apache-2.0
// sriov mode on an InfiniBand SR-IOV VF: the mlx5 sysfs layout (PF with virtfnN, VF with physfn,
// net/ and infiniband/), IPoIB links in the fake netlink with a VF table on the PF, and a fake RDMA
// netlink. Covers GUIDs, link state, pkey, MTU and RDMA isolation, and that every failure leaves
// the node as it was.
#include <gtest/gtest.h>

#include "fakes/fake_verbs_probe.h"
#include "plugin_fixture.h"

namespace ibcni::testing {
namespace {

constexpr const char* kPf = "0000:3b:00.0";
constexpr const char* kVf = "0000:3b:00.3";
constexpr std::uint32_t kVfNumber = 2;
constexpr const char* kOldGuid = "02:00:00:00:00:00:aa:01";
constexpr const char* kNewGuid = "c2:11:22:33:44:55:66:77";

net::Guid guid(const char* text) { return *net::Guid::parse(text); }

class SriovVfTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    nl::Link pf = fakeIbLink("ibp59s0", "02:00:00:00:00:00:00:01");
    pfIndex_ = nl_.addLink(host_, pf);
    addVfLink(kOldGuid);
    sysfs_.addPf(kPf, "ibp59s0", "mlx5_0", 4, pfIndex_).addVf(kPf, kVfNumber, kVf, "ibp59s0v2", "mlx5_3", vfLinkIndex_);
    sysfs_.setPkeys("mlx5_3", 1, {"0xffff", "0x8123", "0x0000"});
    ASSERT_TRUE(sysfs_.ok()) << sysfs_.error();
    std::vector<nl::VfInfo> vfs;
    for (std::uint32_t i = 0; i < 4; ++i) {
      nl::VfInfo v;
      v.vf = i;
      v.linkState = nl::VfLinkState::kAuto;
      v.nodeGuid = guid(kOldGuid);
      v.portGuid = guid(kOldGuid);
      vfs.push_back(v);
    }
    nl_.setVfs(host_, pfIndex_, vfs);
    rdma_.addDevice(host_, "mlx5_0", 0, "");
    mlx53_ = rdma_.addDevice(host_, "mlx5_3", 0, "");
    nl_.clearCalls();
  }

  void addVfLink(const std::string& portGuid) {
    nl::Link vf = fakeIbLink("ibp59s0v2", portGuid);
    vf.mtu = 2044;
    vfLinkIndex_ = nl_.addLink(host_, vf);
    nl_.setMtuRange(host_, vfLinkIndex_, 68, 4092);
  }

  json vfConfig(const std::string& version = "1.0.0") const {
    json c = config(version);
    c.erase("device");
    c.erase("mtu");
    c["deviceID"] = kVf;
    return c;
  }
  static json withGuid(json c, const std::string& g = kNewGuid) {
    c["runtimeConfig"]["infinibandGUID"] = g;
    return c;
  }

  nl::VfInfo vfState() { return nl_.vf(host_, pfIndex_, kVfNumber).value_or(nl::VfInfo{}); }
  int rebinds() {
    const std::string binds = sysfs_.driverWrites("mlx5_core", "bind");
    return static_cast<int>(std::count(binds.begin(), binds.end(), '\n'));
  }
  int countOps(FakeNetlink::Op op) {
    auto ops = nl_.callOps();
    return static_cast<int>(std::count(ops.begin(), ops.end(), op));
  }
  /// The node's state that must survive a failed ADD: links, addresses and the VF settings.
  std::string nodeState() {
    auto v = vfState();
    return snapshot(host_) + snapshot(pod_) + "vf node=" + (v.nodeGuid ? v.nodeGuid->toString() : "-") +
           " port=" + (v.portGuid ? v.portGuid->toString() : "-") +
           " state=" + std::to_string(static_cast<int>(v.linkState.value_or(nl::VfLinkState::kAuto))) +
           " mlx5_3 in " + std::to_string(rdma_.nsOf("mlx5_3"));
  }

  int pfIndex_ = 0;
  int vfLinkIndex_ = 0;
  std::uint32_t mlx53_ = 0;
};

TEST_F(SriovVfTest, GuidIsSetThroughThePfRebindsAndIsRestoredOnDel) {
  auto result = add(withGuid(vfConfig()));
  ASSERT_TRUE(result.is_object());
  EXPECT_EQ(vfState().nodeGuid, guid(kNewGuid));
  EXPECT_EQ(vfState().portGuid, guid(kNewGuid));
  EXPECT_EQ(rebinds(), 1) << "mlx5 applies a VF GUID on rebind";
  EXPECT_EQ(sysfs_.driverWrites("mlx5_core", "unbind"), std::string(kVf) + "\n");
  ASSERT_TRUE(nl_.findLink(pod_, "net1"));
  ASSERT_EQ(records().size(), 1u);
  EXPECT_EQ(records()[0].guid, kNewGuid);
  EXPECT_EQ(records()[0].oldPortGuid, kOldGuid);

  auto out = run("DEL", withGuid(vfConfig()));
  ASSERT_EQ(out.exitCode, 0) << out.stdoutText;
  EXPECT_EQ(vfState().nodeGuid, guid(kOldGuid));
  EXPECT_EQ(vfState().portGuid, guid(kOldGuid));
  EXPECT_EQ(rebinds(), 2);
  EXPECT_TRUE(nl_.findLink(host_, "ibp59s0v2"));
}

TEST_F(SriovVfTest, GuidFromArgsCniOrCniArgsWhenNoCapability) {
  json c = vfConfig();
  c["args"]["cni"]["guid"] = "c2:00:00:00:00:00:00:05";
  add(c);
  EXPECT_EQ(vfState().portGuid, guid("c2:00:00:00:00:00:00:05"));
  ASSERT_EQ(run("DEL", c).exitCode, 0);

  add(vfConfig(), {{"CNI_ARGS", "IgnoreUnknown=1;GUID=c2:00:00:00:00:00:00:06"}});
  EXPECT_EQ(vfState().portGuid, guid("c2:00:00:00:00:00:00:06"));
  ASSERT_EQ(run("DEL", vfConfig()).exitCode, 0);
  EXPECT_EQ(vfState().portGuid, guid(kOldGuid));
}

TEST_F(SriovVfTest, InvalidGuidsAreError7) {
  for (const char* bad : {"00:00:00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff:ff:ff", "c2:11:22:33", "zz:11:22:33:44:55:66:77"}) {
    auto out = run("ADD", withGuid(vfConfig(), bad));
    EXPECT_EQ(out.exitCode, 1);
    EXPECT_EQ(errorOf(out)["code"], 7) << bad;
    EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("infinibandGUID"), std::string::npos) << out.stdoutText;
  }
  auto out = run("ADD", vfConfig(), {{"CNI_ARGS", "GUID=00:00:00:00:00:00:00:00"}});
  EXPECT_EQ(errorOf(out)["code"], 7);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("CNI_ARGS GUID"), std::string::npos);
  EXPECT_EQ(countOps(FakeNetlink::Op::kSetVfGuids), 0);
}

TEST_F(SriovVfTest, AllZeroGuidWithoutRequestIsRefusedWithHowTo) {
  auto zero = vfState();
  zero.nodeGuid = zero.portGuid = net::Guid{0};
  std::vector<nl::VfInfo> vfs;
  for (std::uint32_t i = 0; i < 4; ++i) {
    auto v = zero;
    v.vf = i;
    vfs.push_back(v);
  }
  nl_.setVfs(host_, pfIndex_, vfs);
  const std::string before = nodeState();
  auto out = run("ADD", vfConfig());
  EXPECT_EQ(errorOf(out)["code"], 7);
  const std::string msg = errorOf(out)["msg"];
  EXPECT_NE(msg.find("00:00:00:00:00:00:00:00"), std::string::npos) << msg;
  EXPECT_NE(msg.find("infiniband-guid"), std::string::npos) << msg;
  EXPECT_EQ(nodeState(), before);
  EXPECT_TRUE(records().empty());
}

TEST_F(SriovVfTest, ZeroGuidRestoredAsAllOnes) {
  auto v = vfState();
  v.nodeGuid = v.portGuid = net::Guid{0};
  nl_.setVfs(host_, pfIndex_, {nl::VfInfo{0, nl::VfLinkState::kAuto, {}, {}}, nl::VfInfo{1, nl::VfLinkState::kAuto, {}, {}}, v});
  add(withGuid(vfConfig()));
  ASSERT_EQ(run("DEL", vfConfig()).exitCode, 0);
  EXPECT_EQ(vfState().portGuid, net::Guid{~std::uint64_t{0}}) << "the kernel refuses a zero GUID";
}

// Every step after the GUID change fails in turn: the GUID, the link state, the RDMA device and
// the links all end as they were.
TEST_F(SriovVfTest, AnyLaterFailureRestoresGuidLinkStateAndRdmaDevice) {
  rdma_.setMode(rdma::NetnsMode::kExclusive);
  json c = withGuid(vfConfig());
  c["linkState"] = "enable";
  const std::string before = nodeState();
  for (auto op : {FakeNetlink::Op::kSetVfLinkState, FakeNetlink::Op::kMoveLink, FakeNetlink::Op::kSetLinkUp,
                  FakeNetlink::Op::kAddAddress}) {
    nl_.failOn(op, EBUSY);
    auto out = run("ADD", c);
    EXPECT_EQ(out.exitCode, 1) << FakeNetlink::opName(op);
    EXPECT_EQ(nodeState(), before) << "after a failed " << FakeNetlink::opName(op);
    EXPECT_TRUE(records().empty());
    nl_.clearFailures();
  }
  rdma_.failOn(FakeRdmaNetlink::Op::kMoveDevice, EPERM);
  EXPECT_EQ(run("ADD", c).exitCode, 1);
  EXPECT_EQ(nodeState(), before);
}

TEST_F(SriovVfTest, LinkStateIsSetOnThePfAndRestoredOnDel) {
  json c = vfConfig();
  c["linkState"] = "disable";
  add(c);
  EXPECT_EQ(vfState().linkState, nl::VfLinkState::kDisable);
  EXPECT_EQ(rebinds(), 0) << "no GUID requested: no rebind";
  ASSERT_EQ(run("DEL", c).exitCode, 0);
  EXPECT_EQ(vfState().linkState, nl::VfLinkState::kAuto);
}

TEST_F(SriovVfTest, IbSriovCniLinkStateKeyIsAccepted) {
  json c = vfConfig();
  c["link_state"] = "enable";
  add(c);
  EXPECT_EQ(vfState().linkState, nl::VfLinkState::kEnable);
  c["linkState"] = "auto";
  auto out = run("ADD", c, {{"CNI_CONTAINERID", "c2"}});
  EXPECT_EQ(errorOf(out)["code"], 7);
}

TEST_F(SriovVfTest, VfOfAnEthernetPfIsRefused) {
  nl_.removeLink(host_, pfIndex_);
  nl_.removeLink(host_, vfLinkIndex_);
  nl::Link pf = fakeLink("ibp59s0");
  pfIndex_ = nl_.addLink(host_, pf);
  nl::Link vf = fakeLink("ibp59s0v2");
  vfLinkIndex_ = nl_.addLink(host_, vf);
  auto out = run("ADD", vfConfig());
  EXPECT_EQ(errorOf(out)["code"], 7);
  const std::string msg = errorOf(out)["msg"];
  EXPECT_NE(msg.find("not an InfiniBand PF"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sriov-cni"), std::string::npos) << msg;
}

TEST_F(SriovVfTest, VfBoundToVfioHasNoNetdev) {
  sysfs_.removeNetdev("ibp59s0v2").setDriver(kVf, "vfio-pci");
  auto out = run("ADD", vfConfig());
  EXPECT_EQ(errorOf(out)["code"], 100);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("vfio-pci"), std::string::npos) << out.stdoutText;
}

TEST_F(SriovVfTest, GuidOrLinkStateOnAFunctionThatIsNoVf) {
  sysfs_.addPciNetdev("0000:5e:00.0", "enp94s0", FakeSysfsTree::kAutoIfIndex);
  nl_.addLink(host_, fakeLink("enp94s0"));
  json c = withGuid(vfConfig());
  c["deviceID"] = "0000:5e:00.0";
  auto out = run("ADD", c);
  EXPECT_EQ(errorOf(out)["code"], 7);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("no SR-IOV VF"), std::string::npos) << out.stdoutText;
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find(
                std::string("a GUID was requested (runtimeConfig.infinibandGUID = \"") + kNewGuid + "\")"),
            std::string::npos)
      << "the message names the field and the value: " << out.stdoutText;
  c.erase("runtimeConfig");
  c["args"]["cni"]["guid"] = "c2:00:00:00:00:00:00:09";
  EXPECT_NE(errorOf(run("ADD", c))["msg"].get<std::string>().find("args.cni.guid = \"c2:00:00:00:00:00:00:09\""),
            std::string::npos);
  c.erase("args");
  c["linkState"] = "enable";
  EXPECT_EQ(errorOf(run("ADD", c))["code"], 7);
  c.erase("linkState");
  EXPECT_EQ(run("ADD", c).exitCode, 0) << "a whole function without VF settings attaches like host-device";
}

TEST_F(SriovVfTest, PkeyMustBeInTheVfsTable) {
  json c = vfConfig();
  c["pkey"] = "0x7fff";  // the table holds 0xffff: the same partition, full member
  add(c);
  ASSERT_EQ(run("DEL", c).exitCode, 0);
  c["pkey"] = 0x0123;  // the table holds 0x8123
  add(c);
  ASSERT_EQ(run("DEL", c).exitCode, 0);

  c["pkey"] = "0x0042";
  const std::string before = nodeState();
  auto out = run("ADD", withGuid(c));
  EXPECT_EQ(errorOf(out)["code"], 7);
  const std::string msg = errorOf(out)["msg"];
  EXPECT_NE(msg.find("0x0042"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0xffff, 0x8123"), std::string::npos) << msg;
  EXPECT_NE(msg.find("subnet manager"), std::string::npos) << msg;
  EXPECT_EQ(nodeState(), before) << "the GUID set before the check is restored";
}

TEST_F(SriovVfTest, PkeyValuesAreValidated) {
  for (auto bad : {json("0x0000"), json("0x8000"), json("0x10000"), json(-1), json("7fffg"), json(true)}) {
    json c = vfConfig();
    c["pkey"] = bad;
    auto out = run("ADD", c);
    EXPECT_EQ(errorOf(out)["code"], 7) << bad.dump();
    EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("pkey"), std::string::npos);
  }
}

TEST_F(SriovVfTest, MtuAboveTheDevicesMaximumIsError7) {
  json c = vfConfig();
  c["mtu"] = 9000;
  auto out = run("ADD", c);
  EXPECT_EQ(errorOf(out)["code"], 7);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("4092"), std::string::npos) << out.stdoutText;
  c["mtu"] = 4092;
  add(c);
  EXPECT_EQ(nl_.findLink(pod_, "net1")->mtu, 4092u);
}

TEST_F(SriovVfTest, IsolationTrueInSharedModeIsRefusedWithTheFix) {
  json c = vfConfig();
  c["rdmaIsolation"] = true;
  auto out = run("ADD", c);
  EXPECT_EQ(errorOf(out)["code"], 7);
  const std::string msg = errorOf(out)["msg"];
  EXPECT_NE(msg.find("netns_mode=0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rdma system set netns exclusive"), std::string::npos) << msg;
}

TEST_F(SriovVfTest, IsolationTrueWithoutRdmaDeviceIsError100) {
  rdma_.setMode(rdma::NetnsMode::kExclusive);
  sysfs_.removePath(sysfs_.pciDirOrEmpty(kVf) + "/infiniband");
  json c = vfConfig();
  c["rdmaIsolation"] = true;
  auto out = run("ADD", c);
  EXPECT_EQ(errorOf(out)["code"], 100);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("no RDMA device"), std::string::npos) << out.stdoutText;
}

TEST_F(SriovVfTest, ExclusiveModeMovesTheRdmaDeviceFirstAndBackOnDel) {
  rdma_.setMode(rdma::NetnsMode::kExclusive);
  add(vfConfig());
  EXPECT_EQ(rdma_.nsOf("mlx5_3"), pod_.inode());
  EXPECT_EQ(rdma_.nsOf("mlx5_0"), host_.inode()) << "the PF's RDMA device stays";
  ASSERT_EQ(records().size(), 1u);
  EXPECT_TRUE(records()[0].rdmaMoved);
  auto second = run("ADD", vfConfig(), {{"CNI_CONTAINERID", "c2"}});
  EXPECT_EQ(errorOf(second)["code"], 101) << "the VF is busy: " << second.stdoutText;
  ASSERT_EQ(run("DEL", vfConfig()).exitCode, 0);
  EXPECT_EQ(rdma_.nsOf("mlx5_3"), host_.inode());
}

TEST_F(SriovVfTest, IsolationFalseLeavesTheRdmaDeviceShared) {
  rdma_.setMode(rdma::NetnsMode::kExclusive);
  json c = vfConfig();
  c["rdmaIsolation"] = false;
  add(c);
  EXPECT_EQ(rdma_.nsOf("mlx5_3"), host_.inode());
}

TEST_F(SriovVfTest, RdmaDeviceThatCannotMoveFailsCleanly) {
  rdma_ = FakeRdmaNetlink();
  rdma_.setMode(rdma::NetnsMode::kExclusive);
  rdma_.addDevice(host_, "mlx5_3", 0, "", /*movable=*/false);
  const std::string before = nodeState();
  auto out = run("ADD", withGuid(vfConfig()));
  EXPECT_EQ(errorOf(out)["code"], 102);
  const std::string msg = errorOf(out)["msg"];
  EXPECT_NE(msg.find("rdmaIsolation"), std::string::npos) << msg;
  EXPECT_EQ(nodeState(), before);
  EXPECT_TRUE(ipam_.allocations.empty());
}

TEST_F(SriovVfTest, DelWhenPodNetnsIsGoneSucceedsAndRestoresTheGuid) {
  rdma_.setMode(rdma::NetnsMode::kExclusive);
  add(withGuid(vfConfig()));
  // The runtime deleted the namespace: the kernel returns the netdev and the RDMA device.
  ASSERT_TRUE(nl_.moveLink(pod_, nl_.findLink(pod_, "net1")->index, host_));
  sysfs_.removeNetdev("ibp59s0v2").addPciNetdev(kVf, "net1", nl_.findLink(host_, "net1")->index);
  rdma_.destroyNetns(pod_, host_);
  netns_.removeNetns(kPodPath);
  auto out = run("DEL", vfConfig());
  ASSERT_EQ(out.exitCode, 0) << out.stdoutText;
  EXPECT_EQ(vfState().portGuid, guid(kOldGuid));
  EXPECT_TRUE(nl_.findLink(host_, "ibp59s0v2"));
  EXPECT_EQ(rdma_.nsOf("mlx5_3"), host_.inode());
  EXPECT_TRUE(records().empty());
}

TEST_F(SriovVfTest, DelAfterRebootLeavesTheVfAlone) {
  json c = withGuid(vfConfig());
  c["linkState"] = "enable";
  add(c);
  bootId_ = "boot-2";
  nl_.clearCalls();
  ASSERT_EQ(run("DEL", c).exitCode, 0);
  EXPECT_EQ(countOps(FakeNetlink::Op::kSetVfGuids), 0);
  EXPECT_EQ(countOps(FakeNetlink::Op::kSetVfLinkState), 0);
}

TEST_F(SriovVfTest, DelLeavesAVfThatANewerAttachmentHoldsAlone) {
  add(withGuid(vfConfig()));
  // A stale record of an older attachment of the same VF (e.g. from before a crash).
  auto rec = records()[0];
  rec.containerId = "old";
  rec.netns = "/var/run/netns/old-pod";  // long gone
  state::FileAttachmentStore store(stateDir_);
  ASSERT_TRUE(store.save(rec));
  nl_.clearCalls();
  ASSERT_EQ(run("DEL", withGuid(vfConfig()), {{"CNI_CONTAINERID", "old"}, {"CNI_NETNS", "/var/run/netns/old-pod"}})
                .exitCode,
            0);
  EXPECT_TRUE(nl_.findLink(pod_, "net1")) << "the newer attachment keeps its device";
  EXPECT_EQ(countOps(FakeNetlink::Op::kSetVfGuids), 0);
  EXPECT_EQ(vfState().portGuid, guid(kNewGuid));
}

TEST_F(SriovVfTest, DelWhenThePfIsGoneSucceeds) {
  add(withGuid(vfConfig()));
  nl_.removeLink(host_, pfIndex_);
  sysfs_.removeNetdev("ibp59s0");
  EXPECT_EQ(run("DEL", vfConfig()).exitCode, 0);
}

TEST_F(SriovVfTest, DeviceIdFromMultusDeviceInfoFile) {
  const std::string file = stateDir_ + "/devinfo.json";
  std::ofstream(file) << R"({"type":"pci","version":"1.1.0","pci":{"pci-address":")" << kVf
                      << R"(","rdma-device":"mlx5_3"}})";
  json c = vfConfig();
  c.erase("deviceID");
  c["runtimeConfig"]["CNIDeviceInfoFile"] = file;
  add(c);
  EXPECT_TRUE(nl_.findLink(pod_, "net1"));
  ASSERT_EQ(run("DEL", c).exitCode, 0);

  c["deviceID"] = "0000:3b:00.4";
  auto out = run("ADD", c);
  EXPECT_EQ(errorOf(out)["code"], 7);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("disagree"), std::string::npos) << out.stdoutText;

  c.erase("deviceID");
  c["runtimeConfig"]["CNIDeviceInfoFile"] = stateDir_ + "/missing.json";
  out = run("ADD", c);
  EXPECT_EQ(errorOf(out)["code"], 7);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("CNIDeviceInfoFile"), std::string::npos);
}

TEST_F(SriovVfTest, CheckFindsAnRdmaDeviceThatLeftThePod) {
  rdma_.setMode(rdma::NetnsMode::kExclusive);
  json c = vfConfig();
  c["prevResult"] = add(vfConfig());
  ASSERT_EQ(run("CHECK", c).exitCode, 0);
  ASSERT_TRUE(rdma_.moveDevice(pod_, mlx53_, host_));
  auto out = run("CHECK", c);
  EXPECT_EQ(errorOf(out)["code"], 107);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("mlx5_3"), std::string::npos) << out.stdoutText;
}

// ---- the verbs check in ADD and CHECK ----

TEST_F(SriovVfTest, VerbsCheckRequireFailsAddAndRollsEverythingBack) {
  FakeVerbsProbe verbs;
  verbs.result = FakeVerbsProbe::healthyIb("mlx5_3");
  verbs.result.port->state = 2;  // INIT: no subnet manager
  deps_.verbs = &verbs;
  json c = withGuid(vfConfig());
  c["verbsCheck"] = {{"mode", "require"}, {"timeoutMs", 500}, {"probe", "qp"}};
  const std::string before = nodeState();
  auto out = run("ADD", c);
  EXPECT_EQ(errorOf(out)["code"], 109);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("subnet manager"), std::string::npos) << out.stdoutText;
  EXPECT_EQ(nodeState(), before) << "GUID, links and IPAM are all back";
  EXPECT_TRUE(ipam_.allocations.empty());
  EXPECT_TRUE(records().empty());
  ASSERT_EQ(verbs.requests.size(), 1u);
  EXPECT_EQ(verbs.requests[0].netnsPath, kPodPath);
  EXPECT_EQ(verbs.requests[0].device, "mlx5_3");
  EXPECT_TRUE(verbs.requests[0].qpProbe);
  EXPECT_EQ(verbs.requests[0].timeout, std::chrono::milliseconds(500));
}

TEST_F(SriovVfTest, VerbsCheckWarnLogsAndSucceedsOffDoesNotProbe) {
  FakeVerbsProbe verbs;
  verbs.error = os::SysError{ETIMEDOUT, "verbs probe", {}};
  deps_.verbs = &verbs;
  json c = vfConfig();
  add(c);  // warn is the default
  EXPECT_EQ(verbs.requests.size(), 1u);
  ASSERT_EQ(run("DEL", c).exitCode, 0);
  c["verbsCheck"] = {{"mode", "off"}};
  add(c);
  EXPECT_EQ(verbs.requests.size(), 1u) << "off: no probe";
}

TEST_F(SriovVfTest, VerbsCheckInCheckReportsAPortThatWentDown) {
  FakeVerbsProbe verbs;
  verbs.result = FakeVerbsProbe::healthyIb("mlx5_3");
  deps_.verbs = &verbs;
  json c = vfConfig();
  c["verbsCheck"] = {{"mode", "require"}};
  c["pkey"] = "0x7fff";
  auto result = add(c);
  c["prevResult"] = result;
  EXPECT_EQ(run("CHECK", c).exitCode, 0);
  verbs.result.port->state = 1;
  auto out = run("CHECK", c);
  EXPECT_EQ(errorOf(out)["code"], 109);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("DOWN"), std::string::npos) << out.stdoutText;
}

TEST_F(SriovVfTest, VerbsCheckConfigIsValidated) {
  for (auto bad : {json{{"mode", "strict"}}, json{{"timeoutMs", 0}}, json{{"probe", "rc"}}, json("require")}) {
    json c = vfConfig();
    c["verbsCheck"] = bad;
    auto out = run("ADD", c);
    EXPECT_EQ(errorOf(out)["code"], 7) << bad.dump();
    EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("verbsCheck"), std::string::npos);
  }
}

}  // namespace
}  // namespace ibcni::testing
