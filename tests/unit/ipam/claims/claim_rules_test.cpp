// SPDX-License-Identifier: Apache-2.0
// The claim protocol (ipam/claims/claim_rules.h) over the claim store in memory
// (support/memory_claim_store.h), the third adapter beside etcd's and Kubernetes': what every
// BlockBackend promises, with the store's proof of a gone node as etcd gives it (liveness lapsed and
// registration deleted), and a planted broken compare-and-swap caught. The same rules over etcd
// and over a real kube-apiserver are etcd_block_backend_test.cpp and k8s_block_backend_test.cpp;
// the cluster pool's cases over this store are cluster_pool_test.cpp's "memory" instances.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "block_backend_test_util.h"
#include "support/memory_claim_store.h"

namespace ibcni::ipam {
namespace {

using ::ibcni::testing::MemoryWorld;
using ::ibcni::testing::memoryBackend;
using namespace std::chrono_literals;

class ClaimRulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    world_->clock = [this] { return now_; };
    world_->ttl = 60s;
  }
  std::unique_ptr<BlockBackend> node() { return memoryBackend(world_); }
  /// Twenty nodes claim block b1 at once: what each was answered.
  std::vector<BackendResult<ClaimOutcome>> twentyClaimersOfOneBlock() {
    std::vector<std::unique_ptr<BlockBackend>> nodes;
    for (int i = 0; i < 20; ++i) {
      nodes.push_back(node());
    }
    return raceAtOnce(20, [&](int i, auto waitForStart) {
      waitForStart();
      return nodes[static_cast<std::size_t>(i)]->claim(ClaimKind::kBlock, "p0", "b1", "node-" + std::to_string(i), {});
    });
  }

  std::shared_ptr<MemoryWorld> world_ = std::make_shared<MemoryWorld>();
  std::chrono::system_clock::time_point now_{std::chrono::seconds(1900000000)};
};

