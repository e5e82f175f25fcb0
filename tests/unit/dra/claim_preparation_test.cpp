// SPDX-License-Identifier: Apache-2.0
// Prepare and Unprepare of claims over a FakeSysfsTree (read by the production sysfs readers), an
// in-memory API and a real checkpoint file: the devices allocated to this driver and node, their
// CDI spec, the record written ahead, repeats, restarts, and what a killed Prepare leaves.
#include "plugin/dra/claim_preparation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "fakes/fake_sysfs_tree.h"
#include "plugin/dra/cdi_spec.h"
#include "plugin/sysfs/sysfs_devices.h"
#include "plugin/sysfs/sysfs_inventory.h"
#include "support/temp_dir.h"
#include "unit/dra/dra_devices.h"
#include "unit/dra/memory_claims.h"

namespace ibcni::dra {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kNode = "node-a";
constexpr const char* kUid = "0f5e2c9a-7d41-4b0e-9a43-5d6f7e8a9b01";

/// A claim of `uid` whose requests got `devices` (request "rail-<i>", this driver, pool `pool`).
json claimOf(const std::string& uid, const std::vector<std::string>& devices, const std::string& pool = kNode) {
  json results = json::array();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    results.push_back({{"request", "rail-" + std::to_string(i)}, {"driver", "ibcni.io"}, {"pool", pool},
                       {"device", devices[i]}});
  }
  return {{"metadata", {{"name", "nics"}, {"namespace", "ml"}, {"uid", uid}}},
          {"status", {{"allocation", {{"devices", {{"results", results}}}}}}}};
}

std::string vfName(int n) { return eightVfsName(n); }

class ClaimPreparationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    addEightVfs(sys_);
    ASSERT_TRUE(sys_.ok()) << sys_.error();
    std::filesystem::create_directories(cdiDir());
  }

  std::string cdiDir() const { return dir_.path() + "/cdi"; }
  std::string checkpointPath() const { return dir_.path() + "/claims.json"; }
  ClaimPreparation preparation() {
    return ClaimPreparation(api_, devices_, inventory_, files_, {.driver = "ibcni.io", .nodeName = kNode});
  }
  json specOnDisk() const {
    std::ifstream in(cdiSpecPath(cdiDir(), kUid));
    return json::parse(in, nullptr, false);
  }
  bool specExists() const { return std::filesystem::exists(cdiSpecPath(cdiDir(), kUid)); }
  ClaimRecords records() const { return ClaimCheckpoint(checkpointPath()).load().value(); }

  testing::FakeSysfsTree sys_;
  sysfs::SysfsDevices devices_{sys_.root()};
  sysfs::SysfsInventory inventory_{sys_.root()};
  MemoryClaims api_;
  testing::TempDir dir_{"ibcni-claims-"};
  const ClaimRef ref_{"ml", kUid, "nics"};
  FileClaimEffects files_{ClaimCheckpoint(checkpointPath()), cdiDir()};
};

TEST_F(ClaimPreparationTest, OneVfGetsItsCdiDeviceAndTheSpecHoldsItsNodes) {
  api_.claims["ml/nics"] = claimOf(kUid, {vfName(3)});
  auto p = preparation();
  PrepareOutcome out = p.prepare(ref_);
  ASSERT_EQ(out.error, "");
  ASSERT_EQ(out.devices.size(), 1U);
  EXPECT_EQ(out.devices[0].deviceName, vfName(3));
  EXPECT_EQ(out.devices[0].poolName, kNode);
  EXPECT_THAT(out.devices[0].requestNames, ElementsAre("rail-0"));
  EXPECT_THAT(out.devices[0].cdiDeviceIds, ElementsAre(std::string("ibcni.io/vf=") + kUid + "-" + vfName(3)));
  json spec = specOnDisk();
  ASSERT_EQ(spec["devices"].size(), 1U);
  const json& edits = spec["devices"][0]["containerEdits"];
  EXPECT_EQ(edits["deviceNodes"][0]["path"], "/dev/infiniband/uverbs4");  // VF 3's RDMA device is mlx5_4
  EXPECT_EQ(edits["deviceNodes"][0]["minor"], 196);
  EXPECT_EQ(edits["deviceNodes"].back()["path"], "/dev/infiniband/rdma_cm");
  EXPECT_THAT(edits["env"].dump(), HasSubstr("IBCNI_RAIL_0_RDMA_DEVICE=mlx5_4"));
  auto r = records();
  ASSERT_EQ(r.count(kUid), 1U);
  EXPECT_EQ(r[kUid].state, ClaimRecord::State::kPrepared);
}

TEST_F(ClaimPreparationTest, EightVfsAreEightDevicesOfOneSpec) {
  std::vector<std::string> names;
  for (int n = 0; n < 8; ++n) {
    names.push_back(vfName(n));
  }
  api_.claims["ml/nics"] = claimOf(kUid, names);
  auto p = preparation();
  PrepareOutcome out = p.prepare(ref_);
  ASSERT_EQ(out.error, "");
  ASSERT_EQ(out.devices.size(), 8U);
  EXPECT_EQ(out.devices[7].requestNames, std::vector<std::string>{"rail-7"});
  EXPECT_EQ(specOnDisk()["devices"].size(), 8U);
}

