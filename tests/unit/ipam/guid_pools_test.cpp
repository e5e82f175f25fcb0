// SPDX-License-Identifier: Apache-2.0
// sriov mode's node-local GUID pools (EmbeddedGuidPools over a temporary data directory): GUIDs of
// the range, idempotent and distinct per attachment; requested GUIDs claimed (11 naming the
// holder); release, held and the agent's sweep by the store directory the ADD recorded, whatever
// the configuration says by then; GC of one network only; no GUID ever freed because a network
// namespace is gone; exhaustion; two pools of one node whose ranges overlap.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "fake_store.h"
#include "ibcni/os/file_io.h"
#include "ipam/config/guid_pool.h"
#include "ipam/embedded_ipam_guids.h"
#include "store_test_util.h"

namespace ibcni::ipam::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kRange = "02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:07";  // 2 blocks of 4

config::GuidPoolConf guidPool(const std::string& range = kRange, const std::string& pool = "gpool",
                              int blockSize = 4) {
  const auto j = nlohmann::json{{"range", range}, {"pool", pool}, {"blockSize", blockSize}};
  auto g = config::guidPoolObject(j, "gnet");
  EXPECT_TRUE(g) << (g ? "" : g.error().msg);
  return g ? *g : config::GuidPoolConf{};
}

class GuidPoolsTest : public ::testing::Test {
 protected:
  GuidPoolsTest() {
    EmbeddedIpamOptions o;
    o.defaultDataDir = tmp_.path() + "/data";
    o.netnsChecker = checker_;
    o.nodeNameFile = "";
    pools_ = std::make_unique<EmbeddedGuidPools>(o);
  }

  std::string netns(const std::string& cid) const { return "/run/netns/" + cid; }

  cni::Result<GuidLease> allocate(const config::GuidPoolConf& pool, const std::string& cid,
                                  std::optional<std::uint64_t> requested = std::nullopt,
                                  const std::string& network = "gnet") {
    cni::CmdArgs args{cni::Command::kAdd, cid, netns(cid), "net1", "", {}};
    cni::CniArgs cniArgs;
    cniArgs.podNamespace = "ns";
    cniArgs.podName = "pod-" + cid;
    checker_->state[netns(cid)] = os::NetnsLiveness::kAlive;
    GuidRequest r{pool, network, args, cniArgs, {}, "runtimeConfig.infinibandGUID"};
    if (requested) {
      r.requested = net::Guid{*requested};
    }
    return pools_->allocate(r);
  }
  std::uint64_t guid(const config::GuidPoolConf& pool, const std::string& cid, const std::string& network = "gnet") {
    auto l = allocate(pool, cid, std::nullopt, network);
    EXPECT_TRUE(l) << cid << ": " << (l ? "" : l.error().msg);
    return l ? l->guid.value : 0;
  }
  std::optional<std::uint64_t> held(const std::string& dir, const std::string& cid) {
    auto h = pools_->held(dir, {cid, "net1"});
    EXPECT_TRUE(h) << (h ? "" : h.error().msg);
    return h && *h ? std::optional((*h)->value) : std::nullopt;
  }
  std::string dir(const std::string& pool = "gpool") const { return tmp_.path() + "/data/.guid/" + pool; }

  TempDir tmp_;
  std::shared_ptr<FakeNetnsChecker> checker_ = std::make_shared<FakeNetnsChecker>();
  std::unique_ptr<EmbeddedGuidPools> pools_;
};

TEST_F(GuidPoolsTest, GuidsOfTheRangeOnePerAttachmentIdempotent) {
  const auto pool = guidPool();
  auto first = allocate(pool, "c1");
  ASSERT_TRUE(first) << first.error().msg;
  EXPECT_EQ(first->pool, "gpool");
  EXPECT_EQ(first->storeDir, dir());
  EXPECT_EQ(pools_->storeDirOf(pool), dir());
  EXPECT_GE(first->guid.value, kFirst);
  EXPECT_LE(first->guid.value, kFirst + 7);
  EXPECT_EQ(guid(pool, "c1"), first->guid.value) << "the same attachment gets its GUID again";

  std::set<std::uint64_t> all{first->guid.value};
  for (const char* cid : {"c2", "c3", "c4", "c5", "c6", "c7", "c8"}) {
    all.insert(guid(pool, cid));
  }
  EXPECT_EQ(all.size(), 8U);
  EXPECT_EQ(*all.begin(), kFirst);
  EXPECT_EQ(*all.rbegin(), kFirst + 7);
  EXPECT_EQ(held(dir(), "c1"), first->guid.value);
  EXPECT_EQ(held(dir(), "nobody"), std::nullopt);

  // The pool is kept where the GUIDs are: the guidPool object as given.
  auto kept = os::readFile(dir() + "/" + kGuidPoolFileName, 1 << 20);
  ASSERT_TRUE(kept);
  EXPECT_EQ(*kept, pool.poolFile);
  EXPECT_EQ(nlohmann::json::parse(*kept)["range"], kRange);
}