TEST_F(ClaimRulesTest, AClaimIsTheFirstNodesAndAdoptedByItAgain) {
  auto b = node();
  const auto first = must(b->claim(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", {}), "claim");
  EXPECT_EQ(first.state, ClaimState::kClaimed);
  const auto again = must(b->claim(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", {}), "claim again");
  EXPECT_EQ(again.state, ClaimState::kAdopted) << "a retried claim whose answer was lost";
  EXPECT_EQ(again.holder.version, first.holder.version) << "adopted without a write";
  const auto other = must(node()->claim(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-b", {}), "claim by b");
  EXPECT_EQ(other.state, ClaimState::kHeldByOther);
  EXPECT_EQ(other.holder.node, "node-a");
}

TEST_F(ClaimRulesTest, AnAddressOfTheSamePodIsAdoptedUnderItsNewOwnerAndAnotherPodsIsNot) {
  auto b = node();
  ASSERT_EQ(must(b->claim(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", {"c1:net1", "ns/pod", ""}), "claim").state,
            ClaimState::kClaimed);
  const auto moved = must(b->claim(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", {"c2:net1", "ns/pod", ""}), "c2");
  EXPECT_EQ(moved.state, ClaimState::kAdopted);
  EXPECT_EQ(moved.holder.attrs.owner, "c2:net1") << "its owner rewritten";
  const auto other = must(b->claim(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", {"c3:net1", "ns/other", ""}), "c3");
  EXPECT_EQ(other.state, ClaimState::kHeldByOther) << "another pod on the same node";
}

TEST_F(ClaimRulesTest, TwentyConcurrentClaimersOfOneBlockHaveExactlyOneWinner) {
  const auto results = twentyClaimersOfOneBlock();
  std::string winner;
  expectOneWinner(results, winner);
}

TEST_F(ClaimRulesTest, AReleaseLeavesWhatIsNotOursAndSaysGoneOnceGone) {
  auto b = node();
  (void)must(b->claim(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", {"c1:net1", "", ""}), "claim");
  EXPECT_EQ(must(b->release(ClaimKind::kAddress, "p0", "10.1.0.5", "node-b", ""), "b"), ReleaseOutcome::kNotOurs);
  EXPECT_EQ(must(b->release(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", "c9:net1"), "owner"),
            ReleaseOutcome::kNotOurs);
  EXPECT_EQ(must(b->release(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", "c1:net1"), "a"), ReleaseOutcome::kReleased);
  EXPECT_EQ(must(b->release(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", ""), "again"), ReleaseOutcome::kGone);
}

TEST_F(ClaimRulesTest, RenewSaysKeptLostOrGoneAndWhenTheNodesLivenessHadLapsed) {
  auto a = node();
  const auto c1 = must(a->claim(ClaimKind::kBlock, "p0", "b1", "node-a", {}), "b1");
  const auto c2 = must(a->claim(ClaimKind::kBlock, "p0", "b2", "node-a", {}), "b2");
  const std::vector<HeldClaim> held{{ClaimKind::kBlock, "b1", c1.holder.identity, c1.holder.version},
                                    {ClaimKind::kBlock, "b2", c2.holder.identity, c2.holder.version},
                                    {ClaimKind::kBlock, "b3", "", ""}};
  auto r = must(a->renew("node-a", "p0", held), "renew");
  EXPECT_FALSE(r.livenessRenewed) << "the first renewal grants liveness, it does not renew a lapsed one";
  ASSERT_EQ(r.claims.size(), 3U);
  EXPECT_EQ(r.claims[0].state, HoldCheck::State::kKept);
  EXPECT_EQ(r.claims[2].state, HoldCheck::State::kGone);
  // b2 released and claimed by node-b meanwhile: another grant.
  ASSERT_EQ(must(a->release(ClaimKind::kBlock, "p0", "b2", "node-a", ""), "release"), ReleaseOutcome::kReleased);
  (void)must(node()->claim(ClaimKind::kBlock, "p0", "b2", "node-b", {}), "b2 by b");
  now_ += 2min;  // past the liveness TTL
  r = must(a->renew("node-a", "p0", held), "renew after a lapse");
  EXPECT_TRUE(r.livenessRenewed);
  EXPECT_EQ(r.claims[1].state, HoldCheck::State::kLost);
  EXPECT_EQ(r.claims[1].now.node, "node-b");
}

TEST_F(ClaimRulesTest, TakeOverNeedsTheHolderLapsedAndForgottenAndOneOfTwoTakersWins) {
  auto a = node();
  (void)must(a->renew("node-a", "p0", {}), "a alive");
  const auto held = must(a->claim(ClaimKind::kBlock, "p0", "b1", "node-a", {}), "claim").holder;
  auto b = node();
  EXPECT_EQ(must(b->takeOver(ClaimKind::kBlock, "p0", "b1", "node-b", held, {}), "alive").state,
            ClaimState::kHeldByOther);
  EXPECT_FALSE(b->forgetNode("node-a")) << "refused while its liveness lasts";
  now_ += 2min;
  EXPECT_EQ(must(b->takeOver(ClaimKind::kBlock, "p0", "b1", "node-b", held, {}), "lapsed, registered").state,
            ClaimState::kHeldByOther)
      << "a lapsed node may only be slow";
  EXPECT_EQ(must(b->removeGone(ClaimKind::kBlock, "p0", "b1", held), "remove"), ReleaseOutcome::kNotOurs);
  must(b->forgetNode("node-a"), "forget");
  auto c = node();
  const auto results = raceAtOnce(2, [&](int i, auto waitForStart) {
    waitForStart();
    return (i == 0 ? b : c)->takeOver(ClaimKind::kBlock, "p0", "b1", i == 0 ? "node-b" : "node-c", held, {});
  });
  std::string winner;
  expectOneWinner(results, winner);
  EXPECT_EQ(must(b->list(ClaimKind::kBlock, "p0", std::nullopt), "list").at(0).holder.node, winner);
}

TEST_F(ClaimRulesTest, TheFirstDefinitionStandsAndChangesOnlyAtTheVersionSeen) {
  auto b = node();
  const auto first = must(b->definePool({"p0", "F1", "network a", "", false}), "define");
  EXPECT_EQ(must(node()->definePool({"p0", "F2", "network b", "", false}), "define again").fields, "F1");
  const auto closed = must(b->replaceDefinition({"p0", "F1", "network a", "", true}, first.identity), "close");
  ASSERT_TRUE(closed);
  EXPECT_FALSE(must(b->replaceDefinition({"p0", "F3", "x", "", false}, first.identity), "stale"));
  EXPECT_FALSE(must(b->removeDefinition("p0", first.identity), "remove at a stale version"));
  EXPECT_TRUE(must(b->removeDefinition("p0", closed->identity), "remove"));
  EXPECT_TRUE(must(b->removeDefinition("p0", closed->identity), "remove a removed one")) << "gone already";
  EXPECT_FALSE(must(b->definition("p0"), "definition"));
}

TEST_F(ClaimRulesTest, TheRegistryTakesOneWriterAtATime) {
  auto b = node();
  PoolRegistry r = must(b->registry(), "read");
  r.pools["p0"] = "F";
  EXPECT_TRUE(must(b->writeRegistry(r), "create"));
  EXPECT_FALSE(must(b->writeRegistry(r), "again at the old version"));
  EXPECT_EQ(must(b->registry(), "read again").pools.at("p0"), "F");
}

TEST_F(ClaimRulesTest, ADemandLapsesWithItsNodeAndIsWithdrawn) {
  auto b = node();
  (void)must(b->renew("node-b", "p0", {}), "alive");
  must(b->demand("p0", "node-b", 3), "demand");
  auto d = must(b->demands("p0"), "demands");
  ASSERT_EQ(d.size(), 1U);
  EXPECT_EQ(d[0].wanted, 3);
  EXPECT_FALSE(d[0].lapsed);
  now_ += 2min;
  EXPECT_TRUE(must(b->demands("p0"), "later").at(0).lapsed);
  must(b->withdraw("p0", "node-b"), "withdraw");
  EXPECT_TRUE(must(b->demands("p0"), "withdrawn").empty());
}

TEST_F(ClaimRulesTest, MalformedNamesAreRefusedBeforeTheStoreIsAsked) {
  auto b = node();
  for (const auto& bad : {std::string(), std::string("a/b"), std::string("a b"), std::string(254, 'x')}) {
    for (const auto& [call, kind] : callsNaming(*b, bad, Holder{})) {
      EXPECT_EQ(kind, BackendErrc::kInvalidArgument) << call << " with " << cni::quoted(bad);
    }
  }
  EXPECT_EQ(world_->calls, 0) << "the rules check names before any call";
}

TEST_F(ClaimRulesTest, AStoreDownIsUnreachableForEveryCall) {
  world_->down = true;
  auto b = node();
  const auto r = b->claim(ClaimKind::kBlock, "p0", "b1", "node-a", {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, BackendErrc::kUnreachable);
  EXPECT_FALSE(b->renew("node-a", "p0", {}));
}

// The race case above can fail: over a planted store that overwrites an existing claim (no
// create-if-absent), more than one of twenty claimers wins.
TEST_F(ClaimRulesTest, APlantedBrokenCreateGivesTheRaceMoreThanOneWinner) {
  world_->brokenCreate = true;
  const auto results = twentyClaimersOfOneBlock();
  int claimed = 0;
  for (const auto& r : results) {
    claimed += r && r->state == ClaimState::kClaimed ? 1 : 0;
  }
  EXPECT_GT(claimed, 1) << "expectOneWinner would fail on this store";
}

}  // namespace
}  // namespace ibcni::ipam
