// SPDX-License-Identifier: Apache-2.0
// Cluster mode's geometry (block_grid.h) and the node's ledger (block_ledger.h), without a backend.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ipam/policy/allocator.h"
#include "ipam/cluster/block_grid.h"
#include "ipam/cluster/block_ledger.h"
#include "fake_store.h"
#include "ibcni/config/net_conf.h"
#include "store_test_util.h"

namespace ibcni::ipam::testing {
namespace {

struct Grid {
  explicit Grid(const std::string& ipamJson, std::uint32_t blockSize = 16) {
    auto c = config::parseIpamConfig(ipamJson);
    EXPECT_TRUE(c) << (c ? "" : c.error().msg);
    config = std::make_unique<IpamConfig>(*c);
    FakeStore store(Allocator::spansOf(*config));
    FakeNetnsChecker checker;
    Allocator a(*config, store, checker);
    std::vector<std::vector<Interval>> allowed;
    for (std::size_t s = 0; s < config->rangeSets.size(); ++s) {
      allowed.push_back(a.allowed(s));
    }
    grid = std::make_unique<BlockGrid>(*config, blockSize, allowed);
  }
  std::unique_ptr<IpamConfig> config;
  std::unique_ptr<BlockGrid> grid;
};

TEST(BlockGrid, BlocksAreAlignedOnTheirSizeAndNamedByNetworkAndPrefix) {
  Grid g(R"({"type": "ibcni-ipam", "ranges": [[{"subnet": "10.56.0.0/24", "rangeStart": "10.56.0.20"}],
                                              [{"subnet": "fd00:1::/120"}]]})");
  EXPECT_EQ(g.grid->count(0), 15U) << "10.56.0.16/28 to 10.56.0.240/28: the range starts at .20";
  EXPECT_EQ(g.grid->count(1), 16U);
  auto b = g.grid->blockOf(ip("10.56.0.37"));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->key, "10.56.0.32-28");
  EXPECT_EQ(b->describe(), "10.56.0.32/28");
  EXPECT_EQ(b->set, 0U);
  EXPECT_FALSE(g.grid->blockOf(ip("10.56.0.5"))) << "below rangeStart's block";
  auto v6 = g.grid->blockOf(ip("fd00:1::2a"));
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->key, "fd00:1::20-124");
  EXPECT_EQ(v6->set, 1U);
  EXPECT_TRUE(g.grid->byKey("10.56.0.32-28"));
  EXPECT_FALSE(g.grid->byKey("10.56.0.33-28")) << "not aligned";
  EXPECT_FALSE(g.grid->byKey("10.56.0.32-27")) << "another size";
  EXPECT_FALSE(g.grid->byKey("10.57.0.32-28")) << "outside the pool";
  EXPECT_FALSE(g.grid->byKey("garbage"));
}

TEST(BlockGrid, CandidatesAreFreeAllocatableAndRandom) {
  Grid g(R"({"type": "ibcni-ipam", "ranges": [[{"subnet": "10.56.0.0/24"}]], "exclude": ["10.56.0.64/28"]})");
  std::mt19937_64 rng(7);
  std::set<std::string> taken = {"10.56.0.0-28", "10.56.0.16-28"};
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    auto c = g.grid->candidates(0, taken, 3, rng);
    ASSERT_EQ(c.size(), 3U);
    for (const auto& b : c) {
      EXPECT_FALSE(taken.contains(b.key)) << b.key;
      EXPECT_NE(b.key, "10.56.0.64-28") << "wholly excluded: nothing to hand out";
      seen.insert(b.key);
    }
  }
  EXPECT_GT(seen.size(), 8U) << "random, not always the same few";
  // Nearly full: the last free block is found.
  std::set<std::string> all;
  for (int n = 0; n < 16; ++n) {
    all.insert("10.56.0." + std::to_string(n * 16) + "-28");
  }
  all.erase("10.56.0.208-28");
  auto last = g.grid->candidates(0, all, 4, rng);
  ASSERT_EQ(last.size(), 1U);
  EXPECT_EQ(last[0].key, "10.56.0.208-28");
  all.insert("10.56.0.208-28");
  EXPECT_TRUE(g.grid->candidates(0, all, 4, rng).empty());
}

// A node's own order of the blocks: the same on every run (a node whose ledger was lost meets its
// blocks first), another for another node or range set; fixed across builds (FNV-1a).
TEST(BlockGrid, EachNodeHasItsOwnOrderTheSameOnEveryRun) {
  Grid g(R"({"type": "ibcni-ipam", "ranges": [[{"subnet": "10.56.0.0/16"}]]})", 32);
  const auto firstOf = [&](std::string_view node, std::size_t set) {
    std::mt19937_64 order(preferenceSeed(node, set));
    std::vector<std::string> keys;
    for (const auto& b : g.grid->candidates(0, {}, 4, order)) {
      keys.push_back(b.key);
    }
    return keys;
  };
  EXPECT_EQ(firstOf("node-0001", 0), firstOf("node-0001", 0));
  EXPECT_NE(firstOf("node-0001", 0), firstOf("node-0002", 0));
  EXPECT_NE(firstOf("node-0001", 0), firstOf("node-0001", 1));
  EXPECT_EQ(preferenceSeed("node-1", 2), 0x3a28d5633f1effbbULL) << "FNV-1a of the name, a zero byte, the set's 8 bytes";
  std::set<std::string> firsts;
  for (int n = 0; n < 1000; ++n) {
    firsts.insert(firstOf("node-" + std::to_string(n), 0).front());
  }
  EXPECT_GT(firsts.size(), 600U) << "1000 nodes' first choices spread over the 2048 blocks (about 790 distinct)";
}