TEST_F(GuidPoolsTest, ThePoolFileIsWrittenOnlyWhenItChanges) {
  const auto pool = guidPool();
  guid(pool, "c1");
  const std::string file = dir() + "/" + kGuidPoolFileName;
  const auto before = std::filesystem::last_write_time(file);
  const auto inode = [&] {
    struct stat st {};
    EXPECT_EQ(::stat(file.c_str(), &st), 0);
    return st.st_ino;
  };
  const auto ino = inode();
  guid(pool, "c2");
  EXPECT_EQ(inode(), ino) << "not replaced: an unchanged pool is not written again";
  EXPECT_EQ(std::filesystem::last_write_time(file), before);
  guid(guidPool("02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:0f"), "c3");
  EXPECT_NE(inode(), ino) << "a changed pool is written aside and renamed over";
}

TEST_F(GuidPoolsTest, ARequestedGuidInsideTheRangeIsClaimedAndAHeldOneIs11NamingItsHolder) {
  const auto pool = guidPool();
  auto mine = allocate(pool, "c1", kFirst + 5);
  ASSERT_TRUE(mine) << mine.error().msg;
  EXPECT_EQ(mine->guid.value, kFirst + 5);

  auto taken = allocate(pool, "c2", kFirst + 5);
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, cni::Errc::kTryAgainLater);
  EXPECT_THAT(taken.error().msg, HasSubstr("requested GUID (runtimeConfig.infinibandGUID) 02:00:00:00:00:00:01:05"));
  EXPECT_THAT(taken.error().msg, HasSubstr("c1"));
  EXPECT_THAT(taken.error().msg, HasSubstr("ns/pod-c1"));

  auto outside = allocate(pool, "c3", kFirst + 8);
  ASSERT_FALSE(outside);
  EXPECT_EQ(outside.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(outside.error().msg,
              HasSubstr("is not inside any range: guidPool.range = 02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:07"));
}

TEST_F(GuidPoolsTest, ReleaseAndHeldGoByTheRecordedStoreWhateverTheConfigurationSaysNow) {
  auto lease = allocate(guidPool(), "c1");
  ASSERT_TRUE(lease) << lease.error().msg;
  // The network now names another pool with another range: the recorded directory still wins.
  const auto moved = guidPool("02:00:00:00:00:00:02:00-02:00:00:00:00:00:02:07", "other");
  EXPECT_GE(guid(moved, "c9"), kFirst + 0x100);
  EXPECT_EQ(held(lease->storeDir, "c1"), lease->guid.value);

  auto other = pools_->release(lease->storeDir, {"c1", "net1"}, "onet");
  ASSERT_TRUE(other) << other.error().msg;
  EXPECT_FALSE(*other) << "another network's DEL leaves the GUID alone";
  EXPECT_EQ(held(lease->storeDir, "c1"), lease->guid.value);

  auto released = pools_->release(lease->storeDir, {"c1", "net1"}, "gnet");
  ASSERT_TRUE(released) << released.error().msg;
  EXPECT_TRUE(*released);
  EXPECT_EQ(held(lease->storeDir, "c1"), std::nullopt);
  auto again = pools_->release(lease->storeDir, {"c1", "net1"}, "gnet");
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again);
  auto none = pools_->release(tmp_.path() + "/data/.guid/never", {"c1", "net1"}, "gnet");
  ASSERT_TRUE(none) << none.error().msg;
  EXPECT_FALSE(*none);
  EXPECT_FALSE(std::filesystem::exists(tmp_.path() + "/data/.guid/never")) << "release creates nothing";
}

