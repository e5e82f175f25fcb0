// SPDX-License-Identifier: Apache-2.0
// sriov mode with guidPool on the mlx5 VF layout of the fakes, over GUID pools in memory: which VFs
// get a pool GUID, that it is written ahead and undone by a failed ADD, and that DEL, GC and a DEL
// without a record give it back only once the VF no longer carries it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fakes/fake_guid_pools.h"
#include "ipam/embedded_ipam_guids.h"
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr const char* kFirst = "02:00:00:00:00:00:01:00";
constexpr const char* kInRange = "02:00:00:00:00:00:01:05";

class SriovGuidPoolTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    pfIndex_ = addIbPfWithVf(kPf, kVfNumber, kVf, kOldGuid).pfIndex;
    deps_.guids = &guids_;
    nl_.clearCalls();
  }

  json poolConfig(const std::string& assign = "when-unset") const {
    json c = config();
    c.erase("device");
    c.erase("mtu");
    c["deviceID"] = kVf;
    c["guidPool"] = {{"range", std::string(kFirst) + "-02:00:00:00:00:00:01:ff"},
                     {"blockSize", 256},
                     {"pool", "gpool"},
                     {"assign", assign},
                     {"dataDir", stateDir_ + "/ipam"}};
    return c;
  }
  std::string storeDir() const { return stateDir_ + "/ipam/.guid/gpool"; }

  /// Gives every VF of the PF the GUID `g` (0: none, as an unconfigured mlx5 VF).
  void setVfGuids(std::uint64_t g) {
    std::vector<nl::VfInfo> vfs;
    for (std::uint32_t i = 0; i < 4; ++i) {
      nl::VfInfo v;
      v.vf = i;
      v.linkState = nl::VfLinkState::kAuto;
      v.nodeGuid = v.portGuid = net::Guid{g};
      vfs.push_back(v);
    }
    nl_.setVfs(host_, pfIndex_, vfs);
  }
  nl::VfInfo vfState() { return nl_.vf(host_, pfIndex_, kVfNumber).value_or(nl::VfInfo{}); }
  std::string vfGuids() {
    auto v = vfState();
    return (v.nodeGuid ? v.nodeGuid->toString() : "-") + "/" + (v.portGuid ? v.portGuid->toString() : "-");
  }
  int countOps(FakeNetlink::Op op) {
    auto ops = nl_.callOps();
    return static_cast<int>(std::count(ops.begin(), ops.end(), op));
  }
  /// What the pool holds for (network ibnet, cid, net1) in its store.
  std::optional<net::Guid> poolHolds(const std::string& cid = "c1") {
    auto& s = guids_.stores[storeDir()];
    auto it = s.find({"ibnet", cid, "net1"});
    return it == s.end() ? std::nullopt : std::optional<net::Guid>(it->second);
  }

  FakeGuidPools guids_;
  int pfIndex_ = 0;
};

TEST_F(SriovGuidPoolTest, AVfWithoutGuidGetsOneFromThePoolAsNodeAndPortGuidAndDelGivesItBack) {
  setVfGuids(0);
  add(poolConfig());
  EXPECT_EQ(vfGuids(), std::string(kFirst) + "/" + kFirst);
  EXPECT_EQ(poolHolds(), guid(kFirst));
  ASSERT_EQ(records().size(), 1u);
  EXPECT_EQ(records()[0].guid, kFirst);
  EXPECT_EQ(records()[0].guidPool, "gpool");
  EXPECT_EQ(records()[0].guidPoolDir, storeDir());
  EXPECT_EQ(records()[0].oldPortGuid, "00:00:00:00:00:00:00:00");

  auto out = run("DEL", poolConfig());
  ASSERT_EQ(out.exitCode, 0) << out.stdoutText;
  EXPECT_EQ(vfGuids(), "ff:ff:ff:ff:ff:ff:ff:ff/ff:ff:ff:ff:ff:ff:ff:ff") << "left without a GUID, as it came";
  EXPECT_EQ(guids_.count(), 0u);
  EXPECT_TRUE(records().empty());
  // DEL again: nothing left to do, still success.
  EXPECT_EQ(run("DEL", poolConfig()).exitCode, 0);
}

TEST_F(SriovGuidPoolTest, WhenUnsetLeavesAVfWithAGuidOfItsOwnAlone) {
  add(poolConfig());
  EXPECT_EQ(vfGuids(), std::string(kOldGuid) + "/" + kOldGuid);
  EXPECT_EQ(countOps(FakeNetlink::Op::kSetVfGuids), 0);
  EXPECT_TRUE(guids_.calls.empty());
  EXPECT_TRUE(records()[0].guidPoolDir.empty());
}

TEST_F(SriovGuidPoolTest, AssignAlwaysReplacesTheVfsGuidUntilDel) {
  add(poolConfig("always"));
  EXPECT_EQ(vfGuids(), std::string(kFirst) + "/" + kFirst);
  ASSERT_EQ(run("DEL", poolConfig("always")).exitCode, 0);
  EXPECT_EQ(vfGuids(), std::string(kOldGuid) + "/" + kOldGuid) << "its own GUID comes back";
  EXPECT_EQ(guids_.count(), 0u);
}

