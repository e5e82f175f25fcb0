// SPDX-License-Identifier: Apache-2.0
// `ibcni reconcile` over sriov mode's GUID pools: a GUID no ibcni record holds is released, one a
// record holds is kept whatever its pod's namespace, a claim's (ibcni-dra's) is left to ibcni-dra,
// and a dry run only says so.
#include <algorithm>
#include <filesystem>

#include "fakes/fake_guid_pools.h"
#include "ibcni/os/file_io.h"
#include "ipam/embedded_ipam.h"
#include "plugin/agent/reconcile.h"
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

class ReconcileGuidPoolsTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    deps_.guids = &guids_;
    std::filesystem::create_directories(store());
  }
  std::string data() const { return stateDir_ + "/ipam"; }
  std::string store() const { return data() + "/.guid/gpool"; }
  plugin::ReconcileReport pass(bool dryRun = false, const std::string& index = "") {
    plugin::ReconcileOptions o;
    o.poolIndexDir = index;
    o.stateDirs = {stateDir_};
    o.ipamDataDirs = {data()};
    o.dryRun = dryRun;
    o.lockWait = std::chrono::milliseconds(50);
    return plugin::reconcile(o, deps_);
  }
  std::string indexDir() const { return stateDir_ + "/index"; }
  /// The pool index (at indexDir()) keeps GUID pool `pool` in `storeDir` with `poolJson`.
  void keepInIndex(const std::string& pool, const std::string& storeDir, const std::string& poolJson) {
    ipam::EmbeddedIpamOptions o;
    o.defaultDataDir = data();
    o.poolIndexDir = indexDir();
    ipam::keepPoolIndex(o, pool, {"guid", storeDir, "pool.json", poolJson});
  }
  // A record of (ibnet, cid, net1) whose pod namespace is gone: the pass undoes the attachment
  // first unless it is alive, so this one keeps a live namespace.
  void recordOf(const std::string& cid) {
    state::AttachmentRecord r;
    r.network = "ibnet";
    r.containerId = cid;
    r.ifName = "net1";
    r.netns = kPodPath;
    r.netnsInode = pod_.inode();
    r.hostName = "vf0";
    state::FileAttachmentStore store(stateDir_);
    ASSERT_TRUE(store.save(r));
  }

  FakeGuidPools guids_;
};

TEST_F(ReconcileGuidPoolsTest, AGuidWithoutARecordIsReleasedAndOneWithARecordKept) {
  recordOf("live");
  guids_.stores[store()][{"ibnet", "live", "net1"}] = net::Guid{0x0200000000000100};
  guids_.stores[store()][{"ibnet", "lost", "net1"}] = net::Guid{0x0200000000000101};

  auto dry = pass(true);
  ASSERT_EQ(dry.allocations.size(), 1u);
  EXPECT_EQ(dry.allocations[0].action, "would-release");
  EXPECT_EQ(guids_.count(), 2u) << "a dry run releases nothing";

  auto r = pass();
  EXPECT_FALSE(r.failed()) << (r.errors.empty() ? "" : r.errors[0]);
  ASSERT_EQ(r.allocations.size(), 1u);
  EXPECT_EQ(r.allocations[0].action, "released");
  EXPECT_EQ(r.allocations[0].kind, "guid");
  EXPECT_EQ(r.allocations[0].containerId, "lost");
  EXPECT_EQ(r.allocations[0].network, "ibnet");
  EXPECT_EQ(r.allocations[0].addresses, std::vector<std::string>{"02:00:00:00:00:00:01:01"});
  EXPECT_EQ(guids_.count(), 1u);
  EXPECT_TRUE(guids_.stores[store()].contains({"ibnet", "live", "net1"}));
}

