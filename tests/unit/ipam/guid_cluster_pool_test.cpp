// SPDX-License-Identifier: Apache-2.0
// A cluster pool of GUIDs over a real etcd: ClusterPool in the GUID space under an Allocator and a
// FileStore of GUIDs, as a GUID pool runs it. Its blocks, definition and registry entry live under
// the backend pool "guid_<pool>" (never an address pool's name), its state under <dataDir>/.guid,
// and ADDs inside an owned block make no backend call.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "cluster_fixture.h"
#include "ipam/cluster/cluster_pool.h"
#include "ipam/cluster/node_identity.h"

namespace ibcni::ipam::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class GuidClusterPoolTest : public ClusterFixture {
 protected:
  struct GuidNode {
    IpamConfig config;
    std::string dir;
    std::unique_ptr<FileStore> store;
    std::unique_ptr<Allocator> alloc;
    std::unique_ptr<ClusterPool> pool;
  };

  GuidNode& guidNode(const std::string& n) {
    auto& slot = guidNodes_[n];
    if (slot) {
      return *slot;
    }
    slot = std::make_unique<GuidNode>();
    slot->config = guidRangeConfig(kFirst, kFirst + 15);
    config::ClusterConf c;
    c.path = "guidPool.cluster";
    c.poolKeysPath = "guidPool";
    c.backend = config::ClusterBackend::kEtcd;
    c.pool = "gpool";
    c.poolPath = "guidPool.pool";
    c.blockSize = 4;
    c.nodeName = n;
    c.timeout = std::chrono::milliseconds(2000);
    c.releaseAfter = std::chrono::seconds(0);
    c.etcd.endpoints = etcd_.endpoints();
    slot->config.cluster = c;
    slot->dir = clusterPoolDir(tmp_.path() + "/" + n, "gpool", SpaceKind::kGuid);
    std::filesystem::create_directories(slot->dir);
    FileStore::Options o{slot->dir, Allocator::spansOf(slot->config), std::chrono::seconds(10)};
    o.space = SpaceKind::kGuid;
    slot->store = std::make_unique<FileStore>(std::move(o));
    const auto clock = [this] { return now_.load(); };
    slot->alloc = std::make_unique<Allocator>(slot->config, *slot->store, *checker_, clock);
    slot->pool = std::make_unique<ClusterPool>(slot->config, "gnet", n, slot->dir, *slot->alloc, backends(),
                                               [this] { return bootNow(); }, clock);
    slot->alloc->useBlocks(*slot->pool);
    return *slot;
  }

  cni::Result<std::vector<Lease>> allocate(const std::string& n, const std::string& cid,
                                           std::vector<net::IpAddress> requested = {}) {
    AddRequest r;
    r.key = {cid, "net1"};
    r.pod = {"ns", "pod-" + cid, "uid-" + cid};
    r.netns = netns(n, cid);
    r.requested = std::move(requested);
    r.requestedFrom = "runtimeConfig.infinibandGUID";
    r.network = "gnet";
    checker_->state[r.netns] = os::NetnsLiveness::kAlive;
    return guidNode(n).alloc->allocate(r);
  }
  net::IpAddress guid(const std::string& n, const std::string& cid) {
    auto l = allocate(n, cid);
    EXPECT_TRUE(l && l->size() == 1) << (l ? "no lease" : l.error().msg);
    return l && l->size() == 1 ? l->front().address : net::IpAddress{};
  }

  // The node agent's pass over node `n`'s pool, under the store's lock.
  PoolMaintenance pass(const std::string& n) {
    auto& node = guidNode(n);
    auto lock = StoreLock::acquire(*node.store);
    EXPECT_TRUE(lock);
    auto held = node.store->list();
    EXPECT_TRUE(held);
    EXPECT_TRUE(node.pool->begin());
    auto kept = node.pool->maintain(held ? *held : std::vector<Allocation>{}, *node.alloc, false);
    EXPECT_TRUE(kept) << (kept ? "" : kept.error().msg);
    return kept ? *kept : PoolMaintenance{};
  }

  std::map<std::string, std::unique_ptr<GuidNode>> guidNodes_;
};

