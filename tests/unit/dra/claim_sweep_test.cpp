// SPDX-License-Identifier: Apache-2.0
// ibcni-dra's sweep of claims the API server no longer has (plugin/dra/claim_sweep): when a claim is
// seen gone (404, or its name taken by a claim of another uid), for how long, and what is undone then
// (the preparation's Unprepare: VFs, pool GUIDs, CDI spec, metadata), over the preparation fixture.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "plugin/dra/claim_sweep.h"
#include "plugin/dra/device_metadata.h"
#include "unit/dra/preparation_fixture.h"

namespace ibcni::dra {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using std::chrono::seconds;

constexpr seconds kGrace{60};
const ClaimSweep::Clock::time_point kT0{seconds(1000)};

/// The sweep's preparer: counts the Unprepares, and fails them while `failWith` is set.
class CountingPreparer final : public ClaimPreparer {
 public:
  PrepareOutcome prepare(const ClaimRef&) override { return {}; }
  std::string unprepare(const ClaimRef& claim) override {
    unprepared.push_back(claim.uid);
    return failWith;
  }
  std::vector<std::string> unprepared;
  std::string failWith;
};

/// A record of claim ml/nics of `uid`, prepared.
ClaimRecords recordOf(const std::string& uid) {
  ClaimRecord r;
  r.ref = {"ml", uid, "nics"};
  r.state = ClaimRecord::State::kPrepared;
  return {{uid, r}};
}

class ClaimSweepTest : public ::testing::Test {
 protected:
  MemoryClaims api_;
  CountingPreparer preparer_;
  ClaimSweep sweep_{api_, preparer_, kGrace};
};

TEST_F(ClaimSweepTest, AClaimTheServerStillHasIsLeftAlone) {
  api_.claims["ml/nics"] = claimOf(kUid, {vfName(0)});
  for (int i = 0; i < 3; ++i) {
    auto report = sweep_.pass(recordOf(kUid), kT0 + i * kGrace);
    EXPECT_TRUE(report.undone.empty());
    EXPECT_TRUE(report.errors.empty());
  }
  EXPECT_TRUE(preparer_.unprepared.empty());
}

TEST_F(ClaimSweepTest, AClaimGoneIsUndoneOnlyOnceItHasBeenGoneForTheGrace) {
  EXPECT_TRUE(sweep_.pass(recordOf(kUid), kT0).undone.empty());
  EXPECT_TRUE(sweep_.pass(recordOf(kUid), kT0 + kGrace - seconds(1)).undone.empty());
  EXPECT_TRUE(preparer_.unprepared.empty());
  auto report = sweep_.pass(recordOf(kUid), kT0 + kGrace);
  EXPECT_THAT(report.undone, ElementsAre("claim ml/nics (uid " + std::string(kUid) + ")"));
  EXPECT_THAT(preparer_.unprepared, ElementsAre(kUid));
}

TEST_F(ClaimSweepTest, AClaimMadeAgainUnderItsNameWithAnotherUidMeansTheRecordedOneIsGone) {
  api_.claims["ml/nics"] = claimOf("1a2b3c4d-0000-4000-8000-000000000002", {vfName(0)});
  ClaimSweep atOnce(api_, preparer_, seconds(0));
  EXPECT_EQ(atOnce.pass(recordOf(kUid), kT0).undone.size(), 1U);
  EXPECT_THAT(preparer_.unprepared, ElementsAre(kUid));
}

TEST_F(ClaimSweepTest, AClaimNoLongerAllocatedMeansItsPodsAreGone) {
  json deallocated = claimOf(kUid, {vfName(0)});
  deallocated.erase("status");
  api_.claims["ml/nics"] = deallocated;
  ClaimSweep atOnce(api_, preparer_, seconds(0));
  EXPECT_EQ(atOnce.pass(recordOf(kUid), kT0).undone.size(), 1U);
}

TEST_F(ClaimSweepTest, AClaimThatComesBackIsCountedGoneAfreshFromItsNextAbsence) {
  (void)sweep_.pass(recordOf(kUid), kT0);  // gone
  api_.claims["ml/nics"] = claimOf(kUid, {vfName(0)});
  EXPECT_TRUE(sweep_.pass(recordOf(kUid), kT0 + kGrace).undone.empty());  // back (a read that lagged)
  api_.claims.clear();
  EXPECT_TRUE(sweep_.pass(recordOf(kUid), kT0 + 2 * kGrace).undone.empty());  // gone again, since now
  EXPECT_TRUE(sweep_.pass(recordOf(kUid), kT0 + 3 * kGrace - seconds(1)).undone.empty());
  EXPECT_EQ(sweep_.pass(recordOf(kUid), kT0 + 3 * kGrace).undone.size(), 1U);
}

// The sweep is a backstop: a claim the server has is read from its watch cache, once per grace
// period however often the loop passes; one seen gone is read again only once its grace has run.
TEST_F(ClaimSweepTest, EachClaimIsReadFromTheCacheAtMostOncePerGrace) {
  api_.claims["ml/nics"] = claimOf(kUid, {vfName(0)});
  for (int pass = 0; pass <= 12; ++pass) {  // every 10 s for two minutes
    (void)sweep_.pass(recordOf(kUid), kT0 + pass * seconds(10));
  }
  EXPECT_EQ(api_.calls, 3);  // at 0, 60 and 120 s
  EXPECT_THAT(api_.reads, ::testing::Each(Read::kCached));
  api_.claims.clear();
  api_.calls = 0;
  for (int pass = 13; pass <= 23; ++pass) {  // read gone at 180 s; read again (and undone) at 240 s
    (void)sweep_.pass(recordOf(kUid), kT0 + pass * seconds(10));
  }
  EXPECT_EQ(api_.calls, 1);
  EXPECT_TRUE(preparer_.unprepared.empty());
  EXPECT_EQ(sweep_.pass(recordOf(kUid), kT0 + seconds(240)).undone.size(), 1U);
  EXPECT_EQ(api_.calls, 2);
}

TEST_F(ClaimSweepTest, AReadThatFailsUndoesNothingAndKeepsWhenTheClaimWasFirstSeenGone) {
  (void)sweep_.pass(recordOf(kUid), kT0);  // 404
  api_.getFailWith = "connection refused";
  auto failed = sweep_.pass(recordOf(kUid), kT0 + 2 * kGrace);
  EXPECT_TRUE(failed.undone.empty());
  ASSERT_EQ(failed.errors.size(), 1U);
  EXPECT_THAT(failed.errors[0], HasSubstr("connection refused"));
  EXPECT_TRUE(preparer_.unprepared.empty());
  api_.getFailWith.clear();
  EXPECT_EQ(sweep_.pass(recordOf(kUid), kT0 + 2 * kGrace + seconds(1)).undone.size(), 1U);
}

TEST_F(ClaimSweepTest, AnUndoThatFailsIsReportedAndTriedAgainNextPass) {
  preparer_.failWith = "unprepare claim ml/nics: EBUSY";
  auto first = sweep_.pass(recordOf(kUid), kT0);
  (void)first;
  auto failed = sweep_.pass(recordOf(kUid), kT0 + kGrace);
  EXPECT_TRUE(failed.undone.empty());
  EXPECT_THAT(failed.errors, ElementsAre("unprepare claim ml/nics: EBUSY"));
  preparer_.failWith.clear();
  EXPECT_EQ(sweep_.pass(recordOf(kUid), kT0 + kGrace + seconds(1)).undone.size(), 1U);
  EXPECT_EQ(preparer_.unprepared.size(), 2U);
}

TEST_F(ClaimSweepTest, OnlyTheClaimsRecordedAreRead) {
  (void)sweep_.pass({}, kT0);
  EXPECT_EQ(api_.calls, 0);
}

// The sweep over the real preparation: a prepared claim whose ResourceClaim is deleted, the kubelet
// never unpreparing it, gets its VF's GUID back, its record, spec and metadata removed.
TEST_F(ClaimPreparationTest, TheSweepUndoesAPreparedClaimTheApiServerNoLongerHas) {
  api_.claims["ml/nics"] = withConfig(claimOf(kUid, {vfName(3)}), {{"guid", "02:00:00:00:00:00:0c:03"}});
  auto p = preparation();
  ASSERT_EQ(p.prepare(ref_).error, "");
  ASSERT_EQ(vfNow(3).nodeGuid, net::Guid{0x0200000000000c03ULL});
  ASSERT_TRUE(std::filesystem::exists(metadataFilePath(dir_.path(), ref_, "rail-0")));
  ClaimSweep sweep(api_, p, kGrace);
  EXPECT_TRUE(sweep.pass(records(), kT0).undone.empty());  // the server still has it
  api_.claims.erase("ml/nics");
  EXPECT_TRUE(sweep.pass(records(), kT0 + kGrace).undone.empty());  // gone, within the grace
  EXPECT_TRUE(sweep.pass(records(), kT0 + 2 * kGrace - seconds(1)).undone.empty());
  EXPECT_EQ(vfNow(3).nodeGuid, net::Guid{0x0200000000000c03ULL});
  EXPECT_EQ(sweep.pass(records(), kT0 + 2 * kGrace).undone.size(), 1U);
  EXPECT_EQ(vfNow(3).nodeGuid, net::Guid{0x020000000000a003ULL});
  EXPECT_EQ(vfNow(3).portGuid, net::Guid{0x020000000000a003ULL});
  EXPECT_TRUE(records().empty());
  EXPECT_FALSE(specExists());
  EXPECT_FALSE(std::filesystem::exists(metadataFilePath(dir_.path(), ref_, "rail-0")));
  EXPECT_EQ(p.unprepare(ref_), "");  // the kubelet's late Unprepare: nothing left, success
}

// The scheduler gives the VF of a deleted claim to a new one at once; the kubelet never unprepared
// the old one. The new claim's Prepare is refused while the old record holds the VF (its GUID is
// the old claim's until undone), and succeeds once the sweep has undone the old one.
TEST_F(ClaimPreparationTest, AVfStillPreparedForAnotherClaimIsPreparedOnlyOnceThatOneIsUndone) {
  api_.claims["ml/nics"] = withConfig(claimOf(kUid, {vfName(3)}), {{"guid", "02:00:00:00:00:00:0c:03"}});
  auto p = preparation();
  ASSERT_EQ(p.prepare(ref_).error, "");
  api_.claims.erase("ml/nics");
  const std::string next = "1a2b3c4d-0000-4000-8000-000000000002";
  json second = withConfig(claimOf(next, {vfName(3)}), {{"guid", "02:00:00:00:00:00:0d:03"}});
  second["metadata"]["name"] = "nics-2";
  api_.claims["ml/nics-2"] = second;
  const ClaimRef nextRef{"ml", next, "nics-2"};
  const std::string refused = p.prepare(nextRef).error;
  EXPECT_THAT(refused, HasSubstr("VF " + vfName(3) + " is still prepared for claim ml/nics (uid " + kUid + ")"));
  EXPECT_THAT(refused, HasSubstr("--gone-grace"));
  EXPECT_EQ(vfNow(3).nodeGuid, net::Guid{0x0200000000000c03ULL});  // untouched
  EXPECT_EQ(records().count(next), 0U);
  ClaimSweep sweep(api_, p, seconds(0));
  EXPECT_EQ(sweep.pass(records(), kT0).undone.size(), 1U);
  ASSERT_EQ(p.prepare(nextRef).error, "");
  EXPECT_EQ(vfNow(3).nodeGuid, net::Guid{0x0200000000000d03ULL});
  EXPECT_EQ(records()[next].changes.at(0).oldNodeGuid, "02:00:00:00:00:00:a0:03");  // the firmware's
  EXPECT_EQ(p.unprepare(nextRef), "");
  EXPECT_EQ(vfNow(3).nodeGuid, net::Guid{0x020000000000a003ULL});
}

// A claim deleted and made again under its name (a new uid), prepared here before the old one was
// unprepared: the old one is undone, and the metadata folder both share by name keeps the new one's.
TEST_F(ClaimPreparationTest, UndoingAClaimLeavesTheMetadataOfTheClaimMadeAgainUnderItsName) {
  const std::string again = "1a2b3c4d-0000-4000-8000-000000000002";
  api_.claims["ml/nics"] = claimOf(kUid, {vfName(0)});
  auto p = preparation();
  ASSERT_EQ(p.prepare(ref_).error, "");
  api_.claims["ml/nics"] = claimOf(again, {vfName(1)});
  const ClaimRef againRef{"ml", again, "nics"};
  ASSERT_EQ(p.prepare(againRef).error, "");
  ClaimSweep sweep(api_, p, seconds(0));
  auto report = sweep.pass(records(), kT0);
  EXPECT_EQ(report.undone.size(), 1U);
  EXPECT_TRUE(report.errors.empty());
  auto left = records();
  ASSERT_EQ(left.size(), 1U);
  EXPECT_EQ(left.begin()->first, again);
  const std::string file = metadataFilePath(dir_.path(), againRef, "rail-0");
  ASSERT_TRUE(std::filesystem::exists(file));
  std::ifstream in(file);
  EXPECT_EQ(json::parse(in)["metadata"]["uid"], again);
  EXPECT_TRUE(std::filesystem::exists(cdiSpecPath(cdiDir(), again)));
  EXPECT_FALSE(specExists());
  EXPECT_EQ(p.unprepare(againRef), "");
  EXPECT_FALSE(std::filesystem::exists(metadataFilePath(dir_.path(), againRef, "rail-0")));
}

}  // namespace
}  // namespace ibcni::dra
