// SPDX-License-Identifier: Apache-2.0
// Prepare's changes to VFs, as a claim's opaque configuration asks (plugin/dra/claim_config,
// claim_vf_settings): a requested GUID, a GUID from a guidPool (the embedded GUID pools, node-local,
// in a temporary store), the link state, the pkey check; each undone by Unprepare and by a Prepare
// that fails, and a configuration ibcni-dra does not take refused naming the key and the fix.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "unit/dra/preparation_fixture.h"

namespace ibcni::dra {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kPoolFirst = 0x0200000000b00000ULL;
const json kPool = {{"range", "02:00:00:00:00:b0:00:00-02:00:00:00:00:b0:00:ff"}, {"blockSize", 16}};

bool inPool(const std::optional<net::Guid>& g) { return g && g->value >= kPoolFirst && g->value <= kPoolFirst + 0xff; }

TEST_F(ClaimPreparationTest, ARequestedGuidIsSetAsNodeAndPortGuidAndUnprepareRestoresTheVfs) {
  api_.claims["ml/nics"] = withConfig(claimOf(kUid, {vfName(3)}), {{"guid", "02:00:00:00:00:00:0c:03"}});
  auto p = preparation();
  PrepareOutcome out = p.prepare(ref_);
  ASSERT_EQ(out.error, "");
  EXPECT_EQ(vfNow(3).nodeGuid, net::Guid{0x0200000000000c03ULL});
  EXPECT_EQ(vfNow(3).portGuid, net::Guid{0x0200000000000c03ULL});
  EXPECT_EQ(vfNow(2).nodeGuid, net::Guid{0x020000000000a002ULL});  // the others are left alone
  auto r = records();
  ASSERT_EQ(r[kUid].changes.size(), 1U);
  EXPECT_EQ(r[kUid].changes[0].guid, "02:00:00:00:00:00:0c:03");
  EXPECT_EQ(r[kUid].changes[0].oldNodeGuid, "02:00:00:00:00:00:a0:03");
  EXPECT_EQ(p.unprepare(ref_), "");
  EXPECT_EQ(vfNow(3).nodeGuid, net::Guid{0x020000000000a003ULL});
  EXPECT_EQ(vfNow(3).portGuid, net::Guid{0x020000000000a003ULL});
  EXPECT_TRUE(records().empty());
  EXPECT_FALSE(specExists());
}

TEST_F(ClaimPreparationTest, AVfWithoutAGuidGetsOneFromTheGuidPoolAndUnprepareGivesItBack) {
  sys_.setNodeGuid("mlx5_3", "0000:0000:0000:0000");  // VF 2 has no GUID ...
  nl::VfInfo unset = vfNow(2);
  unset.nodeGuid = unset.portGuid = net::Guid{0};
  nl_.setVfs(host_, pfIndex_, {vfNow(0), vfNow(1), unset, vfNow(3), vfNow(4), vfNow(5), vfNow(6), vfNow(7)});
  api_.claims["ml/nics"] = withConfig(claimOf(kUid, {vfName(2), vfName(3)}), {{"guidPool", kPool}});
  auto p = preparation();
  PrepareOutcome out = p.prepare(ref_);
  ASSERT_EQ(out.error, "");  // ... and is not refused: the pool gives it one
  ASSERT_TRUE(inPool(vfNow(2).nodeGuid)) << vfNow(2).nodeGuid->toString();
  EXPECT_EQ(vfNow(2).portGuid, vfNow(2).nodeGuid);
  EXPECT_EQ(vfNow(3).nodeGuid, net::Guid{0x020000000000a003ULL});  // has its own, outside the pool: kept
  const std::string store = records()[kUid].changes[0].guidPoolDir;
  ASSERT_FALSE(store.empty());
  auto held = guids_.holders(store);
  ASSERT_TRUE(held);
  ASSERT_EQ(held->size(), 1U);
  EXPECT_EQ((*held)[0].containerId, kUid);
  EXPECT_EQ((*held)[0].ifName, vfName(2));
  EXPECT_EQ(p.unprepare(ref_), "");
  EXPECT_EQ(vfNow(2).nodeGuid, net::Guid{~std::uint64_t{0}});  // no GUID again (all ones, as mlx5 shows none)
  EXPECT_TRUE(guids_.holders(store)->empty());
  EXPECT_TRUE(records().empty());
}

TEST_F(ClaimPreparationTest, TwoClaimsOfAlwaysAssigningPoolGetDistinctGuids) {
  json always = kPool;
  always["assign"] = "always";
  const std::string other = "1a2b3c4d-0000-4000-8000-000000000002";
  api_.claims["ml/nics"] = withConfig(claimOf(kUid, {vfName(0)}), {{"guidPool", always}});
  json second = withConfig(claimOf(other, {vfName(1)}), {{"guidPool", always}});
  second["metadata"]["name"] = "nics-2";
  api_.claims["ml/nics-2"] = second;
  auto p = preparation();
  ASSERT_EQ(p.prepare(ref_).error, "");
  ASSERT_EQ(p.prepare({"ml", other, "nics-2"}).error, "");
  ASSERT_TRUE(inPool(vfNow(0).nodeGuid));
  ASSERT_TRUE(inPool(vfNow(1).nodeGuid));
  EXPECT_NE(vfNow(0).nodeGuid, vfNow(1).nodeGuid);
  EXPECT_EQ(p.unprepare(ref_), "");
  EXPECT_EQ(p.unprepare({"ml", other, "nics-2"}), "");
  // The pool's GUIDs are not put back on the VFs: the pool may hand them out again.
  EXPECT_EQ(vfNow(0).nodeGuid, net::Guid{0x020000000000a000ULL});
  EXPECT_EQ(vfNow(1).nodeGuid, net::Guid{0x020000000000a001ULL});
}

TEST_F(ClaimPreparationTest, LinkStateIsSetPerRequestAndRestored) {
  json claim = claimOf(kUid, {vfName(4), vfName(5)});
  claim = withConfig(claim, {{"linkState", "enable"}}, {}, "FromClass");
  claim = withConfig(claim, {{"linkState", "disable"}}, {"rail-1"});  // the claim's entry wins for rail-1
  api_.claims["ml/nics"] = claim;
  auto p = preparation();
  ASSERT_EQ(p.prepare(ref_).error, "");
  EXPECT_EQ(vfNow(4).linkState, nl::VfLinkState::kEnable);
  EXPECT_EQ(vfNow(5).linkState, nl::VfLinkState::kDisable);
  EXPECT_EQ(p.unprepare(ref_), "");
  EXPECT_EQ(vfNow(4).linkState, nl::VfLinkState::kAuto);
  EXPECT_EQ(vfNow(5).linkState, nl::VfLinkState::kAuto);
}

TEST_F(ClaimPreparationTest, APkeyTheVfLacksFailsPrepareNamingItAndPutsEverythingBack) {
  sys_.setPkeys("mlx5_2", 1, {"0xffff", "0x8123"});
  api_.claims["ml/nics"] =
      withConfig(claimOf(kUid, {vfName(1)}), {{"guidPool", kPool}, {"guid", "02:00:00:00:00:b0:00:07"},
                                             {"linkState", "enable"}, {"pkey", "0x0456"}});
  auto p = preparation();
  PrepareOutcome out = p.prepare(ref_);
  EXPECT_THAT(out.error, HasSubstr("pkey 0x0456 is not in the pkey table of mlx5_2 port 1"));
  EXPECT_THAT(out.error, HasSubstr("what it changed was put back"));
  EXPECT_TRUE(out.devices.empty());
  EXPECT_EQ(vfNow(1).nodeGuid, net::Guid{0x020000000000a001ULL});
  EXPECT_EQ(vfNow(1).linkState, nl::VfLinkState::kAuto);
  EXPECT_TRUE(records().empty());
  EXPECT_FALSE(specExists());
  EXPECT_TRUE(guids_.holders(dir_.path() + "/ipam/.guid/ibcni-dra")->empty());
  // The pkey it has passes (with the membership bit or without).
  api_.claims["ml/nics"] = withConfig(claimOf(kUid, {vfName(1)}), {{"pkey", "0x0123"}});
  EXPECT_EQ(p.prepare(ref_).error, "");
}

TEST_F(ClaimPreparationTest, ANetlinkFailureMidwayUndoesTheStepsBefore) {
  nl_.failOn(testing::FakeNetlink::Op::kSetVfLinkState, EPERM);
  api_.claims["ml/nics"] =
      withConfig(claimOf(kUid, {vfName(6)}), {{"guid", "02:00:00:00:00:00:0c:06"}, {"linkState", "disable"}});
  auto p = preparation();
  PrepareOutcome out = p.prepare(ref_);
  EXPECT_THAT(out.error, HasSubstr("set linkState = disable on VF 6 of ib0"));
  EXPECT_EQ(vfNow(6).nodeGuid, net::Guid{0x020000000000a006ULL});
  EXPECT_TRUE(records().empty());
}

TEST_F(ClaimPreparationTest, AConfigurationIbcniDraDoesNotTakeIsRefusedNamingTheKeyAndTheFix) {
  struct Case {
    json parameters;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{{"rdmaIsolation", true}}, "config[0].opaque.parameters.rdmaIsolation: the RDMA device moves"},
      {{{"mtu", 4000}}, "config[0].opaque.parameters.mtu is not a key ibcni-dra takes"},
      {{{"linkState", "up"}}, "linkState"},
      {{{"guid", "00:00:00:00:00:00:00:00"}}, "guid"},
      {{{"guidPool", {{"range", "nonsense"}}}}, "guidPool.range"},
      {json::array({1, 2}), "must be an object"},
  };
  for (const auto& c : cases) {
    api_.claims["ml/nics"] = withConfig(claimOf(kUid, {vfName(0)}), c.parameters);
    auto p = preparation();
    PrepareOutcome out = p.prepare(ref_);
    EXPECT_THAT(out.error, HasSubstr(c.says)) << c.parameters.dump();
    EXPECT_TRUE(records().empty());
  }
  // Another driver's configuration is not read.
  json claim = claimOf(kUid, {vfName(0)});
  claim["status"]["allocation"]["devices"]["config"] =
      json::array({{{"opaque", {{"driver", "other.example.com"}, {"parameters", {{"anything", 1}}}}}}});
  api_.claims["ml/nics"] = claim;
  EXPECT_EQ(preparation().prepare(ref_).error, "");
}

