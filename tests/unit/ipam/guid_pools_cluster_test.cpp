// SPDX-License-Identifier: Apache-2.0
// sriov mode's cluster GUID pools (EmbeddedGuidPools with guidPool.cluster) over a real etcd: a
// block claimed under "guid_<pool>", ADDs inside owned blocks without one backend call (counted by
// wrapping the factory's backend), DEL without the backend, the agent's pass keeping the blocks,
// and the pools' registry refusing a GUID pool that overlaps another GUID pool, never an IPv6 one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster_fixture.h"
#include "ibcni/os/file_io.h"
#include "support/counting_backend.h"
#include "ipam/config/guid_pool.h"
#include "ipam/embedded_ipam_guids.h"

namespace ibcni::ipam::testing {
namespace {

using ::testing::HasSubstr;

class GuidPoolsClusterTest : public ClusterFixture {
 protected:
  EmbeddedGuidPools& pools(const std::string& n) {
    auto& slot = guidPools_[n];
    if (!slot) {
      EmbeddedIpamOptions o = nodeOptions(n);
      o.backends = counting(o.backends, backendCalls_);
      slot = std::make_unique<EmbeddedGuidPools>(o);
    }
    return *slot;
  }

  config::GuidPoolConf guidPool(const std::string& n, const std::string& pool = "gpool",
                                const std::string& range = "02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:0f") {
    const nlohmann::json cluster = {{"backend", "etcd"},
                                    {"etcd", {{"endpoints", etcd_.endpoints()}}},
                                    {"nodeName", n},
                                    {"timeoutMs", 2000}};
    auto g = config::guidPoolObject({{"range", range}, {"pool", pool}, {"blockSize", 4}, {"cluster", cluster}}, "gnet");
    EXPECT_TRUE(g) << (g ? "" : g.error().msg);
    return g ? *g : config::GuidPoolConf{};
  }

  cni::Result<GuidLease> allocate(const std::string& n, const std::string& cid,
                                  const config::GuidPoolConf& pool) {
    const cni::CmdArgs args{cni::Command::kAdd, cid, netns(n, cid), "net1", "", {}};
    cni::CniArgs cniArgs;
    cniArgs.podNamespace = "ns";
    cniArgs.podName = "pod-" + cid;
    checker_->state[netns(n, cid)] = os::NetnsLiveness::kAlive;
    return pools(n).allocate(GuidRequest{pool, "gnet", args, cniArgs, {}, {}});
  }
  std::uint64_t guid(const std::string& n, const std::string& cid) {
    auto l = allocate(n, cid, guidPool(n));
    EXPECT_TRUE(l) << cid << ": " << (l ? "" : l.error().msg);
    return l ? l->guid.value : 0;
  }