TEST_F(GuidPoolsTest, ReleaseAfterThePoolsRangeChangedFreesTheRecordedGuid) {
  auto lease = allocate(guidPool(), "c1", kFirst + 2);
  ASSERT_TRUE(lease) << lease.error().msg;
  // The same pool, now configured with another range (pool.json rewritten by the next ADD).
  const auto wider = guidPool("02:00:00:00:00:00:00:00-02:00:00:00:00:00:00:07");
  EXPECT_LT(guid(wider, "c2"), kFirst);
  auto released = pools_->release(lease->storeDir, {"c1", "net1"}, "gnet");
  ASSERT_TRUE(released) << released.error().msg;
  EXPECT_TRUE(*released);
  EXPECT_EQ(held(lease->storeDir, "c1"), std::nullopt);
}

TEST_F(GuidPoolsTest, GcReleasesOnlyItsNetworksGuidsNotInTheKeepList) {
  const auto pool = guidPool();
  const auto c1 = guid(pool, "c1");
  const auto c2 = guid(pool, "c2");
  const auto c3 = guid(pool, "c3", "onet");
  auto released = pools_->gc(pool, "gnet", {{"c1", "net1"}});
  ASSERT_TRUE(released) << released.error().msg;
  ASSERT_EQ(released->size(), 1U);
  EXPECT_EQ(released->front().containerId, "c2");
  EXPECT_THAT(released->front().addresses, ElementsAre(net::Guid{c2}.toString()));
  EXPECT_EQ(held(dir(), "c1"), c1);
  EXPECT_EQ(held(dir(), "c2"), std::nullopt);
  EXPECT_EQ(held(dir(), "c3"), c3) << "another network's GUID in the same pool";
}

TEST_F(GuidPoolsTest, TheAgentsSweepReleasesOnlyGuidsWithoutAnIbcniRecord) {
  const auto pool = guidPool();
  const auto c1 = guid(pool, "c1");
  const auto c2 = guid(pool, "c2", "onet");
  std::vector<std::string> asked;
  const auto recorded = [&](const std::string& network, const cni::AttachmentKey& key) {
    asked.push_back(network + ":" + key.containerId);
    return key.containerId == "c1";
  };
  auto dry = pools_->maintain(dir(), true, recorded);
  ASSERT_TRUE(dry) << dry.error().msg;
  ASSERT_EQ(dry->released.size(), 1U);
  EXPECT_EQ(dry->released.front().containerId, "c2");
  EXPECT_EQ(held(dir(), "c2"), c2) << "a dry run releases nothing";
  EXPECT_THAT(asked, ::testing::UnorderedElementsAre("gnet:c1", "onet:c2"));

  auto swept = pools_->maintain(dir(), false, recorded);
  ASSERT_TRUE(swept) << swept.error().msg;
  ASSERT_EQ(swept->released.size(), 1U);
  EXPECT_EQ(swept->released.front().containerId, "c2");
  EXPECT_THAT(swept->released.front().addresses, ElementsAre(net::Guid{c2}.toString()));
  EXPECT_FALSE(swept->upkeep) << "a node-local pool has no blocks to keep";
  EXPECT_EQ(held(dir(), "c1"), c1);
  EXPECT_EQ(held(dir(), "c2"), std::nullopt);

  auto nothing = pools_->maintain(tmp_.path() + "/data/.guid/never", false, recorded);
  ASSERT_TRUE(nothing) << nothing.error().msg;
  EXPECT_TRUE(nothing->released.empty());
}

TEST_F(GuidPoolsTest, AGoneNetworkNamespaceNeverFreesAGuidAndAFullPoolIs108) {
  const auto pool = guidPool("02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:03");
  for (const char* cid : {"c1", "c2", "c3", "c4"}) {
    guid(pool, cid);
  }
  const auto c1 = held(dir(), "c1");
  for (const char* cid : {"c1", "c2", "c3", "c4"}) {
    checker_->state[netns(cid)] = os::NetnsLiveness::kGone;  // the VFs may still sit in lingering namespaces
  }
  cni::CmdArgs args{cni::Command::kAdd, "c5", "/run/netns/c5", "net1", "", {}};
  const cni::CniArgs cniArgs;
  auto full = pools_->allocate(GuidRequest{pool, "gnet", args, cniArgs, {}, {}});
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, cni::Errc::kIpamExhausted);
  EXPECT_THAT(full.error().msg, HasSubstr("no free GUID in guidPool.range = "
                                          "02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:03: 4 GUIDs can be handed "
                                          "out and 4 are in use"));
  EXPECT_EQ(full.error().details, "");

  auto wanted = pools_->allocate(GuidRequest{pool, "gnet", args, cniArgs, net::Guid{*c1}, "args.cni.guid"});
  ASSERT_FALSE(wanted);
  EXPECT_EQ(wanted.error().code, cni::Errc::kTryAgainLater) << wanted.error().msg;

  auto kept = pools_->maintain(dir(), false, [](const std::string&, const cni::AttachmentKey&) { return true; });
  ASSERT_TRUE(kept) << kept.error().msg;
  EXPECT_TRUE(kept->released.empty());
  for (const char* cid : {"c1", "c2", "c3", "c4"}) {
    EXPECT_TRUE(held(dir(), cid)) << cid;
  }
}

