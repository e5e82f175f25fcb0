// SPDX-License-Identifier: Apache-2.0
// Longer than 600 lines on purpose: every VF case shares one fixture (the mlx5 PF/VF layout).
// sriov mode on an InfiniBand SR-IOV VF: the mlx5 sysfs layout (PF with virtfnN, VF with physfn,
// net/ and infiniband/), IPoIB links in the fake netlink with a VF table on the PF, and a fake RDMA
// netlink. Covers GUIDs, link state, pkey, MTU and RDMA isolation, and that every failure leaves
// the node as it was.
#include <gtest/gtest.h>

#include "fakes/fake_verbs_probe.h"
#include "fakes/forwarding_devices.h"
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

class SriovVfTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    const IbVf made = addIbPfWithVf(kPf, kVfNumber, kVf, kOldGuid);
    pfIndex_ = made.pfIndex;
    vfLinkIndex_ = made.vfLink;
    mlx53_ = made.vfRdma;
    sysfs_.setPkeys("mlx5_3", 1, {"0xffff", "0x8123", "0x0000"});
    ASSERT_TRUE(sysfs_.ok()) << sysfs_.error();
    nl_.clearCalls();
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
  int unbinds() {
    const std::string writes = sysfs_.driverWrites("mlx5_core", "unbind");
    return static_cast<int>(std::count(writes.begin(), writes.end(), '\n'));
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
    const int binds = rebinds();
    const int unbound = unbinds();
    auto out = run("ADD", c);
    EXPECT_EQ(out.exitCode, 1) << FakeNetlink::opName(op);
    EXPECT_EQ(nodeState(), before) << "after a failed " << FakeNetlink::opName(op);
    // The old GUID only takes effect on the next bind: the rollback rebinds the VF too.
    EXPECT_EQ(rebinds() - binds, 2) << "one rebind for the new GUID, one for the old; failed " << FakeNetlink::opName(op);
    EXPECT_EQ(unbinds() - unbound, 2) << FakeNetlink::opName(op);
    EXPECT_TRUE(records().empty());
    nl_.clearFailures();
  }
  rdma_.failOn(FakeRdmaNetlink::Op::kMoveDevice, EPERM);
  const int binds = rebinds();
  EXPECT_EQ(run("ADD", c).exitCode, 1);
  EXPECT_EQ(nodeState(), before);
  EXPECT_EQ(rebinds() - binds, 2) << "a failed RDMA move rebinds the VF with its old GUID";
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