// A claim's GUID (ibcni-dra's network) has no CNI record, yet is held: ibcni-dra's checkpoint
// records it and its Unprepare releases it. The pass leaves it alone.
TEST_F(ReconcileGuidPoolsTest, AClaimsGuidIsLeftToIbcniDra) {
  guids_.stores[store()][{ipam::kDraGuidNetwork, "0f5e2c9a-claim-uid", "vf-0000-3b-01-2"}] = net::Guid{0x0200000000000102};
  guids_.stores[store()][{"ibnet", "lost", "net1"}] = net::Guid{0x0200000000000101};
  auto r = pass();
  EXPECT_FALSE(r.failed()) << (r.errors.empty() ? "" : r.errors[0]);
  ASSERT_EQ(r.allocations.size(), 1u);
  EXPECT_EQ(r.allocations[0].containerId, "lost");
  EXPECT_TRUE(guids_.stores[store()].contains({ipam::kDraGuidNetwork, "0f5e2c9a-claim-uid", "vf-0000-3b-01-2"}));
}

// A reboot wiped the store of a cluster pool of the default data directory: the pool index gives
// the directory back (with its pool.json) before the pass, which then keeps the pool.
TEST_F(ReconcileGuidPoolsTest, APoolWhoseDirectoryARebootWipedIsGivenItBackFromThePoolIndex) {
  const std::string wiped = data() + "/.guid/rpool";
  keepInIndex("rpool", wiped, R"({"range": "02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:ff"})");
  keepInIndex("other", stateDir_ + "/elsewhere/.guid/other", "{}");

  auto dry = pass(true, indexDir());
  EXPECT_EQ(dry.restoredPools, std::vector<std::string>{wiped});
  EXPECT_FALSE(std::filesystem::exists(wiped)) << "a dry run creates nothing";

  auto r = pass(false, indexDir());
  EXPECT_FALSE(r.failed()) << (r.errors.empty() ? "" : r.errors[0]);
  EXPECT_EQ(r.restoredPools, std::vector<std::string>{wiped}) << "only the default data directory's pools are indexed";
  EXPECT_EQ(*os::readFile(wiped + "/pool.json", 4096), R"({"range": "02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:ff"})");
  EXPECT_NE(std::find(guids_.calls.begin(), guids_.calls.end(), "maintain " + wiped + "/"), guids_.calls.end())
      << "the pass kept the pool given back";
  EXPECT_TRUE(pass(false, indexDir()).restoredPools.empty()) << "a pool file that is there is left alone";
}

// A pass killed after it made the directory and before it wrote the pool file: the next one writes
// the file (a directory without it would hold the pool's blocks for good: no pass finds the pool).
TEST_F(ReconcileGuidPoolsTest, APoolDirectoryLeftWithoutItsFileByAKilledPassIsGivenTheFile) {
  const std::string half = data() + "/.guid/hpool";
  keepInIndex("hpool", half, R"({"range": "02:00:00:00:00:00:02:00-02:00:00:00:00:00:02:ff"})");
  std::filesystem::create_directories(half);

  auto r = pass(false, indexDir());
  EXPECT_FALSE(r.failed()) << (r.errors.empty() ? "" : r.errors[0]);
  EXPECT_EQ(r.restoredPools, std::vector<std::string>{half});
  auto text = os::readFile(half + "/pool.json", 4096);
  ASSERT_TRUE(text) << "the pool file was written";
  EXPECT_EQ(*text, R"({"range": "02:00:00:00:00:00:02:00-02:00:00:00:00:00:02:ff"})");
}

TEST_F(ReconcileGuidPoolsTest, WithoutGuidPoolsTheReportSaysWhy) {
  deps_.guids = nullptr;
  auto r = pass();
  ASSERT_TRUE(r.failed());
  EXPECT_NE(r.errors[0].find("no GUID pools"), std::string::npos) << r.errors[0];
}

TEST_F(ReconcileGuidPoolsTest, NoGuidDirectoryIsNothingToDo) {
  std::filesystem::remove_all(data() + "/.guid");
  auto r = pass();
  EXPECT_FALSE(r.failed());
  EXPECT_TRUE(guids_.calls.empty());
}

}  // namespace
}  // namespace ibcni::testing