TEST_F(GuidPoolsTest, TwoNodeLocalPoolsWhoseRangesOverlapAre7) {
  guid(guidPool(kRange, "a"), "c1");
  auto overlapping = allocate(guidPool("02:00:00:00:00:00:01:04-02:00:00:00:00:00:01:0b", "b"), "c2");
  ASSERT_FALSE(overlapping);
  EXPECT_EQ(overlapping.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(overlapping.error().msg, HasSubstr("guidPool.range = 02:00:00:00:00:00:01:04-02:00:00:00:00:00:01:0b"));
  EXPECT_THAT(overlapping.error().msg, HasSubstr("GUID pool \"b\""));
  EXPECT_THAT(overlapping.error().msg, HasSubstr("overlaps " + std::string(kRange) + " of GUID pool \"a\""));
  EXPECT_FALSE(std::filesystem::exists(dir("b"))) << "refused before its store is made";

  EXPECT_TRUE(allocate(guidPool("02:00:00:00:00:00:01:08-02:00:00:00:00:00:01:0b", "c"), "c3"));
  // A pool that holds no GUID any more is no obstacle.
  ASSERT_TRUE(pools_->release(dir("a"), {"c1", "net1"}, "gnet"));
  EXPECT_TRUE(allocate(guidPool("02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:03", "b"), "c2"));
}

// The first ADDs of two new node-local pools over one range, at once, in rounds: the overlap
// check and the allocation are one step under the node's GUID pools lock, so each round exactly
// one pool gets its GUID and the other is 7.
TEST_F(GuidPoolsTest, TwoNewOverlappingNodeLocalPoolsAtOnceOneGetsItsGuidTheOtherIs7) {
  const config::GuidPoolConf a = guidPool(kRange, "a");
  const config::GuidPoolConf b = guidPool("02:00:00:00:00:00:01:04-02:00:00:00:00:00:01:0b", "b");
  for (int round = 0; round < 20; ++round) {
    const std::string ca = "ra" + std::to_string(round);
    const std::string cb = "rb" + std::to_string(round);
    checker_->state[netns(ca)] = checker_->state[netns(cb)] = os::NetnsLiveness::kAlive;
    const GuidRequest ra{a, "gnet", {cni::Command::kAdd, ca, netns(ca), "net1", "", {}}, {}, {}, {}};
    const GuidRequest rb{b, "gnet", {cni::Command::kAdd, cb, netns(cb), "net1", "", {}}, {}, {}, {}};
    std::atomic<int> ready{0};
    std::optional<cni::Result<GuidLease>> ga;
    std::optional<cni::Result<GuidLease>> gb;
    auto run = [&ready](const GuidRequest& r, EmbeddedGuidPools& pools, std::optional<cni::Result<GuidLease>>& out) {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      out.emplace(pools.allocate(r));
    };
    std::thread ta(run, std::cref(ra), std::ref(*pools_), std::ref(ga));
    std::thread tb(run, std::cref(rb), std::ref(*pools_), std::ref(gb));
    ta.join();
    tb.join();
    ASSERT_NE(ga->has_value(), gb->has_value()) << "round " << round << ": both or neither got a GUID";
    const auto& refused = ga->has_value() ? *gb : *ga;
    EXPECT_EQ(refused.error().code, cni::Errc::kInvalidConfig) << refused.error().msg;
    // Back to no GUID held, for the next round's race.
    ASSERT_TRUE(pools_->release(dir(ga->has_value() ? "a" : "b"), {ga->has_value() ? ca : cb, "net1"}, "gnet"));
  }
}

}  // namespace
}  // namespace ibcni::ipam::testing