// A network for pods only refuses a VF bound to vfio-pci; one that leaves it to "auto" takes it to a
// VM (modes/sriov_vfio_test.cpp), where its ipam is refused.
TEST_F(SriovVfTest, VfBoundToVfioHasNoNetdev) {
  sysfs_.removeNetdev("ibp59s0v2").setDriver(kVf, "vfio-pci");
  json podsOnly = vfConfig();
  podsOnly["vfio"] = false;
  auto out = run("ADD", podsOnly);
  EXPECT_EQ(errorOf(out)["code"], 100);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("vfio-pci"), std::string::npos) << out.stdoutText;
  out = run("ADD", vfConfig());
  EXPECT_EQ(errorOf(out)["code"], 7);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("ipam"), std::string::npos) << out.stdoutText;
  EXPECT_TRUE(records().empty());
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
  ASSERT_EQ(rebinds(), 0) << "no GUID so far: no rebind";
  auto out = run("ADD", withGuid(c));
  EXPECT_EQ(errorOf(out)["code"], 7);
  const std::string msg = errorOf(out)["msg"];
  EXPECT_NE(msg.find("0x0042"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0xffff, 0x8123"), std::string::npos) << msg;
  EXPECT_NE(msg.find("subnet manager"), std::string::npos) << msg;
  EXPECT_EQ(nodeState(), before) << "the GUID set before the check is restored";
  EXPECT_EQ(rebinds(), 2) << "and the VF rebound so that the old GUID takes effect";
  EXPECT_EQ(sysfs_.driverWrites("mlx5_core", "unbind"), std::string(kVf) + "\n" + kVf + "\n");
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

// ---- GUID precedence ----

// runtimeConfig.infinibandGUID (the capability) over args.cni.guid over CNI_ARGS GUID, whichever
// others are given with it.
TEST_F(SriovVfTest, GuidPrecedenceRuntimeConfigOverArgsOverCniArgs) {
  constexpr const char* kRuntime = "c2:00:00:00:00:00:00:01";
  constexpr const char* kArgs = "c2:00:00:00:00:00:00:02";
  constexpr const char* kCniArgs = "c2:00:00:00:00:00:00:03";
  struct Case {
    bool runtime, args, cniArgs;
    const char* want;
  };
  for (const Case& k : {Case{true, true, true, kRuntime}, Case{true, true, false, kRuntime},
                        Case{true, false, true, kRuntime}, Case{false, true, true, kArgs}}) {
    const std::string name = std::string(k.runtime ? "runtime " : "") + (k.args ? "args " : "") +
                             (k.cniArgs ? "CNI_ARGS" : "");
    json c = vfConfig();
    if (k.runtime) {
      c = withGuid(c, kRuntime);
    }
    if (k.args) {
      c["args"]["cni"]["guid"] = kArgs;
    }
    std::map<std::string, std::string> env;
    if (k.cniArgs) {
      env["CNI_ARGS"] = std::string("IgnoreUnknown=1;GUID=") + kCniArgs;
    }
    auto out = run("ADD", c, env);
    ASSERT_EQ(out.exitCode, 0) << name << ": " << out.stdoutText;
    EXPECT_EQ(vfState().nodeGuid, guid(k.want)) << name;
    EXPECT_EQ(vfState().portGuid, guid(k.want)) << name;
    ASSERT_EQ(records().size(), 1u);
    EXPECT_EQ(records()[0].guid, k.want) << name;
    ASSERT_EQ(run("DEL", c, env).exitCode, 0) << name;
    EXPECT_EQ(vfState().portGuid, guid(kOldGuid)) << name;
  }
}

// ---- RDMA device: netlink first, sysfs as the fallback ----

TEST_F(SriovVfTest, RdmaNetlinksNetdevMappingWinsOverSysfs) {
  // RDMA netlink maps the VF's netdev to mlx5_9; sysfs still lists mlx5_3 under the VF.
  rdma_.addDevice(host_, "mlx5_9", vfLinkIndex_, "ibp59s0v2");
  rdma_.setMode(rdma::NetnsMode::kExclusive);
  json c = vfConfig();
  c["rdmaIsolation"] = true;
  add(c);
  EXPECT_EQ(rdma_.nsOf("mlx5_9"), pod_.inode()) << "the device RDMA netlink names moves";
  EXPECT_EQ(rdma_.nsOf("mlx5_3"), host_.inode()) << "the one sysfs names stays";
  ASSERT_EQ(records().size(), 1u);
  EXPECT_EQ(records()[0].rdmaDevice, "mlx5_9");
  ASSERT_EQ(run("DEL", c).exitCode, 0);
  EXPECT_EQ(rdma_.nsOf("mlx5_9"), host_.inode());
}

TEST_F(SriovVfTest, RdmaNetlinkMappingAloneIsEnoughForIsolation) {
  sysfs_.removePath(sysfs_.pciDirOrEmpty(kVf) + "/infiniband");  // sysfs knows no RDMA device of the VF
  rdma_ = FakeRdmaNetlink();
  rdma_.setMode(rdma::NetnsMode::kExclusive);
  rdma_.addDevice(host_, "mlx5_0", 0, "");
  rdma_.addDevice(host_, "mlx5_3", vfLinkIndex_, "ibp59s0v2");
  json c = vfConfig();
  c["rdmaIsolation"] = true;
  add(c);
  EXPECT_EQ(rdma_.nsOf("mlx5_3"), pod_.inode());
  ASSERT_EQ(records().size(), 1u);
  EXPECT_TRUE(records()[0].rdmaMoved);
  ASSERT_EQ(run("DEL", c).exitCode, 0);
  EXPECT_EQ(rdma_.nsOf("mlx5_3"), host_.inode());
}

// ---- the RDMA netns mode cannot be read ----

TEST_F(SriovVfTest, UnreadableNetnsModeWithIsolationTrueIsError7WithTheFix) {
  json c = vfConfig();
  c["rdmaIsolation"] = true;
  const std::string before = nodeState();
  for (int variant = 0; variant < 2; ++variant) {
    if (variant == 0) {
      rdma_.setPresent(false);  // no RDMA netlink at all (ib_core not loaded)
    } else {
      rdma_.setPresent(true);
      rdma_.setMode(rdma::NetnsMode::kExclusive);
      rdma_.failOn(FakeRdmaNetlink::Op::kNetnsMode, EACCES);
    }
    auto out = run("ADD", withGuid(c));
    EXPECT_EQ(out.exitCode, 1) << variant;
    EXPECT_EQ(errorOf(out)["code"], 7) << variant << ": " << out.stdoutText;
    const std::string msg = errorOf(out)["msg"];
    EXPECT_NE(msg.find("rdmaIsolation = true"), std::string::npos) << msg;
    EXPECT_NE(msg.find("netns mode"), std::string::npos) << msg;
    EXPECT_NE(msg.find("modprobe ib_core"), std::string::npos) << "the command that fixes it: " << msg;
    EXPECT_NE(msg.find("rdma system set netns exclusive"), std::string::npos) << msg;
    EXPECT_NE(msg.find("set rdmaIsolation to \"auto\" or false"), std::string::npos) << msg;
    EXPECT_EQ(nodeState(), before) << "refused before anything changed";
    EXPECT_EQ(countOps(FakeNetlink::Op::kSetVfGuids), 0);
  }
}

TEST_F(SriovVfTest, UnreadableNetnsModeWithIsolationAutoAttachesWithoutIsolating) {
  rdma_.setMode(rdma::NetnsMode::kExclusive);  // would isolate, if the mode could be read
  // ADD resolves the device twice (before and under the device lock): both reads fail.
  rdma_.failOn(FakeRdmaNetlink::Op::kNetnsMode, EIO);
  rdma_.failOn(FakeRdmaNetlink::Op::kNetnsMode, EIO);
  json c = vfConfig();
  c["rdmaIsolation"] = "auto";
  add(c);
  EXPECT_TRUE(nl_.findLink(pod_, "net1"));
  EXPECT_EQ(rdma_.nsOf("mlx5_3"), host_.inode()) << "mode unknown: the RDMA device stays shared";
  ASSERT_EQ(records().size(), 1u);
  EXPECT_FALSE(records()[0].rdmaMoved);
  ASSERT_EQ(run("DEL", c).exitCode, 0);

  rdma_.setPresent(false);
  json d = vfConfig();  // auto is the default
  add(d);
  EXPECT_TRUE(nl_.findLink(pod_, "net1"));
  EXPECT_EQ(rdma_.nsOf("mlx5_3"), host_.inode());
}

// ---- pkey without an RDMA device ----

TEST_F(SriovVfTest, PkeyWithoutAnRdmaDeviceIsError100) {
  sysfs_.removePath(sysfs_.pciDirOrEmpty(kVf) + "/infiniband");  // e.g. mlx5_ib not loaded
  json c = withGuid(vfConfig());
  c["pkey"] = "0x7fff";
  const std::string before = nodeState();
  auto out = run("ADD", c);
  EXPECT_EQ(out.exitCode, 1);
  EXPECT_EQ(errorOf(out)["code"], 100) << out.stdoutText;
  const std::string msg = errorOf(out)["msg"];
  EXPECT_NE(msg.find("pkey"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no RDMA device"), std::string::npos) << msg;
  EXPECT_NE(msg.find(kVf), std::string::npos) << "names the VF: " << msg;
  EXPECT_EQ(nodeState(), before);
  EXPECT_EQ(countOps(FakeNetlink::Op::kSetVfGuids), 0) << "refused before the GUID changes";
  EXPECT_EQ(rebinds(), 0);
  EXPECT_TRUE(records().empty());
}

// ---- the RDMA device moves before the netdev ----

TEST_F(SriovVfTest, RdmaDeviceMovesIntoThePodBeforeTheNetdev) {
  rdma_.setMode(rdma::NetnsMode::kExclusive);
  for (bool withGuidSet : {false, true}) {
    std::optional<std::size_t> netlinkCallsAtMove;
    bool netdevInHostAtMove = false;
    rdma_.onMoveDevice = [&](const os::Netns& from, std::uint32_t, const os::Netns& to) {
      if (from.inode() != host_.inode() || to.inode() != pod_.inode() || netlinkCallsAtMove) {
        return;
      }
      netlinkCallsAtMove = nl_.calls().size();
      for (const auto& l : nl_.links(host_)) {
        netdevInHostAtMove = netdevInHostAtMove || l.index == vfLinkIndex_;
      }
    };
    nl_.clearCalls();
    json c = withGuidSet ? withGuid(vfConfig()) : vfConfig();
    add(c);
    ASSERT_TRUE(netlinkCallsAtMove.has_value()) << "the RDMA device was moved";
    EXPECT_TRUE(netdevInHostAtMove) << "the VF's netdev was still in the host when its RDMA device moved";
    const auto ops = nl_.callOps();
    auto firstMove = std::find(ops.begin(), ops.end(), FakeNetlink::Op::kMoveLink);
    ASSERT_NE(firstMove, ops.end());
    EXPECT_GE(static_cast<std::size_t>(firstMove - ops.begin()), *netlinkCallsAtMove)
        << "moveLink of the VF's netdev came before the RDMA device's move";
    EXPECT_EQ(rdma_.nsOf("mlx5_3"), pod_.inode());
    rdma_.onMoveDevice = nullptr;
    ASSERT_EQ(run("DEL", c).exitCode, 0);
    EXPECT_EQ(rdma_.nsOf("mlx5_3"), host_.inode());
  }
}

// ---- a rebind that makes a new netdev and a new RDMA device ----

/// mlx5 rebinding the VF (unbind, then bind): its netdev and RDMA device are destroyed wherever
/// they are and made anew in the host namespace: a new ifindex, the kernel's name "ib0" (udev has
/// not renamed it), the driver's defaults (down, MTU 4092), the port GUID the PF now holds for the
/// VF in its address, and a new RDMA device (mlx5_9, then mlx5_10, ...) with the same pkey table.
/// Sysfs is the host's view: the VF's netdev is listed while it is in the host, under its current
/// name.
class Mlx5Rebind final : public ForwardingDevices {
 public:
  Mlx5Rebind(sysfs::Devices& inner, FakeSysfsTree& tree, FakeNetlink& nl, FakeRdmaNetlink& rdma,
             const os::Netns& host, const os::Netns& pod, int pfIndex, int vfLink)
      : ForwardingDevices(inner), tree_(tree), nl_(nl), rdma_(rdma), host_(host), pod_(pod), pfIndex_(pfIndex), vfLink_(vfLink) {
    tree_.removeNetdev("ibp59s0v2");  // listed from netlink from now on
  }

  os::SysResult<std::vector<std::string>> netdevsOfPci(const net::PciAddress& pci) override {
    if (pci.text != kVf) {
      return inner_.netdevsOfPci(pci);
    }
    return vfNetdevs();
  }
  os::SysResult<std::optional<net::PciAddress>> pciOfNetdev(const std::string& name, int ifIndex) override {
    if (auto l = vfInHost(); l && l->name == name && l->index == ifIndex) {
      return std::optional<net::PciAddress>(*net::PciAddress::parse(kVf));
    }
    return inner_.pciOfNetdev(name, ifIndex);
  }
  os::SysResult<sysfs::PciFunction> pciFunction(const net::PciAddress& pci) override {
    auto fn = inner_.pciFunction(pci);
    if (fn && pci.text == kVf) {
      fn->netdevs = vfNetdevs();
    }
    return fn;
  }
  os::SysResult<void> rebind(const net::PciAddress& pci) override {
    auto r = inner_.rebind(pci);
    if (!r || pci.text != kVf) {
      return r;
    }
    for (const os::Netns* ns : {&host_, &pod_}) {
      (void)nl_.removeLink(*ns, vfLink_);
    }
    auto vf = nl_.vf(host_, pfIndex_, kVfNumber);
    nl::Link fresh = fakeIbLink("ib0", vf && vf->portGuid ? vf->portGuid->toString() : std::string(kOldGuid));
    fresh.mtu = 4092;
    vfLink_ = nl_.addLink(host_, fresh);
    nl_.setMtuRange(host_, vfLink_, 68, 4092);
    created_.push_back(vfLink_);

    rdma_.removeDevice(rdmaName_);
    tree_.removeRdmaDevice(kVf, rdmaName_);
    rdmaName_ = "mlx5_" + std::to_string(nextRdma_++);
    rdma_.addDevice(host_, rdmaName_, 0, "");
    tree_.addRdmaDevice(kVf, rdmaName_).setPkeys(rdmaName_, 1, {"0xffff", "0x8123", "0x0000"});
    return r;
  }

  /// The ifindexes of the netdevs each rebind made, in order.
  [[nodiscard]] const std::vector<int>& created() const { return created_; }
  [[nodiscard]] const std::string& rdmaName() const { return rdmaName_; }
  [[nodiscard]] int vfLink() const { return vfLink_; }

 private:
  std::optional<nl::Link> vfInHost() {
    for (const auto& l : nl_.links(host_)) {
      if (l.index == vfLink_) {
        return l;
      }
    }
    return std::nullopt;
  }
  std::vector<std::string> vfNetdevs() {
    if (auto l = vfInHost()) {
      return {l->name};
    }
    return {};
  }

  FakeSysfsTree& tree_;
  FakeNetlink& nl_;
  FakeRdmaNetlink& rdma_;
  const os::Netns& host_;
  const os::Netns& pod_;
  int pfIndex_;
  int vfLink_;
  std::string rdmaName_ = "mlx5_3";
  int nextRdma_ = 9;
  std::vector<int> created_;
};

class SriovVfRebindTest : public SriovVfTest {
 protected:
  void SetUp() override {
    SriovVfTest::SetUp();
    ASSERT_TRUE(nl_.setLinkUp(host_, vfLinkIndex_, true));  // up, MTU 2044: not the driver's defaults
    rdma_.setMode(rdma::NetnsMode::kExclusive);
    mlx5_ = std::make_unique<Mlx5Rebind>(devices_, sysfs_, nl_, rdma_, host_, pod_, pfIndex_, vfLinkIndex_);
    ASSERT_TRUE(sysfs_.ok()) << sysfs_.error();
    rebindDeps_ = std::make_unique<plugin::Deps>(plugin::Deps{nl_, netns_, *mlx5_, rdma_, ipam_, deps_.makeStore,
                                                              deps_.lockTimeout, deps_.now, deps_.bootId,
                                                              // the rebind's netdev is there at once, under another
                                                              // name: no need to wait long for udev
                                                              std::chrono::milliseconds(20)});
    nl_.clearCalls();
  }

  plugin::Outcome runRebind(const std::string& command, const json& conf) {
    std::map<std::string, std::string> vars = {{"CNI_COMMAND", command}, {"CNI_CONTAINERID", "c1"},
                                               {"CNI_NETNS", kPodPath},  {"CNI_IFNAME", "net1"},
                                               {"CNI_PATH", "/opt/cni/bin"}};
    auto getenv = [&vars](const char* name) -> std::optional<std::string> {
      auto it = vars.find(name);
      return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    return plugin::dispatch(getenv, conf.dump(), true, *rebindDeps_);
  }

  json isolatedConfig() const {
    json c = withGuid(vfConfig());
    c["rdmaIsolation"] = true;
    c["pkey"] = "0x7fff";
    return c;
  }

  /// Links and addresses of both namespaces, the VF's GUIDs, and where the VF's RDMA device is
  /// (whatever its name now).
  std::string vfNodeState() {
    auto v = vfState();
    const ino_t rdmaNs = rdma_.nsOf(mlx5_->rdmaName());
    return snapshot(host_) + snapshot(pod_) + "vf node=" + (v.nodeGuid ? v.nodeGuid->toString() : "-") +
           " port=" + (v.portGuid ? v.portGuid->toString() : "-") +
           " rdma in " + (rdmaNs == host_.inode() ? "host" : rdmaNs == pod_.inode() ? "pod" : "?");
  }

  std::unique_ptr<Mlx5Rebind> mlx5_;
  std::unique_ptr<plugin::Deps> rebindDeps_;
};

TEST_F(SriovVfRebindTest, AddMovesTheNewNetdevAndRdmaDeviceAndDelRestoresTheVf) {
  const std::string before = vfNodeState();
  const json c = isolatedConfig();
  auto out = runRebind("ADD", c);
  ASSERT_EQ(out.exitCode, 0) << out.stdoutText;
  ASSERT_EQ(mlx5_->created().size(), 1u) << "one rebind, for the GUID";
  EXPECT_EQ(rdma_.nsOf("mlx5_3"), 0) << "destroyed by the rebind";
  EXPECT_EQ(rdma_.nsOf("mlx5_9"), pod_.inode()) << "the RDMA device the rebind made is the one isolated";
  auto net1 = nl_.findLink(pod_, "net1");
  ASSERT_TRUE(net1);
  EXPECT_EQ(net1->index, mlx5_->created()[0]) << "the netdev the rebind made is the one moved";
  EXPECT_EQ(net1->mac.text, ipoibAddress(kNewGuid));
  EXPECT_TRUE(net1->adminUp);
  EXPECT_FALSE(nl_.findLink(host_, "ib0"));
  EXPECT_FALSE(nl_.findLink(host_, "ibp59s0v2"));
  ASSERT_EQ(records().size(), 1u);
  EXPECT_EQ(records()[0].rdmaDevice, "mlx5_9");
  EXPECT_EQ(records()[0].hostName, "ibp59s0v2") << "DEL restores the name from before ADD";
  json check = c;
  check["prevResult"] = json::parse(out.stdoutText);
  EXPECT_EQ(runRebind("CHECK", check).exitCode, 0) << "CHECK looks for mlx5_9 in the pod";

  out = runRebind("DEL", c);
  ASSERT_EQ(out.exitCode, 0) << out.stdoutText;
  ASSERT_EQ(mlx5_->created().size(), 2u) << "DEL rebinds for the old GUID";
  EXPECT_EQ(rdma_.nsOf("mlx5_9"), 0);
  EXPECT_EQ(rdma_.nsOf(mlx5_->rdmaName()), host_.inode());
  auto vf = nl_.findLink(host_, "ibp59s0v2");
  ASSERT_TRUE(vf) << snapshot(host_);
  EXPECT_EQ(vf->index, mlx5_->created()[1]);
  EXPECT_EQ(vf->mtu, 2044u);
  EXPECT_TRUE(vf->adminUp);
  EXPECT_EQ(vf->alias, "");
  EXPECT_EQ(vfState().portGuid, guid(kOldGuid));
  EXPECT_EQ(vfState().nodeGuid, guid(kOldGuid));
  EXPECT_EQ(vfNodeState(), before);
  EXPECT_TRUE(records().empty());
}

TEST_F(SriovVfRebindTest, FailedAddRestoresTheNewNetdevsNameMtuStateAndTheRdmaDevice) {
  json c = isolatedConfig();
  c["linkState"] = "enable";
  const std::string before = vfNodeState();
  auto check = [&](const std::string& what) {
    EXPECT_EQ(vfNodeState(), before) << "after a failed " << what;
    auto vf = nl_.findLink(host_, "ibp59s0v2");
    ASSERT_TRUE(vf) << what << ": " << snapshot(host_);
    EXPECT_EQ(vf->index, mlx5_->created().back()) << what << ": the netdev of the rollback's rebind";
    EXPECT_EQ(vf->mtu, 2044u) << what;
    EXPECT_TRUE(vf->adminUp) << what;
    EXPECT_EQ(rdma_.nsOf(mlx5_->rdmaName()), host_.inode()) << what;
    EXPECT_EQ(vfState().linkState, nl::VfLinkState::kAuto) << what;
    EXPECT_TRUE(records().empty()) << what;
  };
  for (auto op : {FakeNetlink::Op::kSetVfLinkState, FakeNetlink::Op::kMoveLink, FakeNetlink::Op::kSetLinkUp,
                  FakeNetlink::Op::kAddAddress}) {
    const std::size_t rebinds = mlx5_->created().size();
    nl_.failOn(op, EBUSY);
    auto out = runRebind("ADD", c);
    EXPECT_EQ(out.exitCode, 1) << FakeNetlink::opName(op);
    EXPECT_EQ(mlx5_->created().size() - rebinds, 2u) << FakeNetlink::opName(op);
    check(FakeNetlink::opName(op));
    nl_.clearFailures();
  }
  rdma_.failOn(FakeRdmaNetlink::Op::kMoveDevice, EPERM);
  EXPECT_EQ(runRebind("ADD", c).exitCode, 1);
  check("moveDevice");

  c["pkey"] = "0x0042";  // not in the table: refused after the GUID changed
  auto out = runRebind("ADD", c);
  EXPECT_EQ(errorOf(out)["code"], 7) << out.stdoutText;
  check("pkey check");

  // A good ADD and DEL still work after all that.
  c["pkey"] = "0x7fff";
  ASSERT_EQ(runRebind("ADD", c).exitCode, 0);
  ASSERT_EQ(runRebind("DEL", c).exitCode, 0);
  EXPECT_EQ(vfNodeState(), before);
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

// The VF's RDMA device is gone (mlx5_ib not loaded): the PF is InfiniBand, so the fix is the driver.
TEST_F(SriovVfTest, VerbsCheckRequireOnAVfWithoutRdmaDeviceIs109NamingTheDriverAndRollsBack) {
  FakeVerbsProbe verbs;
  deps_.verbs = &verbs;
  sysfs_.removePath(sysfs_.pciDirOrEmpty(kVf) + "/infiniband");
  ASSERT_TRUE(rdma_.removeDevice("mlx5_3"));
  json c = withGuid(vfConfig());
  c["verbsCheck"] = {{"mode", "require"}};
  const std::string before = nodeState();
  auto out = run("ADD", c);
  EXPECT_EQ(errorOf(out)["code"], 109) << out.stdoutText;
  const std::string msg = errorOf(out)["msg"];
  EXPECT_NE(msg.find("deviceID = \"0000:3b:00.3\" (netdev ibp59s0v2, PCI 0000:3b:00.3, driver mlx5_core) has no "
                     "RDMA device: it is a VF of PF 0000:3b:00.0, which is InfiniBand (RDMA device mlx5_0)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("modprobe mlx5_ib"), std::string::npos) << msg;
  EXPECT_EQ(nodeState(), before) << "GUID, links and IPAM are all back";
  EXPECT_EQ(vfState().portGuid, guid(kOldGuid));
  EXPECT_TRUE(ipam_.allocations.empty());
  EXPECT_TRUE(records().empty());
  EXPECT_TRUE(verbs.requests.empty()) << "no RDMA device: nothing to probe";

  // warn: ADD succeeds; CHECK with require fails with the same cause.
  c = vfConfig();
  c["verbsCheck"] = {{"mode", "warn"}};
  auto result = add(c);
  c["prevResult"] = result;
  c["verbsCheck"] = {{"mode", "require"}};
  out = run("CHECK", c);
  EXPECT_EQ(errorOf(out)["code"], 109) << out.stdoutText;
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("has no RDMA device: it is a VF of PF 0000:3b:00.0"),
            std::string::npos)
      << out.stdoutText;
  c["verbsCheck"] = {{"mode", "off"}};
  EXPECT_EQ(run("CHECK", c).exitCode, 0);
}

// Exclusive RDMA netns mode with rdmaIsolation false: mlx5_3 exists but stays in the host, where
// the pod cannot see it.
TEST_F(SriovVfTest, VerbsCheckRequireInExclusiveModeWithoutIsolationIs109) {
  FakeVerbsProbe verbs;
  verbs.result = FakeVerbsProbe::healthyIb("mlx5_3");
  deps_.verbs = &verbs;
  rdma_.setMode(rdma::NetnsMode::kExclusive);
  json c = vfConfig();
  c["rdmaIsolation"] = false;
  c["verbsCheck"] = {{"mode", "require"}};
  const std::string before = nodeState();
  auto out = run("ADD", c);
  EXPECT_EQ(errorOf(out)["code"], 109) << out.stdoutText;
  const std::string msg = errorOf(out)["msg"];
  EXPECT_NE(msg.find("RDMA device mlx5_3 of deviceID = \"0000:3b:00.3\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("exclusive netns mode"), std::string::npos) << msg;
  EXPECT_NE(msg.find("set rdmaIsolation to \"auto\" (the default) or true"), std::string::npos) << msg;
  EXPECT_EQ(nodeState(), before);
  EXPECT_EQ(rdma_.nsOf("mlx5_3"), host_.inode());
  EXPECT_TRUE(records().empty());
  // The default (auto) moves it: the same ADD passes.
  c.erase("rdmaIsolation");
  add(c);
  EXPECT_EQ(rdma_.nsOf("mlx5_3"), pod_.inode());
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