TEST_F(SriovGuidPoolTest, ARequestedGuidInsideTheRangeIsClaimedAndOneHeldElsewhereIs11) {
  guids_.stores[storeDir()][{"ibnet", "other", "net1"}] = guid(kInRange);
  json c = poolConfig();
  c["runtimeConfig"]["infinibandGUID"] = kInRange;
  const std::string before = vfGuids();
  auto out = run("ADD", c);
  ASSERT_EQ(out.exitCode, 1);
  EXPECT_EQ(errorOf(out)["code"], 11);
  const std::string msg = errorOf(out)["msg"];
  EXPECT_NE(msg.find("other/net1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("runtimeConfig.infinibandGUID"), std::string::npos) << msg;
  EXPECT_EQ(vfGuids(), before);
  EXPECT_EQ(countOps(FakeNetlink::Op::kSetVfGuids), 0);
  EXPECT_TRUE(records().empty());

  guids_.stores[storeDir()].clear();
  add(c);
  EXPECT_EQ(poolHolds(), guid(kInRange));
  EXPECT_EQ(vfGuids(), std::string(kInRange) + "/" + kInRange);
}

TEST_F(SriovGuidPoolTest, ARequestedGuidOutsideTheRangeIsSetWithoutThePool) {
  json c = poolConfig("always");
  c["runtimeConfig"]["infinibandGUID"] = kNewGuid;
  add(c);
  EXPECT_EQ(vfGuids(), std::string(kNewGuid) + "/" + kNewGuid);
  EXPECT_TRUE(guids_.calls.empty());
  EXPECT_TRUE(records()[0].guidPoolDir.empty());
}

// A later step fails: the VF gets its old GUID back, the pool its GUID, and no record is left.
TEST_F(SriovGuidPoolTest, AFailedAddGivesTheGuidBackToThePoolAndTheVf) {
  setVfGuids(0);
  for (auto op : {FakeNetlink::Op::kMoveLink, FakeNetlink::Op::kSetLinkUp}) {
    nl_.failOn(op, EBUSY);
    auto out = run("ADD", poolConfig());
    EXPECT_EQ(out.exitCode, 1) << FakeNetlink::opName(op);
    EXPECT_EQ(vfGuids(), "ff:ff:ff:ff:ff:ff:ff:ff/ff:ff:ff:ff:ff:ff:ff:ff") << FakeNetlink::opName(op);
    EXPECT_EQ(guids_.count(), 0u) << FakeNetlink::opName(op);
    EXPECT_TRUE(records().empty());
    nl_.clearFailures();
  }
  guids_.failures["allocate"] = cni::Error{cni::Errc::kIpamExhausted, "guidPool gpool has no free GUID", {}};
  auto out = run("ADD", poolConfig());
  EXPECT_EQ(errorOf(out)["code"], 108);
  EXPECT_EQ(countOps(FakeNetlink::Op::kSetVfGuids), 4) << "the two ADDs above set a GUID and put it back; this one none";
  EXPECT_TRUE(records().empty());
}

TEST_F(SriovGuidPoolTest, DelKeepsThePoolGuidWhileTheVfStillCarriesIt) {
  setVfGuids(0);
  add(poolConfig());
  nl_.failOn(FakeNetlink::Op::kSetVfGuids, EBUSY);
  auto out = run("DEL", poolConfig());
  EXPECT_EQ(out.exitCode, 1);
  EXPECT_EQ(poolHolds(), guid(kFirst)) << "another VF must not get it while this one has it";
  EXPECT_EQ(records().size(), 1u);
  ASSERT_EQ(run("DEL", poolConfig()).exitCode, 0);
  EXPECT_EQ(guids_.count(), 0u);
}

TEST_F(SriovGuidPoolTest, DelAfterARebootReleasesWithoutTouchingTheVf) {
  setVfGuids(0);
  add(poolConfig());
  bootId_ = "boot-2";
  nl_.clearCalls();
  ASSERT_EQ(run("DEL", poolConfig()).exitCode, 0);
  EXPECT_EQ(countOps(FakeNetlink::Op::kSetVfGuids), 0);
  EXPECT_EQ(guids_.count(), 0u);
}

TEST_F(SriovGuidPoolTest, DelWithoutARecordReleasesFromTheConfiguredPool) {
  guids_.stores[storeDir()][{"ibnet", "c1", "net1"}] = guid(kInRange);
  guids_.stores[storeDir()][{"other-net", "c1", "net1"}] = guid(kFirst);
  ASSERT_EQ(run("DEL", poolConfig()).exitCode, 0);
  EXPECT_FALSE(poolHolds());
  EXPECT_EQ(guids_.count(), 1u) << "another network's allocation of the same attachment stays";
}

// A VF that carries a GUID of the pool (a lost record, a hand-set GUID) is claimed, so that the pool
// never hands that GUID to a second VF, and DEL leaves the VF without it.
TEST_F(SriovGuidPoolTest, AVfCarryingAPoolGuidClaimsItAndIsLeftWithoutItByDel) {
  setVfGuids(guid(kInRange).value);
  add(poolConfig());
  EXPECT_EQ(poolHolds(), guid(kInRange));
  EXPECT_EQ(sysfs_.driverWrites("mlx5_core", "bind"), "") << "the VF has that GUID already: no rebind";
  ASSERT_EQ(run("DEL", poolConfig()).exitCode, 0);
  EXPECT_EQ(vfGuids(), "ff:ff:ff:ff:ff:ff:ff:ff/ff:ff:ff:ff:ff:ff:ff:ff");
  EXPECT_EQ(guids_.count(), 0u);
}

TEST_F(SriovGuidPoolTest, GuidPoolOnADeviceThatIsNoVfIs7) {
  json c = config();
  c["guidPool"] = poolConfig()["guidPool"];
  const json error = errorOf(run("ADD", c));
  EXPECT_EQ(error["code"], 7);
  EXPECT_THAT(error["msg"].get<std::string>(), AllOf(HasSubstr("guidPool is set"), HasSubstr("no SR-IOV VF")));
}

TEST_F(SriovGuidPoolTest, AProgramWithoutGuidPoolsRefusesTheKey) {
  deps_.guids = nullptr;
  setVfGuids(0);
  auto out = run("ADD", poolConfig());
  EXPECT_EQ(errorOf(out)["code"], 2);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("guidPool"), std::string::npos);
  EXPECT_TRUE(records().empty());
}

TEST_F(SriovGuidPoolTest, GcReleasesTheGuidsOfAttachmentsNotListed) {
  setVfGuids(0);
  add(poolConfig());
  guids_.stores[storeDir()][{"ibnet", "gone", "net1"}] = guid(kInRange);
  json c = poolConfig();
  c["cniVersion"] = "1.1.0";
  c["cni.dev/valid-attachments"] = json::array({{{"containerID", "c1"}, {"ifname", "net1"}}});
  auto out = run("GC", c);
  ASSERT_EQ(out.exitCode, 0) << out.stdoutText;
  EXPECT_EQ(poolHolds(), guid(kFirst));
  EXPECT_FALSE(poolHolds("gone"));
}

// The partition is the subnet manager's: a pool GUID it has not admitted fails the pkey check with
// that fix, and the failed ADD gives the GUID back.
TEST_F(SriovGuidPoolTest, APkeyTheNewGuidIsNoMemberOfSaysTheSubnetManagerHasNotAdmittedIt) {
  setVfGuids(0);
  sysfs_.setPkeys("mlx5_3", 1, {"0xffff"});
  json c = poolConfig();
  c["pkey"] = "0x8124";
  const json error = errorOf(run("ADD", c));
  EXPECT_EQ(error["code"], 7);
  EXPECT_THAT(error["msg"].get<std::string>(),
              AllOf(HasSubstr("pkey = 0x0124"), HasSubstr("GUID 02:00:00:00:00:00:01:00 came from guidPool gpool")));
  EXPECT_EQ(guids_.count(), 0u);
  EXPECT_TRUE(records().empty());
}

TEST_F(SriovGuidPoolTest, CheckFailsWhenThePoolNoLongerHoldsTheGuid) {
  setVfGuids(0);
  json c = poolConfig();
  c["prevResult"] = add(c);
  // mlx5 shows the new GUID in the netdev made by the rebind (this fake keeps the old address).
  const std::string mac = ipoibAddress(kFirst);
  ASSERT_TRUE(nl_.setHwAddress(pod_, nl_.findLink(pod_, "net1")->index, *net::HwAddress::parse(mac)));
  for (auto& i : c["prevResult"]["interfaces"]) {
    i["mac"] = mac;
  }
  ASSERT_EQ(run("CHECK", c).exitCode, 0) << "the pool holds what the VF carries";
  guids_.stores[storeDir()].clear();
  auto out = run("CHECK", c);
  EXPECT_EQ(errorOf(out)["code"], 107) << out.stdoutText;
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find(kFirst), std::string::npos);
}

// The same over the embedded GUID pools ibcni runs (node-local, the store on disk): the GUID is in
// the pool's store under the record's directory from ADD to DEL, and DEL leaves nothing.
TEST_F(SriovGuidPoolTest, OverTheEmbeddedGuidPoolsTheStoreHoldsTheGuidFromAddToDel) {
  ipam::EmbeddedGuidPools real;
  deps_.guids = &real;
  setVfGuids(0);
  add(poolConfig());
  ASSERT_EQ(records().size(), 1u);
  EXPECT_EQ(records()[0].guidPoolDir, storeDir());
  auto held = real.held(storeDir(), {"c1", "net1"});
  ASSERT_TRUE(held && *held) << (held ? "none" : held.error().msg);
  EXPECT_EQ((*held)->toString(), kFirst);
  EXPECT_EQ(vfGuids(), std::string(kFirst) + "/" + kFirst);
  ASSERT_EQ(run("DEL", poolConfig()).exitCode, 0);
  held = real.held(storeDir(), {"c1", "net1"});
  ASSERT_TRUE(held);
  EXPECT_FALSE(*held);
}

}  // namespace
}  // namespace ibcni::testing
