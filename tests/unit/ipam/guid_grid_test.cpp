// SPDX-License-Identifier: Apache-2.0
// A GUID pool's geometry and definition, without a backend: blocks are aligned runs of blockSize
// GUIDs inside the range, keyed by their first GUID and log2 of the size; a GUID pool's
// definition is never taken for an address pool's, so it never overlaps an IPv6 pool over the same
// numbers.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <set>

#include "ipam/cluster/block_grid.h"
#include "ipam/cluster/cluster_definition.h"
#include "ipam/cluster/node_identity.h"
#include "ipam/config/node_name.h"
#include "store_test_util.h"

namespace ibcni::ipam::testing {
namespace {

// kFirst .. kFirst + blocks * blockSize - 1, every GUID allowed but those in `notAllowed`.
BlockGrid guidGrid(const IpamConfig& c, std::uint32_t blockSize, std::vector<Interval> notAllowed = {}) {
  const auto& r = c.rangeSets[0].ranges[0];
  return BlockGrid(c, blockSize, {net::subtract({toInt(r.rangeStart), toInt(r.rangeEnd)}, notAllowed)});
}

TEST(GuidBlockGrid, BlocksAreAlignedRunsNamedByTheirFirstGuidAndLog2OfTheSize) {
  const auto c = guidRangeConfig(kFirst, kFirst + 4 * 256 - 1);
  const auto grid = guidGrid(c, 256);
  EXPECT_EQ(grid.count(0), 4U);
  auto b = grid.blockOf(g(kFirst + 0x134));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->key, "0200000000000200-8");
  EXPECT_EQ(b->describe(), "02:00:00:00:00:00:02:00-02:00:00:00:00:00:02:ff");
  EXPECT_EQ(b->span.lo, kFirst + 0x100);
  EXPECT_EQ(b->span.hi, kFirst + 0x1ff);
  EXPECT_EQ(b->set, 0U);
  auto back = grid.byKey(b->key);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->span, b->span);
  EXPECT_EQ(back->describe(), b->describe());
  auto span = guidSpace().spanOfKey("0200000000000200-8");
  ASSERT_TRUE(span);
  EXPECT_EQ(span->family, net::kFamilyGuid);
  EXPECT_EQ(span->span, b->span);
  EXPECT_TRUE(span->contains(g(kFirst + 0x1ff)));
  EXPECT_FALSE(span->contains(ip("::200:0:0:2ff"))) << "an IPv6 address of the same number";

  EXPECT_FALSE(grid.blockOf(g(kFirst - 1))) << "below the range";
  EXPECT_FALSE(grid.blockOf(g(kFirst + 4 * 256))) << "above the range";
  EXPECT_FALSE(grid.blockOf(ip("::200:0:0:234"))) << "not a GUID";
  EXPECT_FALSE(grid.byKey("0200000000000210-8")) << "not aligned";
  EXPECT_FALSE(grid.byKey("0200000000000200-7")) << "another size";
  EXPECT_FALSE(grid.byKey("0200000000000600-8")) << "outside the pool";
  EXPECT_FALSE(grid.byKey("::200:0:0:200-120")) << "an address pool's key";
  EXPECT_FALSE(grid.byKey("02:00:00:00:00:00:02:00-8")) << "GUID text is not a key";
  EXPECT_FALSE(guidSpace().spanOfKey("10.56.0.32-27"));
  EXPECT_FALSE(ipSpace().spanOfKey("0200000000000200-8"));
  EXPECT_FALSE(guidSpace().spanOfKey("0200000000000200-65"));

  auto any = grid.anyByKey("0200000000001000-4");
  ASSERT_TRUE(any) << "another pool's block still names its GUIDs";
  EXPECT_EQ(any->describe(), "02:00:00:00:00:00:10:00-02:00:00:00:00:00:10:0f");
  EXPECT_EQ(grid.fingerprint(), "[02:00:00:00:00:00:01:00-02:00:00:00:00:00:04:ff]; blockSize 256");
}

TEST(GuidBlockGrid, BlocksOfOneGuidAreKeyedWithSizeZero) {
  const auto grid = guidGrid(guidRangeConfig(kFirst, kFirst + 7), 1);
  EXPECT_EQ(grid.count(0), 8U);
  const auto one = grid.byKey("0200000000000105-0");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->span, (Interval{kFirst + 5, kFirst + 5}));
  EXPECT_EQ(one->describe(), "02:00:00:00:00:00:01:05-02:00:00:00:00:00:01:05");
  EXPECT_EQ(grid.blockOf(g(kFirst + 5)).value_or(Block{}).key, "0200000000000105-0");
}

TEST(GuidBlockGrid, CandidatesAreFreeAllocatableAndTheLastOnesAreFound) {
  const auto c = guidRangeConfig(kFirst, kFirst + 16 * 4 - 1);
  // The third block holds nothing to hand out.
  const auto grid = guidGrid(c, 4, {{kFirst + 8, kFirst + 11}});
  std::mt19937_64 rng(3);
  std::set<std::string> seen;
  for (int i = 0; i < 40; ++i) {
    for (const auto& b : grid.candidates(0, {}, 3, rng)) {
      EXPECT_NE(b.key, "0200000000000108-2");
      EXPECT_EQ(b.span.lo % 4, 0U);
      seen.insert(b.key);
    }
  }
  EXPECT_EQ(seen.size(), 15U) << "random, every allocatable block";
  std::set<std::string> taken;
  for (std::uint64_t n = 0; n < 16; ++n) {
    taken.insert(guidSpace().blockKey(g(kFirst + 4 * n), 2));
  }
  taken.erase("020000000000012c-2");
  auto last = grid.candidates(0, taken, 4, rng);
  ASSERT_EQ(last.size(), 1U);
  EXPECT_EQ(last[0].key, "020000000000012c-2");
  taken.insert(last[0].key);
  EXPECT_TRUE(grid.candidates(0, taken, 4, rng).empty());
}