TEST_F(ClaimPreparationTest, ARepeatAndARestartAnswerFromTheRecordWithoutACall) {
  api_.claims["ml/nics"] = claimOf(kUid, {vfName(0), vfName(1)});
  PrepareOutcome first;
  {
    auto p = preparation();
    first = p.prepare(ref_);
    ASSERT_EQ(first.error, "");
    EXPECT_EQ(p.prepare(ref_).devices.size(), 2U);
  }
  EXPECT_EQ(api_.calls, 1);
  api_.claims.clear();  // the API is gone: a restarted driver still knows its claim
  auto restarted = preparation();
  PrepareOutcome again = restarted.prepare(ref_);
  ASSERT_EQ(again.error, "");
  ASSERT_EQ(again.devices.size(), 2U);
  EXPECT_EQ(again.devices[1].cdiDeviceIds, first.devices[1].cdiDeviceIds);
  EXPECT_EQ(api_.calls, 1);
  EXPECT_EQ(restarted.unprepare(ref_), "");
  EXPECT_FALSE(specExists());
  EXPECT_TRUE(records().empty());
}

TEST_F(ClaimPreparationTest, AClaimOfAnotherUidIsRefusedAndNothingIsPrepared) {
  api_.claims["ml/nics"] = claimOf("another-uid", {vfName(0)});
  auto p = preparation();
  PrepareOutcome out = p.prepare(ref_);
  EXPECT_THAT(out.error, HasSubstr("has uid another-uid"));
  EXPECT_TRUE(out.devices.empty());
  EXPECT_FALSE(specExists());
  EXPECT_TRUE(records().empty());
}

TEST_F(ClaimPreparationTest, OtherDriversResultsAreNotOursAndAnotherNodesPoolIsAnError) {
  json claim = claimOf(kUid, {vfName(0)});
  claim["status"]["allocation"]["devices"]["results"].push_back(
      {{"request", "gpu"}, {"driver", "gpu.example.com"}, {"pool", kNode}, {"device", "gpu-0"}});
  api_.claims["ml/nics"] = claim;
  auto p = preparation();
  PrepareOutcome out = p.prepare(ref_);
  ASSERT_EQ(out.error, "");
  EXPECT_EQ(out.devices.size(), 1U);
  EXPECT_EQ(p.unprepare(ref_), "");

  api_.claims["ml/nics"] = claimOf(kUid, {vfName(0)}, "node-b");
  out = p.prepare(ref_);
  EXPECT_THAT(out.error, HasSubstr("not one of node node-a's"));
  api_.claims["ml/nics"] = claimOf(kUid, {});
  EXPECT_THAT(p.prepare(ref_).error, HasSubstr("no device of driver ibcni.io allocated"));
}

TEST_F(ClaimPreparationTest, ADeviceNotInSysfsIsAnErrorAndWritesNothing) {
  api_.claims["ml/nics"] = claimOf(kUid, {vfName(0), "vf-0000-3b-02-7"});
  auto p = preparation();
  PrepareOutcome out = p.prepare(ref_);
  EXPECT_THAT(out.error, HasSubstr("device vf-0000-3b-02-7 (request rail-1) is not on this node"));
  EXPECT_FALSE(specExists());
  EXPECT_TRUE(records().empty());
}

TEST_F(ClaimPreparationTest, AVfWithoutAGuidIsRefusedNamingItAndTheFixAndNothingIsWritten) {
  sys_.setNodeGuid("mlx5_3", "0000:0000:0000:0000");  // VF 2: all zero, as a VF is before anyone set it
  api_.claims["ml/nics"] = claimOf(kUid, {vfName(1), vfName(2)});
  auto p = preparation();
  PrepareOutcome out = p.prepare(ref_);
  EXPECT_THAT(out.error, HasSubstr("device " + vfName(2) + " (request rail-1, VF 2 of 0000:3b:00.0) has no GUID"));
  EXPECT_THAT(out.error, HasSubstr("ip link set ib0 vf N node_guid"));
  EXPECT_TRUE(out.devices.empty());
  EXPECT_FALSE(specExists());
  EXPECT_TRUE(records().empty());
}

TEST_F(ClaimPreparationTest, UnprepareOfAClaimNeverPreparedSucceeds) {
  auto p = preparation();
  EXPECT_EQ(p.unprepare(ref_), "");
  EXPECT_EQ(p.unprepare({"ml", "no-such-uid", "gone"}), "");
  EXPECT_EQ(api_.calls, 0);
}

TEST_F(ClaimPreparationTest, AKilledPrepareIsUndoneByUnprepareFromItsRecord) {
  // Killed after its spec was written, before the record said prepared: the record is "preparing".
  ClaimRecords left;
  left[kUid] = {ref_, ClaimRecord::State::kPreparing, {}};
  ASSERT_TRUE(ClaimCheckpoint(checkpointPath()).store(left));
  std::ofstream(cdiSpecPath(cdiDir(), kUid)) << "{}";
  auto p = preparation();
  EXPECT_EQ(p.unprepare(ref_), "");
  EXPECT_FALSE(specExists());
  EXPECT_TRUE(records().empty());
  // And a repeat of the kubelet's Prepare instead prepares it anew (a "preparing" record is no answer).
  ASSERT_TRUE(ClaimCheckpoint(checkpointPath()).store(left));
  api_.claims["ml/nics"] = claimOf(kUid, {vfName(5)});
  PrepareOutcome out = p.prepare(ref_);
  ASSERT_EQ(out.error, "");
  EXPECT_EQ(api_.calls, 1);
  EXPECT_EQ(records()[kUid].state, ClaimRecord::State::kPrepared);
}

TEST_F(ClaimPreparationTest, ACheckpointThatIsNotOneStopsPrepareNamingTheFile) {
  std::ofstream(checkpointPath()) << "not json";
  api_.claims["ml/nics"] = claimOf(kUid, {vfName(0)});
  auto p = preparation();
  EXPECT_THAT(p.prepare(ref_).error, HasSubstr("claims.json: not a checkpoint"));
  EXPECT_FALSE(specExists());
}

}  // namespace
}  // namespace ibcni::dra