TEST_F(ClaimPreparationTest, AVfAskedNothingOfNeedsNoPfNetdevAndAPkeyCheckChangesNothing) {
  ASSERT_TRUE(nl_.removeLink(host_, pfIndex_));  // a PF without a netdev (or in another namespace)
  sys_.setPkeys("mlx5_2", 1, {"0xffff"});
  api_.claims["ml/nics"] = withConfig(claimOf(kUid, {vfName(1), vfName(2)}), {{"pkey", "0x7fff"}}, {"rail-0"});
  auto p = preparation();
  EXPECT_EQ(p.prepare(ref_).error, "");
  EXPECT_TRUE(nl_.calls().empty());
  EXPECT_EQ(p.unprepare(ref_), "");
}

TEST_F(ClaimPreparationTest, AfterARebootTheKubeletsPrepareDoesTheClaimAgainInFull) {
  json always = kPool;
  always["assign"] = "always";
  api_.claims["ml/nics"] = withConfig(claimOf(kUid, {vfName(0)}), {{"guidPool", always}, {"linkState", "enable"}});
  ASSERT_EQ(preparation().prepare(ref_).error, "");
  const auto before = vfNow(0).nodeGuid;
  ASSERT_TRUE(inPool(before));
  // The reboot: the VF as the firmware makes it, /run's CDI spec gone (the pool's store is kept here).
  nl_.setVfs(host_, pfIndex_, {nl::VfInfo{0, nl::VfLinkState::kAuto, net::Guid{0x0200000000000ff0ULL},
                                          net::Guid{0x0200000000000ff0ULL}}});
  std::filesystem::remove(cdiSpecPath(cdiDir(), kUid));
  bootId_ = "boot-2";
  auto p = preparation();
  ASSERT_EQ(p.prepare(ref_).error, "");
  EXPECT_TRUE(specExists());
  EXPECT_TRUE(inPool(vfNow(0).nodeGuid));
  EXPECT_EQ(vfNow(0).linkState, nl::VfLinkState::kEnable);
  EXPECT_EQ(records()[kUid].bootId, "boot-2");
  EXPECT_EQ(records()[kUid].changes[0].oldNodeGuid, "02:00:00:00:00:00:0f:f0");
  EXPECT_EQ(guids_.holders(dir_.path() + "/ipam/.guid/ibcni-dra")->size(), 1U);
  EXPECT_EQ(p.unprepare(ref_), "");
  EXPECT_EQ(vfNow(0).nodeGuid, net::Guid{0x0200000000000ff0ULL});
  EXPECT_EQ(vfNow(0).linkState, nl::VfLinkState::kAuto);
  EXPECT_TRUE(guids_.holders(dir_.path() + "/ipam/.guid/ibcni-dra")->empty());
}