TEST_F(GuidClusterPoolTest, ABlockOfGuidsIsClaimedUnderTheGuidPoolsNameAndServesTheNextAddsWithoutTheBackend) {
  const auto first = guid("a", "c1");
  ASSERT_TRUE(first.isGuid()) << first.toString();
  ASSERT_GE(toInt(first), kFirst);
  ASSERT_LE(toInt(first), kFirst + 15);
  const std::string key = guidSpace().blockKey(fromInt(toInt(first) / 4 * 4, net::kFamilyGuid), 2);
  EXPECT_EQ(etcdBlocks("guid_gpool"), (std::map<std::string, std::string>{{key, "a"}}));
  EXPECT_TRUE(etcdBlocks("gpool").empty()) << "an address pool of the same name holds nothing";
  EXPECT_FALSE(std::filesystem::exists(tmp_.path() + "/a/.cluster")) << "an address pool's directory";
  auto ledger = readLedger(guidNode("a").dir);
  ASSERT_TRUE(ledger && *ledger);
  ASSERT_EQ((*ledger)->blocks.size(), 1U);
  EXPECT_EQ((*ledger)->blocks[0].name, key);
  EXPECT_EQ(guidNode("a").dir, tmp_.path() + "/a/.guid/gpool");

  auto be = etcdBackend();
  auto def = be.definition("guid_gpool");
  ASSERT_TRUE(def && *def);
  EXPECT_EQ((*def)->fields,
            R"({"blockSize":4,"guidRanges":[[{"first":"0200000000000100","last":"020000000000010f"}]],"kind":"guid"})");
  auto reg = be.registry();
  ASSERT_TRUE(reg);
  EXPECT_TRUE(reg->pools.contains("guid_gpool"));
  EXPECT_FALSE(reg->pools.contains("gpool"));

  // The rest of the block: no backend call.
  const int calls = http_.calls.load();
  std::set<std::uint64_t> values{static_cast<std::uint64_t>(toInt(first))};
  for (const char* cid : {"c2", "c3", "c4"}) {
    const auto v = guid("a", cid);
    EXPECT_EQ(toInt(v) / 4, toInt(first) / 4) << v.toString() << " is in the owned block";
    values.insert(static_cast<std::uint64_t>(toInt(v)));
  }
  EXPECT_EQ(values.size(), 4U);
  EXPECT_EQ(http_.calls.load(), calls);

  // A released GUID is handed out again from the same block, still without the backend.
  auto released = guidNode("a").alloc->release({"c2", "net1"});
  ASSERT_TRUE(released && *released);
  const auto again = guid("a", "c5");
  EXPECT_EQ(toInt(again) / 4, toInt(first) / 4);
  EXPECT_EQ(http_.calls.load(), calls);
}

TEST_F(GuidClusterPoolTest, TwoNodesHoldDistinctBlocksAndAnEmptyBlockIsGivenBack) {
  const auto a = guid("a", "c1");
  const auto b = guid("b", "c1");
  EXPECT_NE(toInt(a) / 4, toInt(b) / 4);
  EXPECT_EQ(etcdBlocks("guid_gpool").size(), 2U);

  // A GUID of a's block, asked for on b: a's to hand out (11 naming node a, in GUID words).
  auto refused = allocate("b", "c2", {fromInt(toInt(a) / 4 * 4 + 3, net::kFamilyGuid)});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, cni::Errc::kTryAgainLater);
  EXPECT_THAT(refused.error().msg,
              HasSubstr("which node a holds and hands out from; a pod can name a GUID of a block"));
  EXPECT_THAT(refused.error().msg, Not(HasSubstr("ipam.reservations")));

  auto released = guidNode("a").alloc->release({"c1", "net1"});
  ASSERT_TRUE(released && *released);
  const auto kept = pass("a");
  EXPECT_EQ(kept.released.size(), 1U);
  auto blocks = etcdBlocks("guid_gpool");
  EXPECT_EQ(blocks.size(), 1U);
  EXPECT_EQ(blocks.begin()->second, "b");
}

TEST_F(GuidClusterPoolTest, AFullPoolSaysSoInGuids) {
  for (int i = 0; i < 16; ++i) {
    EXPECT_TRUE(guid("a", "c" + std::to_string(i)).isGuid());
  }
  EXPECT_EQ(etcdBlocks("guid_gpool").size(), 4U);
  auto full = allocate("a", "c16");
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, cni::Errc::kTryAgainLater) << "the holders were asked for room";
  EXPECT_THAT(full.error().msg, HasSubstr("no free GUID in pool \"gpool\" (guidPool.range = "));
  EXPECT_THAT(full.error().msg, HasSubstr("node a holds 4 block(s) of 4 GUIDs ("));
  EXPECT_THAT(full.error().msg, HasSubstr("02:00:00:00:00:00:01:0c-02:00:00:00:00:00:01:0f"));
  EXPECT_THAT(full.error().msg, HasSubstr("none of the pool's 4 blocks is free; the nodes holding blocks were asked "
                                          "to give back empty ones or lend GUIDs"));
  EXPECT_THAT(full.error().msg, Not(HasSubstr("address")));
}

}  // namespace
}  // namespace ibcni::ipam::testing
