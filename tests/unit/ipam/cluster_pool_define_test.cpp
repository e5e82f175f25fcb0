// SPDX-License-Identifier: Apache-2.0
// The pool's definition and the pools' registry (ipam/cluster/cluster_pool_define.cpp; I5 of
// ipam/README.md "Cluster safety") on both stores: the first definition is entered in the registry
// before it is recorded, and recorded marked so; a node that finds it so marked reads no registry;
// an older ibcni's unmarked definition is entered by the node that finds it; an entry of the pool
// with other ranges is refused, never replaced, and `--retire` takes it out; a `--retire` between
// a node's entry and its definition does not leave the definition out of the registry.
#include "cluster_fixture.h"
#include "support/counting_backend.h"

namespace ibcni::ipam::testing {
namespace {

using ::testing::HasSubstr;

using ClusterDefineTest = ClusterStoreFixture;

INSTANTIATE_TEST_SUITE_P(Stores, ClusterDefineTest, ::testing::Values(Store::kEtcd, Store::kMemory), storeName);

// The definition of "ibnet" and the registry's entry of it, as the store holds them now.
struct Recorded {
  std::optional<PoolDefinition> definition;
  std::optional<std::string> entry;
};

Recorded recorded(BlockBackend& b) {
  Recorded r;
  auto d = b.definition("ibnet");
  EXPECT_TRUE(d) << d.error().describe();
  r.definition = d ? *d : std::nullopt;
  auto reg = b.registry();
  EXPECT_TRUE(reg) << reg.error().describe();
  if (reg && reg->pools.contains("ibnet")) {
    r.entry = reg->pools.at("ibnet");
  }
  return r;
}

// Counts the pools' registry reads of a node's backend in `reads`.
BeforeCall countingRegistryReads(std::atomic<int>& reads) {
  return [&reads](std::string_view call) { reads += call == "registry" ? 1 : 0; };
}

TEST_P(ClusterDefineTest, TheFirstDefinitionIsRegisteredFirstAndANodeThatFindsItReadsNoRegistry) {
  ASSERT_TRUE(add("node-a", "c0"));
  auto b = store();
  const Recorded now = recorded(*b);
  ASSERT_TRUE(now.definition) << "recorded";
  EXPECT_TRUE(now.definition->registered);
  EXPECT_EQ(now.entry, now.definition->fields) << "the registry holds what the definition says";
  std::atomic<int> calls{0};
  std::atomic<int> reads{0};
  nodeWith("node-b", counting(backends(), calls, countingRegistryReads(reads)));
  auto r = add("node-b", "c0");
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_GT(calls.load(), 0) << "node-b claimed its block";
  EXPECT_EQ(reads.load(), 0) << "the definition says the registry holds it";
}

TEST_P(ClusterDefineTest, AnOlderIbcnisUnmarkedDefinitionIsEnteredInTheRegistryByTheNodeThatFindsIt) {
  ASSERT_TRUE(add("node-a", "c0"));
  auto b = store();
  const Recorded now = recorded(*b);
  ASSERT_TRUE(now.definition);
  // As an older ibcni leaves it: recorded first, not (yet) entered.
  PoolDefinition older = *now.definition;
  older.registered = false;
  auto replaced = b->replaceDefinition(older, now.definition->identity);
  ASSERT_TRUE(replaced && *replaced) << "the definition replaced";
  auto reg = b->registry();
  ASSERT_TRUE(reg);
  reg->pools.erase("ibnet");
  ASSERT_TRUE(b->writeRegistry(*reg).value_or(false));
  std::atomic<int> calls{0};
  std::atomic<int> reads{0};
  nodeWith("node-b", counting(backends(), calls, countingRegistryReads(reads)));
  auto r = add("node-b", "c0");
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_EQ(reads.load(), 1);
  EXPECT_EQ(recorded(*b).entry, older.fields) << "entered by node-b";
}

TEST_P(ClusterDefineTest, AnEntryOfThePoolWithOtherRangesIsRefusedNeverReplacedAndRetireTakesItOut) {
  // A node entered pool "ibnet" with other ranges and stopped before it recorded the definition:
  // its entry is what pool "scratch" (10.58.0.0/24, apart from ibnet's) has.
  NetSpec scratch;
  scratch.network = "scratch";
  scratch.ranges = R"([[{"subnet": "10.58.0.0/24"}]])";
  ASSERT_TRUE(add("node-x", "c0", conf("node-x", scratch)));
  auto b = store();
  auto reg = b->registry();
  ASSERT_TRUE(reg && reg->pools.contains("scratch"));
  const std::string theirs = reg->pools.at("scratch");
  reg->pools["ibnet"] = theirs;
  ASSERT_TRUE(b->writeRegistry(*reg).value_or(false));

  auto refused = add("node-a", "c0");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(refused.error().msg, HasSubstr("ipam.ranges of network \"ibnet\""));
  EXPECT_THAT(refused.error().msg, HasSubstr("is entered in the pools' registry with"));
  EXPECT_THAT(refused.error().msg, HasSubstr("--retire"));
  Recorded now = recorded(*b);
  EXPECT_FALSE(now.definition) << "nothing recorded";
  EXPECT_EQ(now.entry, theirs) << "never replaced";

  auto retired = node("node-b").retirePool(makeRequest(conf("node-b"), "", ""));
  ASSERT_TRUE(retired) << retired.error().msg;
  EXPECT_FALSE(recorded(*b).entry) << "taken out";
  auto defined = add("node-a", "c0");
  ASSERT_TRUE(defined) << defined.error().msg;
  now = recorded(*b);
  ASSERT_TRUE(now.definition);
  EXPECT_EQ(now.entry, now.definition->fields);
}

// The block claims of pool "ibnet" held by `node`, as the store holds them now.
std::size_t claimsOf(BlockBackend& b, const std::string& node) {
  auto claims = b.list(ClaimKind::kBlock, "ibnet", node);
  EXPECT_TRUE(claims) << claims.error().describe();
  return claims ? claims->size() : 0;
}

// Records the names of a node's backend calls in `calls`.
BeforeCall recordingCalls(std::vector<std::string>& calls) {
  return [&calls](std::string_view call) { calls.emplace_back(call); };
}

// A fresh node's first ADD claims its block and then reads the definition: the read after the
// claim is also the check that the claim stands. Two requests; reading the definition first too
// makes three.
TEST_P(ClusterDefineTest, AFreshNodesFirstAddClaimsThenReadsTheDefinitionOnce) {
  ASSERT_TRUE(add("node-a", "c0"));
  std::atomic<int> counted{0};
  std::vector<std::string> calls;
  nodeWith("node-b", counting(backends(), counted, recordingCalls(calls)));
  auto r = add("node-b", "c0");
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_EQ(calls, (std::vector<std::string>{"claim", "definition"}));
  auto again = add("node-b", "c1");
  ASSERT_TRUE(again) << again.error().msg;
  EXPECT_EQ(calls.size(), 2U) << "the next ADD, inside the block, sends nothing";
}

// A fresh node whose ranges differ from the pool's claims before it can know: the read after the
// claim refuses the configuration (7, naming the field), and the claim is given back.
TEST_P(ClusterDefineTest, AFreshNodeWhoseConfigurationDiffersFromThePoolsGivesItsClaimBack) {
  ASSERT_TRUE(add("node-a", "c0"));
  NetSpec other;
  other.extraIpam = R"(, "exclude": ["10.56.0.200/29"])";
  auto refused = add("node-b", "c0", conf("node-b", other));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(refused.error().msg, HasSubstr("exclude of network \"ibnet\""));
  auto b = store();
  EXPECT_EQ(claimsOf(*b, "node-b"), 0U) << "the claim is given back";
  EXPECT_EQ(claimsOf(*b, "node-a"), 1U);
  auto fits = add("node-b", "c0");
  ASSERT_TRUE(fits) << fits.error().msg;
  EXPECT_EQ(claimsOf(*b, "node-b"), 1U);
}

// A `--retire` that closes the definition between a fresh node's claim and its read of the
// definition: the node finds it closed, gives its claim back and hands nothing out.
TEST_P(ClusterDefineTest, AFreshNodesClaimUnderADefinitionClosedMeanwhileIsGivenBack) {
  ASSERT_TRUE(add("node-a", "c0"));
  ASSERT_TRUE(del("node-a", "c0"));
  auto b = store();
  std::atomic<int> counted{0};
  nodeWith("node-b", counting(backends(), counted, [&](std::string_view call) {
             if (call != "definition") {
               return;
             }
             auto d = b->definition("ibnet");
             ASSERT_TRUE(d && *d);
             PoolDefinition closing = **d;
             closing.closed = true;
             auto closed = b->replaceDefinition(closing, (**d).identity);
             ASSERT_TRUE(closed && *closed) << "closed";
           }));
  auto r = add("node-b", "c0");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, cni::Errc::kTryAgainLater);
  EXPECT_THAT(r.error().msg, HasSubstr("is being redefined or retired"));
  EXPECT_EQ(claimsOf(*b, "node-b"), 0U) << "the claim is given back";
}

// node-a enters the pool; before it records the definition, an operator retires the pool (which
// has none yet), taking node-a's entry out. node-a's definition, recorded next, is entered again.
TEST_P(ClusterDefineTest, ARetireBetweenANodesEntryAndItsDefinitionLeavesTheDefinitionInTheRegistry) {
  std::atomic<int> calls{0};
  nodeWith("node-a", counting(backends(), calls, [this](std::string_view call) {
             if (call == "definePool") {
               auto retired = node("node-b").retirePool(makeRequest(conf("node-b"), "", ""));
               EXPECT_TRUE(retired) << retired.error().msg;
             }
           }));
  auto r = add("node-a", "c0");
  ASSERT_TRUE(r) << r.error().msg;
  auto b = store();
  const Recorded now = recorded(*b);
  ASSERT_TRUE(now.definition);
  EXPECT_TRUE(now.definition->registered);
  EXPECT_EQ(now.entry, now.definition->fields) << "a definition marked registered is in the registry";
}

}  // namespace
}  // namespace ibcni::ipam::testing