TEST_F(ClaimPreparationTest, AnUnprepareAfterARebootReleasesThePoolGuidAndLeavesTheVfAlone) {
  json always = kPool;
  always["assign"] = "always";
  api_.claims["ml/nics"] = withConfig(claimOf(kUid, {vfName(0)}), {{"guidPool", always}});
  ASSERT_EQ(preparation().prepare(ref_).error, "");
  nl_.setVfs(host_, pfIndex_, {nl::VfInfo{0, nl::VfLinkState::kAuto, net::Guid{0x0200000000000ff0ULL},
                                          net::Guid{0x0200000000000ff0ULL}}});
  bootId_ = "boot-2";
  EXPECT_EQ(preparation().unprepare(ref_), "");
  EXPECT_EQ(vfNow(0).nodeGuid, net::Guid{0x0200000000000ff0ULL});
  EXPECT_TRUE(guids_.holders(dir_.path() + "/ipam/.guid/ibcni-dra")->empty());
  EXPECT_TRUE(records().empty());
  EXPECT_FALSE(specExists());
}

TEST_F(ClaimPreparationTest, EachRequestGetsItsDeviceMetadataFileMountedByACdiSpecOfItsOwn) {
  json claim = withConfig(claimOf(kUid, {vfName(2), vfName(5)}), {{"guid", "02:00:00:00:00:00:0c:02"}}, {"rail-0"});
  claim["metadata"]["annotations"] = {{"resource.kubernetes.io/pod-claim-name", "nics-of-pod"}};
  api_.claims["ml/nics"] = claim;
  auto p = preparation();
  PrepareOutcome out = p.prepare(ref_);
  ASSERT_EQ(out.error, "");
  // rail-0's file: the claim, the request, its VF with the GUID Prepare set (KEP-5304's DeviceMetadata).
  const std::string file = dir_.path() + "/dra-device-metadata/ml_nics/rail-0/metadata.json";
  std::ifstream in(file);
  const json m = json::parse(in, nullptr, false);
  EXPECT_EQ(m["apiVersion"], "metadata.resource.k8s.io/v1alpha1");
  EXPECT_EQ(m["kind"], "DeviceMetadata");
  EXPECT_EQ(m["metadata"]["uid"], kUid);
  EXPECT_EQ(m["podClaimName"], "nics-of-pod");
  ASSERT_EQ(m["requests"].size(), 1U);
  EXPECT_EQ(m["requests"][0]["name"], "rail-0");
  const json& d = m["requests"][0]["devices"][0];
  EXPECT_EQ(d["driver"], "ibcni.io");
  EXPECT_EQ(d["pool"], kNode);
  EXPECT_EQ(d["name"], vfName(2));
  EXPECT_EQ(d["attributes"]["resource.kubernetes.io/pciBusID"]["string"], "0000:3b:01.2");
  EXPECT_EQ(d["attributes"]["ibcni.io/rdmaDevice"]["string"], "mlx5_3");
  EXPECT_EQ(d["attributes"]["ibcni.io/nodeGuid"]["string"], "02:00:00:00:00:00:0c:02");
  // Its CDI spec bind-mounts it where the container looks for a template's claim.
  std::ifstream specIn(cdiDir() + "/ibcni.io_metadata_" + kUid + "_rail-0.json");
  const json spec = json::parse(specIn, nullptr, false);
  EXPECT_EQ(spec["kind"], "ibcni.io/metadata");
  const json& mount = spec["devices"][0]["containerEdits"]["mounts"][0];
  EXPECT_EQ(spec["devices"][0]["name"], std::string(kUid) + "_rail-0");
  EXPECT_EQ(mount["hostPath"], file);
  EXPECT_EQ(mount["containerPath"],
            "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/nics-of-pod/rail-0/ibcni.io-metadata.json");
  EXPECT_EQ(mount["options"], json({"ro", "bind"}));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/dra-device-metadata/ml_nics/rail-1/metadata.json"));
  EXPECT_EQ(out.devices[1].cdiDeviceIds.back(), std::string("ibcni.io/metadata=") + kUid + "_rail-1");
  // Unprepare takes them all away.
  EXPECT_EQ(p.unprepare(ref_), "");
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/dra-device-metadata/ml_nics"));
  EXPECT_TRUE(std::filesystem::is_empty(cdiDir()));
}