TEST(BlockGrid, AHugeIpv6PoolIsSampled) {
  Grid g(R"({"type": "ibcni-ipam", "ranges": [[{"subnet": "fd00::/64"}]]})", 32);
  std::mt19937_64 rng(1);
  auto c = g.grid->candidates(0, {}, 8, rng);
  ASSERT_EQ(c.size(), 8U);
  for (const auto& b : c) {
    EXPECT_EQ(b.cidr.prefixLen, 123);
    EXPECT_TRUE(g.grid->byKey(b.key)) << b.key;
  }
}

TEST(BlockGrid, TheFingerprintIsTheRangesAndTheBlockSize) {
  Grid a(R"({"type": "ibcni-ipam", "ranges": [[{"subnet": "10.56.0.0/24"}]], "exclude": ["10.56.0.9"]})");
  Grid same(R"({"type": "ibcni-ipam", "subnet": "10.56.0.0/24", "routes": [{"dst": "0.0.0.0/0"}]})");
  Grid otherRange(R"({"type": "ibcni-ipam", "ranges": [[{"subnet": "10.56.0.0/24", "rangeEnd": "10.56.0.99"}]]})");
  Grid otherSize(R"({"type": "ibcni-ipam", "ranges": [[{"subnet": "10.56.0.0/24"}]]})", 32);
  EXPECT_EQ(a.grid->fingerprint(), same.grid->fingerprint());
  EXPECT_NE(a.grid->fingerprint(), otherRange.grid->fingerprint());
  EXPECT_NE(a.grid->fingerprint(), otherSize.grid->fingerprint());
}

TEST(BlockLedger, RoundTripsAndACorruptFileIsNamed) {
  TempDir dir;
  auto none = readLedger(dir.path());
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  Ledger l;
  l.pool = "p";
  l.node = "node-a";
  l.network = "net";
  l.backend = "etcd";
  l.etcdLease = 42;
  l.definition = LedgerDefinition{R"({"blockSize":16})", "17", "network net on node node-a"};
  l.confirmed = os::BootStamp{"boot-1", 123456789};
  l.pendingCheckedAt = os::BootStamp{"boot-1", 5};
  using State = LedgerEntry::State;
  l.blocks.push_back({State::kOwned, 1, "10.56.0.32-28", {}, "3", "7", "2026-01-01T00:00:00Z", {}, {"boot-1", 9}});
  l.blocks.push_back({State::kIntent, 0, "10.56.0.48-28", {}, "", "", "2026-01-01T00:00:01Z", {"boot-1", 8}, {}});
  l.blocks.push_back({State::kReleasing, 0, "10.56.0.64-28", {}, "4", "11", "", {"boot-1", 8}, {}});
  l.blocks.push_back({State::kLost, 0, "10.56.0.80-28", {}, "5", "12", "", {}, {}});
  l.addresses.push_back({State::kOwned, 0, "10.56.0.200", {"c1:net1", "ns/sts-0", ""}, "8", "9", "", {}, {}});
  l.addresses.push_back({State::kOwned, 0, "10.56.0.201", {"", "", "node-b"}, "10", "10", "", {}, {}});
  ASSERT_TRUE(writeLedger(dir.path(), l));
  auto back = readLedger(dir.path());
  ASSERT_TRUE(back && *back);
  EXPECT_EQ(**back, l);
  std::ofstream(dir.path() + "/blocks.json") << R"({"pool": "p", "blocks": "x"})";
  auto bad = readLedger(dir.path());
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().err, EUCLEAN);
  EXPECT_NE(bad.error().op.find("blocks.json"), std::string::npos) << bad.error().op;
  auto aside = setLedgerAside(dir.path());
  ASSERT_TRUE(aside) << aside.error().describe();
  auto after = readLedger(dir.path());
  ASSERT_TRUE(after);
  EXPECT_FALSE(*after) << "a ledger set aside is gone from its place";
}

TEST(BlockLedger, AFormat1LedgerIsReadWithItsEntriesAndNoDefinition) {
  TempDir dir;
  std::ofstream(dir.path() + "/blocks.json") << R"({"pool": "p", "node": "n", "fingerprint": "f", "network": "net",
    "backend": "etcd", "etcdLease": "7", "defined": true,
    "blocks": [{"state": "owned", "set": 0, "name": "10.56.0.32-28", "version": "5", "emptySince": "2026-01-01T00:00:00Z"}],
    "addresses": [{"state": "intent", "name": "10.56.0.9", "owner": "c:eth0"}]})";
  auto l = readLedger(dir.path());
  ASSERT_TRUE(l && *l) << (l ? "none" : l.error().describe());
  EXPECT_FALSE((*l)->definition) << "a format-1 ledger's definition is checked again";
  ASSERT_EQ((*l)->blocks.size(), 1U);
  EXPECT_EQ((*l)->blocks[0].state, LedgerEntry::State::kOwned);
  EXPECT_EQ((*l)->blocks[0].version, "5");
  EXPECT_TRUE((*l)->blocks[0].emptySince.empty()) << "a wall-clock time is not a boot-clock stamp";
  ASSERT_EQ((*l)->addresses.size(), 1U);
  EXPECT_EQ((*l)->addresses[0].attrs.owner, "c:eth0");
  EXPECT_EQ((*l)->etcdLease, 7);
}

}  // namespace
}  // namespace ibcni::ipam::testing