// The definition of a GUID pool over kFirst.. and of an IPv6 pool over the same numbers.
struct Definitions {
  Definitions() {
    auto guids = guidRangeConfig(0x0200000000000000ULL, 0x02000000000fffffULL);
    guids.cluster = config::ClusterConf{};
    guids.cluster->blockSize = 256;
    guid = definitionFields(guids);
    auto v6 = config::parseIpamConfig(R"({"type": "ibcni-ipam", "ranges": [[{"subnet": "::200:0:0:0/104"}]]})");
    EXPECT_TRUE(v6) << (v6 ? "" : v6.error().msg);
    v6->cluster = config::ClusterConf{};
    v6->cluster->blockSize = 256;
    ipv6 = definitionFields(*v6);
  }
  std::string guid;
  std::string ipv6;
};

TEST(GuidPoolDefinition, HasNoAddressRangesAndNeverOverlapsAnIpv6PoolOfTheSameNumbers) {
  const Definitions d;
  EXPECT_EQ(d.guid, R"({"blockSize":256,"guidRanges":[[{"first":"0200000000000000","last":"02000000000fffff"}]],)"
                    R"("kind":"guid"})");
  EXPECT_EQ(d.ipv6, R"({"blockSize":256,"exclude":[],"ranges":[[{"gateway":"::200:0:0:1","rangeEnd":)"
                    R"("::200:0:ff:ffff","rangeStart":"::200:0:0:2","subnet":"::200:0:0:0/104"}]],)"
                    R"("reservations":{}})");
  EXPECT_EQ(overlapOf(d.ipv6, d.ipv6), "::200:0:0:2") << "the same numbers as the GUIDs";
  EXPECT_EQ(overlapOf(d.guid, d.ipv6), std::nullopt);
  EXPECT_EQ(overlapOf(d.ipv6, d.guid), std::nullopt);
  // What an older reader sees: no "ranges", hence nothing to overlap.
  EXPECT_EQ(overlapOf(R"({"ranges": []})", d.guid), std::nullopt);
  auto diff = compareDefinitions(d.guid, d.ipv6);
  ASSERT_TRUE(diff);
  EXPECT_EQ(diff->field, "kind");
  diff = compareDefinitions(d.ipv6, d.guid);
  ASSERT_TRUE(diff);
  EXPECT_EQ(diff->field, "kind");
  EXPECT_EQ(compareDefinitions(d.guid, d.guid), std::nullopt);
}

TEST(GuidPoolDefinition, TwoGuidPoolsOverTheSameGuidsOverlapAndDifferInTheirFields) {
  const Definitions d;
  auto other = guidRangeConfig(0x02000000000ff000ULL, 0x0200000000100fffULL);
  other.cluster = config::ClusterConf{};
  other.cluster->blockSize = 4096;
  const std::string o = definitionFields(other);
  EXPECT_EQ(overlapOf(d.guid, o), "02:00:00:00:00:0f:f0:00");
  EXPECT_EQ(overlapOf(o, d.guid), "02:00:00:00:00:0f:f0:00");
  auto diff = compareDefinitions(d.guid, o);
  ASSERT_TRUE(diff);
  EXPECT_EQ(diff->field, "guidRanges");
  auto apart = guidRangeConfig(0x0200000000100000ULL, 0x02000000001fffffULL);
  apart.cluster = config::ClusterConf{};
  apart.cluster->blockSize = 256;
  EXPECT_EQ(overlapOf(d.guid, definitionFields(apart)), std::nullopt);
  EXPECT_EQ(compareDefinitions(d.guid, definitionFields(apart))->field, "guidRanges");
  apart = guidRangeConfig(0x0200000000000000ULL, 0x02000000000fffffULL);
  apart.cluster = config::ClusterConf{};
  apart.cluster->blockSize = 512;
  EXPECT_EQ(compareDefinitions(d.guid, definitionFields(apart))->field, "blockSize");
}

TEST(GuidPoolNode, ItsStateIsUnderDotGuidAndItsMessagesNameGuidPoolsCluster) {
  EXPECT_EQ(clusterPoolDir("/run/ibcni-ipam", "ib-p", SpaceKind::kGuid), "/run/ibcni-ipam/.guid/ib-p");
  EXPECT_EQ(clusterPoolDir("/run/ibcni-ipam", "ib-p"), "/run/ibcni-ipam/.cluster/ib-p");
  config::ClusterConf c;
  c.path = "guidPool.cluster";
  c.nodeName = "gpu-7";
  auto id = clusterNodeIdentity(c, "");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->source, "guidPool.cluster.nodeName");
  TempDir tmp;
  const std::string file = tmp.path() + "/node-name";
  std::ofstream(file) << "Not_A_Node\n";
  c.nodeName.clear();
  auto bad = clusterNodeIdentity(c, file);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, cni::Errc::kInvalidConfig);
  EXPECT_EQ(bad.error().msg.find("guidPool.cluster.nodeName is not set and " + file), 0U) << bad.error().msg;
  EXPECT_EQ(bad.error().msg.find("ipam.cluster"), std::string::npos) << bad.error().msg;
}

}  // namespace
}  // namespace ibcni::ipam::testing