TEST_F(ClaimPreparationTest, APrepareCutShortIsUndoneBeforeItIsDoneAgain) {
  // Killed after it set the GUID, before the rebind: its record names the change.
  ClaimRecords left;
  VfChange c;
  c.device = vfName(7);
  c.pfName = "ib0";
  c.vf = 7;
  c.pci = "0000:3b:01.7";
  c.guid = "02:00:00:00:00:00:0c:07";
  c.oldNodeGuid = c.oldPortGuid = "02:00:00:00:00:00:a0:07";
  left[kUid] = {ref_, ClaimRecord::State::kPreparing, {}, {c}, bootId_};
  ASSERT_TRUE(ClaimCheckpoint(checkpointPath()).store(left));
  ASSERT_TRUE(nl_.setVfGuids(host_, pfIndex_, 7, net::Guid{0x0200000000000c07ULL}, net::Guid{0x0200000000000c07ULL}));
  api_.claims["ml/nics"] = claimOf(kUid, {vfName(7)});  // asked again without a GUID
  auto p = preparation();
  ASSERT_EQ(p.prepare(ref_).error, "");
  EXPECT_EQ(vfNow(7).nodeGuid, net::Guid{0x020000000000a007ULL});
  EXPECT_TRUE(records()[kUid].changes[0].guid.empty());
}

}  // namespace
}  // namespace ibcni::dra
