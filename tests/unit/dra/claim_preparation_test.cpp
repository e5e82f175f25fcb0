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

#include "plugin/dra/cdi_spec.h"
#include "unit/dra/preparation_fixture.h"

namespace ibcni::dra {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_F(ClaimPreparationTest, OneVfGetsItsCdiDeviceAndTheSpecHoldsItsNodes) {
  api_.claims["ml/nics"] = claimOf(kUid, {vfName(3)});
  auto p = preparation();
  PrepareOutcome out = p.prepare(ref_);
  ASSERT_EQ(out.error, "");
  EXPECT_THAT(api_.reads, ElementsAre(Read::kLatest));  // the uid and allocation checked against etcd
  ASSERT_EQ(out.devices.size(), 1U);
  EXPECT_EQ(out.devices[0].deviceName, vfName(3));
  EXPECT_EQ(out.devices[0].poolName, kNode);
  EXPECT_THAT(out.devices[0].requestNames, ElementsAre("rail-0"));
  EXPECT_THAT(out.devices[0].cdiDeviceIds, ElementsAre(std::string("ibcni.io/vf=") + kUid + "-" + vfName(3),
                                                       std::string("ibcni.io/metadata=") + kUid + "_rail-0"));
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
  left[kUid] = {ref_, ClaimRecord::State::kPreparing, {}, {}, bootId_};
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