  std::atomic<int> backendCalls_{0};
  std::map<std::string, std::unique_ptr<EmbeddedGuidPools>> guidPools_;
};

TEST_F(GuidPoolsClusterTest, AddsInsideOwnedBlocksMakeNoBackendCallAndDelNeverDoes) {
  auto first = allocate("a", "c1", guidPool("a"));
  ASSERT_TRUE(first) << first.error().msg;
  EXPECT_EQ(first->storeDir, tmp_.path() + "/a/.guid/gpool");
  EXPECT_EQ(first->pool, "gpool");
  const std::uint64_t block = first->guid.value / 4;
  EXPECT_GE(first->guid.value, kFirst);
  EXPECT_LE(first->guid.value, kFirst + 15);
  EXPECT_EQ(etcdBlocks("guid_gpool").size(), 1U);
  EXPECT_EQ(etcdBlocks("guid_gpool").begin()->second, "a");
  EXPECT_GT(backendCalls_.load(), 0);

  const int calls = backendCalls_.load();
  const int http = http_.calls.load();
  std::set<std::uint64_t> values{first->guid.value};
  for (const char* cid : {"c2", "c3", "c4"}) {
    const auto v = guid("a", cid);
    EXPECT_EQ(v / 4, block) << cid << " gets a GUID of the owned block";
    values.insert(v);
  }
  EXPECT_EQ(values.size(), 4U);
  EXPECT_EQ(guid("a", "c1"), first->guid.value) << "idempotent";
  EXPECT_EQ(backendCalls_.load(), calls) << "no backend call inside an owned block";
  EXPECT_EQ(http_.calls.load(), http);

  auto released = pools("a").release(first->storeDir, {"c2", "net1"}, "gnet");
  ASSERT_TRUE(released) << released.error().msg;
  EXPECT_TRUE(*released);
  auto held = pools("a").held(first->storeDir, {"c1", "net1"});
  ASSERT_TRUE(held && *held);
  EXPECT_EQ((*held)->value, first->guid.value);
  EXPECT_EQ(backendCalls_.load(), calls) << "DEL and held make no backend call";
  EXPECT_EQ(guid("a", "c5") / 4, block) << "the released GUID is handed out again from the block";
  EXPECT_EQ(backendCalls_.load(), calls);

  // The block is full: the next ADD claims another one.
  const auto next = guid("a", "c6");
  EXPECT_NE(next / 4, block);
  EXPECT_GT(backendCalls_.load(), calls);
  EXPECT_EQ(etcdBlocks("guid_gpool").size(), 2U);

  // The agent's pass: the sweep, and the blocks kept.
  auto pass = pools("a").maintain(first->storeDir, false, [](const std::string&, const cni::AttachmentKey& k) {
    return k.containerId != "c6";
  });
  ASSERT_TRUE(pass) << pass.error().msg;
  ASSERT_EQ(pass->released.size(), 1U);
  EXPECT_EQ(pass->released[0].containerId, "c6");
  ASSERT_TRUE(pass->upkeep);
  EXPECT_EQ(pass->upkeep->pool, "gpool");
  EXPECT_EQ(pass->upkeep->node, "a");
}

// A reboot wipes the default data directory (tmpfs) with the pool's store and ledger. The pool index
// kept the pool: the node agent gives the directory back from it (restorePoolsFromIndex, done by hand
// here), and its pass adopts the node's block from the backend and gives it back once idle, without
// waiting for the pool's next ADD. A pool of another data directory is not indexed.
TEST_F(GuidPoolsClusterTest, AfterAWipeThePoolIndexLetsThePassGiveTheIdleBlockBack) {
  EmbeddedIpamOptions o = nodeOptions("r");
  o.poolIndexDir = tmp_.path() + "/index-r";
  EmbeddedGuidPools node(o);
  nlohmann::json cluster = {{"backend", "etcd"}, {"etcd", {{"endpoints", etcd_.endpoints()}}}, {"nodeName", "r"},
                            {"timeoutMs", 2000}, {"releaseAfterSeconds", 0}};
  auto pool = config::guidPoolObject(
      {{"range", "02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:0f"}, {"pool", "rpool"}, {"blockSize", 4},
       {"cluster", cluster}},
      "gnet");
  ASSERT_TRUE(pool) << pool.error().msg;
  const cni::CmdArgs args{cni::Command::kAdd, "c1", netns("r", "c1"), "net1", "", {}};
  checker_->state[netns("r", "c1")] = os::NetnsLiveness::kAlive;
  auto lease = node.allocate(GuidRequest{*pool, "gnet", args, cni::CniArgs{}, {}, {}});
  ASSERT_TRUE(lease) << lease.error().msg;
  ASSERT_TRUE(node.release(lease->storeDir, {"c1", "net1"}, "gnet"));
  EXPECT_EQ(etcdBlocks("guid_rpool").size(), 1U) << "the node keeps its block after its last DEL";

  auto index = readPoolIndex(o.poolIndexDir);
  ASSERT_EQ(index.size(), 1U);
  EXPECT_EQ(index[0].kind, "guid");
  EXPECT_EQ(index[0].storeDir, lease->storeDir);
  EXPECT_EQ(index[0].text, pool->poolFile);

  std::filesystem::remove_all(o.defaultDataDir);  // the reboot
  auto nothing = node.maintain(lease->storeDir, false, [](const std::string&, const cni::AttachmentKey&) {
    return false;
  });
  ASSERT_TRUE(nothing);
  EXPECT_FALSE(nothing->upkeep) << "without its directory the pass does not know the pool";
  EXPECT_EQ(etcdBlocks("guid_rpool").size(), 1U);

  std::filesystem::create_directories(index[0].storeDir);
  ASSERT_TRUE(os::writeFileAtomic(index[0].storeDir + "/" + index[0].fileName, index[0].text));
  for (int pass = 0; pass < 2 && !etcdBlocks("guid_rpool").empty(); ++pass) {
    auto kept = node.maintain(lease->storeDir, false, [](const std::string&, const cni::AttachmentKey&) {
      return false;
    });
    ASSERT_TRUE(kept) << kept.error().msg;
    advance(std::chrono::seconds(1));
  }
  EXPECT_TRUE(etcdBlocks("guid_rpool").empty()) << "the adopted block, idle, went back";

  // A pool of another data directory is the operator's to keep: no entry.
  auto other = config::guidPoolObject({{"range", "02:00:00:00:00:00:02:00-02:00:00:00:00:00:02:0f"},
                                       {"pool", "elsewhere"},
                                       {"blockSize", 4},
                                       {"dataDir", tmp_.path() + "/persistent"},
                                       {"cluster", cluster}},
                                      "gnet");
  ASSERT_TRUE(other) << other.error().msg;
  auto elsewhere = node.allocate(GuidRequest{*other, "gnet", args, cni::CniArgs{}, {}, {}});
  ASSERT_TRUE(elsewhere) << elsewhere.error().msg;
  EXPECT_EQ(readPoolIndex(o.poolIndexDir).size(), 1U);
}

TEST_F(GuidPoolsClusterTest, TwoNodesGetDistinctBlocks) {
  const auto a = guid("a", "c1");
  const auto b = guid("b", "c1");
  EXPECT_NE(a / 4, b / 4);
  const auto blocks = etcdBlocks("guid_gpool");
  EXPECT_EQ(blocks.size(), 2U);
  std::set<std::string> holders;
  for (const auto& [key, node] : blocks) {
    holders.insert(node);
  }
  EXPECT_EQ(holders, (std::set<std::string>{"a", "b"}));
}

TEST_F(GuidPoolsClusterTest, AGuidPoolOverlappingAnotherGuidPoolIs7ButAnIpv6PoolNeverOverlapsIt) {
  // An IPv6 pool whose addresses have the GUIDs' bits: no overlap, both ways.
  NetSpec v6;
  v6.network = "v6net";
  v6.ranges = R"([[{"subnet": "::200:0:0:100/120"}]])";
  auto ip = add("a", "p1", conf("a", v6));
  ASSERT_TRUE(ip) << ip.error().msg;
  EXPECT_THAT(address(ip), ::testing::StartsWith("::200:0:0:1"));
  ASSERT_TRUE(allocate("a", "c1", guidPool("a"))) << "no overlap with the IPv6 pool";

  auto other = allocate("b", "c2", guidPool("b", "gother", "02:00:00:00:00:00:01:0c-02:00:00:00:00:00:01:1b"));
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(other.error().msg, HasSubstr("pool \"gother\""));
  EXPECT_THAT(other.error().msg, HasSubstr("overlaps pool \"gpool\""));
  EXPECT_TRUE(etcdBlocks("guid_gother").empty());
}

TEST_F(GuidPoolsClusterTest, ThePoolsReportSpeaksOfGuidRanges) {
  const auto a = guid("a", "c1");
  guid("b", "c1");
  auto r = pools("a").pools(guidPool("a"), "gnet");
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_TRUE(r->guids);
  EXPECT_EQ(r->pool, "gpool");
  EXPECT_EQ(r->network, "gnet");
  EXPECT_EQ(r->node, "a");
  EXPECT_EQ(r->storeDir, tmp_.path() + "/a/.guid/gpool");
  EXPECT_EQ(r->blockSize, 4U);
  EXPECT_EQ(r->rangeSets,
            std::vector<std::string>{"guidPool.range = 02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:0f"});
  EXPECT_EQ(r->totalBlocks, "4");
  EXPECT_EQ(r->claimedBlocks, 2U);
  EXPECT_EQ(r->freeBlocks, "2");
  ASSERT_EQ(r->blocks.size(), 2U);
  std::size_t mine = 0;
  for (const auto& b : r->blocks) {
    if (!b.mine) {
      EXPECT_EQ(b.holder, "b");
      continue;
    }
    ++mine;
    const std::uint64_t first = a / 4 * 4;
    EXPECT_EQ(b.cidr, net::Guid{first}.toString() + "-" + net::Guid{first + 3}.toString());
    EXPECT_EQ(b.inUse, std::optional<std::uint64_t>(1));
    EXPECT_EQ(b.ledgerState, "owned");
  }
  EXPECT_EQ(mine, 1U);
  EXPECT_TRUE(r->disagreements.empty());
  const auto text = renderPoolReport(*r, now_.load());
  EXPECT_THAT(text, HasSubstr("pool gpool (network gnet): etcd at "));
  EXPECT_THAT(text, HasSubstr("blocks of 4 GUIDs"));
  const auto j = nlohmann::json::parse(printPoolReport(*r));
  EXPECT_EQ(j["kind"], "guid");
  EXPECT_TRUE(j["blocks"][0].contains("range"));
  EXPECT_FALSE(j["blocks"][0].contains("cidr"));

  auto local = guidPool("a");
  local.cluster.reset();
  auto refused = pools("a").pools(local, "gnet");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(refused.error().msg, HasSubstr("has no guidPool.cluster"));
}

}  // namespace
}  // namespace ibcni::ipam::testing
