// SPDX-License-Identifier: Apache-2.0
// The cluster pool under the faults that gave one address to two pods or leaked it (ipam/README.md
// "Cluster safety", cases 1, 3-5), each reproduced in process against a real etcd: a lapsed etcd
// lease, holds past the lease, claims gone from the backend, a forgotten node, a release whose
// answer was lost; shared pools (GC, reservations, overlapping pools); configuration changes and
// corrupt ledgers; capacity held by idle and busy nodes. Case 2 (Kubernetes) is cluster_k8s_test.cpp.
#include "cluster_fixture.h"

namespace ibcni::ipam::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;
using namespace std::chrono_literals;

using ClusterSafetyTest = ClusterFixture;

const char* kSmall = R"([[{"subnet": "10.56.0.0/27"}]])";  // 2 blocks of 16 (29 usable addresses)

NetSpec small(const std::string& extraCluster = "") {
  NetSpec s;
  s.ranges = kSmall;
  s.extraCluster = extraCluster;
  return s;
}

// --- Case 1: etcd -----------------------------------------------------------------------------

// A node whose agent stopped for longer than the lease keeps its blocks: nothing expires them, so
// another node never hands out their addresses.
TEST_F(ClusterSafetyTest, ALapsedLeaseNeverFreesANodesBlocks) {
  auto a = add("node-a", "c0", conf("node-a", small()));
  ASSERT_TRUE(a) << a.error().msg;
  ASSERT_TRUE(pass("node-a", conf("node-a", small())));
  const std::string mine = owned("node-a").at(0);
  lapse("node-a");
  std::set<std::string> others;
  for (int i = 0; i < 40; ++i) {
    auto r = add("node-b", "c" + std::to_string(i), conf("node-b", small()));
    if (!r) {
      break;
    }
    EXPECT_FALSE(inBlock(address(r), mine)) << address(r) << " comes from node-a's block " << mine;
    EXPECT_NE(address(r), address(a)) << "one address, two pods";
  }
  EXPECT_EQ(etcdBlocks()[mine], "node-a") << "the block outlives the lease";
  auto p = pass("node-a", conf("node-a", small()));
  ASSERT_TRUE(p) << p.error().msg;
  EXPECT_TRUE(p->upkeep->livenessRenewed) << "the lapse is reported, not called a renewal";
  EXPECT_TRUE(p->upkeep->lostBlocks.empty());
  EXPECT_EQ(owned("node-a"), std::vector<std::string>{mine});
}

// I2: past the lease (less a margin) since its last confirmation, a node confirms its holds (one
// renewal, then cached) before it hands out; when the backend cannot confirm them, nothing.
TEST_F(ClusterSafetyTest, ANodeConfirmsItsHoldsBeforeHandingOutPastTheLease) {
  const std::string c = conf("node-a", R"(, "leaseDurationSeconds": 20)");
  ASSERT_TRUE(add("node-a", "c0", c));
  int calls = http_.calls;
  ASSERT_TRUE(add("node-a", "c1", c));
  EXPECT_EQ(http_.calls, calls) << "confirmed by its claim a moment ago";
  advance(16s);  // past 20 s x (1 - 2e-3) - 5 s
  ASSERT_TRUE(add("node-a", "c2", c));
  EXPECT_GT(http_.calls, calls) << "past the window: confirmed first";
  calls = http_.calls;
  ASSERT_TRUE(add("node-a", "c3", c));
  EXPECT_EQ(http_.calls, calls) << "then cached";
  advance(16s);
  ASSERT_TRUE(etcd_.stopMember(0));
  const auto t0 = std::chrono::steady_clock::now();
  auto refused = add("node-a", "c4", c);
  ASSERT_FALSE(refused) << "handed out " << address(refused) << " from a hold nobody confirmed";
  EXPECT_EQ(refused.error().code, cni::Errc::kTryAgainLater);
  EXPECT_THAT(refused.error().msg, HasSubstr("confirming that node node-a still holds its blocks"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3500ms) << "within timeoutMs";
  ASSERT_TRUE(etcd_.startMember(0));
  ASSERT_TRUE(etcd_.waitHealthy());
  auto ok = add("node-a", "c4", c);
  EXPECT_TRUE(ok) << ok.error().msg;
  auto again = del("node-a", "c1", c);
  EXPECT_TRUE(again) << "DEL needs no confirmation: " << again.error().msg;
}

// I3: a claim gone from the backend (an etcd restore, a hand) is claimed again when free; one
// another node took meanwhile is lost: nothing more is handed out from it.
TEST_F(ClusterSafetyTest, AClaimGoneFromTheBackendIsClaimedAgainOrLost) {
  auto backend = etcdBackend();
  ASSERT_TRUE(add("node-a", "c0"));
  const std::string first = owned("node-a").at(0);
  etcdDelete(backend.claimKey(ClaimKind::kBlock, "ibnet", first));
  auto p = pass("node-a");
  ASSERT_TRUE(p) << p.error().msg;
  EXPECT_EQ(p->upkeep->reclaimedBlocks, std::vector<std::string>{first});
  EXPECT_EQ(etcdBlocks()[first], "node-a");
  etcdDelete(backend.claimKey(ClaimKind::kBlock, "ibnet", first));
  auto stolen = backend.claim(ClaimKind::kBlock, "ibnet", first, "node-b", {});
  ASSERT_TRUE(stolen && stolen->state == ClaimState::kClaimed);
  p = pass("node-a");
  ASSERT_TRUE(p) << p.error().msg;
  EXPECT_EQ(p->upkeep->lostBlocks, std::vector<std::string>{first});
  for (int i = 1; i < 20; ++i) {
    auto r = add("node-a", "c" + std::to_string(i));
    ASSERT_TRUE(r) << r.error().msg;
    EXPECT_FALSE(inBlock(address(r), first)) << address(r) << " from the block node-b holds now";
  }
  ASSERT_TRUE(del("node-a", "c0"));
  ASSERT_TRUE(pass("node-a"));
  for (const auto& e : ledger("node-a").blocks) {
    EXPECT_NE(e.name, first) << "a lost block leaves the ledger once no pod uses it";
  }
}

// I4 with etcd: a node is gone for good when an operator says so (forget-node, refused while its
// liveness lasts); the other nodes' passes then take over its blocks and give them back.
TEST_F(ClusterSafetyTest, AForgottenNodesBlocksAreTakenOverAndGivenBack) {
  const std::string extra = R"(, "releaseAfterSeconds": 0)";
  ASSERT_TRUE(add("node-a", "c0", conf("node-a", extra)));
  ASSERT_TRUE(pass("node-a", conf("node-a", extra)));
  const std::string gone = owned("node-a").at(0);
  auto refused = node("node-b").forgetNode(makeRequest(conf("node-b", extra), "", ""), "node-a");
  ASSERT_FALSE(refused) << "node-a's liveness lasts";
  EXPECT_EQ(refused.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(refused.error().msg, HasSubstr("node \"node-a\" is alive"));
  auto early = pass("node-b", conf("node-b", extra));
  ASSERT_TRUE(early);
  EXPECT_TRUE(early->upkeep->takenOver.empty());
  kill("node-a", "c0");
  lapse("node-a");
  auto lapsedOnly = pass("node-b", conf("node-b", extra));
  ASSERT_TRUE(lapsedOnly);
  EXPECT_TRUE(lapsedOnly->upkeep->takenOver.empty()) << "a lapse alone is no proof the node is gone";
  auto forgot = node("node-b").forgetNode(makeRequest(conf("node-b", extra), "", ""), "node-a");
  ASSERT_TRUE(forgot) << forgot.error().msg;
  auto p = pass("node-b", conf("node-b", extra));
  ASSERT_TRUE(p) << p.error().msg;
  EXPECT_EQ(p->upkeep->takenOver, std::vector<std::string>{gone});
  EXPECT_EQ(p->upkeep->releasedBlocks, std::vector<std::string>{gone});
  EXPECT_FALSE(etcdBlocks().contains(gone)) << "nothing outlives its holder";
}

// I3: a release leaves the ledger only when the backend confirms it. Its answer lost, the block
// stays "releasing": nothing is handed out from it, and the next pass confirms it.
TEST_F(ClusterSafetyTest, AReleaseWhoseAnswerWasLostIsKeptUntilConfirmedAndNeverHandedOutFrom) {
  const std::string c = conf("node-a", R"(, "releaseAfterSeconds": 0)");
  ASSERT_TRUE(add("node-a", "c0", c));
  const std::string block = owned("node-a").at(0);
  ASSERT_TRUE(del("node-a", "c0", c));
  http_.loseIf = "request_delete_range";
  http_.loseAnswers = 1;
  ASSERT_TRUE(pass("node-a", c));
  const auto l = ledger("node-a");
  ASSERT_EQ(l.blocks.size(), 1U);
  EXPECT_EQ(l.blocks[0].state, LedgerEntry::State::kReleasing);
  EXPECT_FALSE(etcdBlocks().contains(block)) << "the release happened in etcd";
  // Another node claims it at once; node-a hands out nothing from it.
  auto backend = etcdBackend();
  ASSERT_TRUE(backend.claim(ClaimKind::kBlock, "ibnet", block, "node-b", {}));
  auto r = add("node-a", "c1", c);
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_FALSE(inBlock(address(r), block)) << address(r);
  ASSERT_TRUE(pass("node-a", c));
  for (const auto& e : ledger("node-a").blocks) {
    EXPECT_NE(e.name, block) << "settled: it is node-b's";
  }
}

// --- Case 3: shared pools ---------------------------------------------------------------------

// Two networks of one pool share the node's store: a CNI GC of one judges only its own.
TEST_F(ClusterSafetyTest, GcOfOneNetworkNeverFreesAnotherNetworksAllocationsInASharedPool) {
  NetSpec n1;
  n1.network = "n1";
  n1.pool = "shared";
  NetSpec n2 = n1;
  n2.network = "n2";
  auto one = add("node-a", "p1", conf("node-a", n1));
  auto two = add("node-a", "p2", conf("node-a", n2));
  ASSERT_TRUE(one && two);
  auto g = gc("node-a", conf("node-a", n1), {"p1"});
  ASSERT_TRUE(g) << g.error().msg;
  auto check = node("node-a").check(makeRequest(conf("node-a", n2), "p2", netns("node-a", "p2"), "", "net1",
                                                cni::Command::kCheck));
  EXPECT_TRUE(check) << "n2's attachment survives n1's GC: " << check.error().msg;
  for (int i = 0; i < 20; ++i) {
    auto r = add("node-a", "q" + std::to_string(i), conf("node-a", n1));
    ASSERT_TRUE(r) << r.error().msg;
    EXPECT_NE(address(r), address(two)) << "n2's pod's address handed out again";
  }
}

// One interface name in two networks of a shared pool (a pod's clashing attachment): the second
// ADD is refused, and the runtime's DEL after it leaves the first network's addresses alone.
TEST_F(ClusterSafetyTest, AClashingInterfaceNameOfAnotherNetworkNeverTakesOrFreesItsAddresses) {
  NetSpec n1;
  n1.network = "n1";
  n1.pool = "shared";
  NetSpec n2 = n1;
  n2.network = "n2";
  auto one = add("node-a", "c1", conf("node-a", n1));
  ASSERT_TRUE(one) << one.error().msg;
  auto clash = add("node-a", "c1", conf("node-a", n2));
  ASSERT_FALSE(clash) << "n2 was given n1's address " << address(clash);
  EXPECT_EQ(clash.error().code, cni::Errc::kIfNameExists);
  EXPECT_THAT(clash.error().msg, HasSubstr("network \"n1\""));
  ASSERT_TRUE(del("node-a", "c1", conf("node-a", n2)));
  auto check = node("node-a").check(makeRequest(conf("node-a", n1), "c1", netns("node-a", "c1"), "", "net1",
                                                cni::Command::kCheck));
  EXPECT_TRUE(check) << "n1's attachment survives n2's DEL: " << check.error().msg;
}

TEST_F(ClusterSafetyTest, NetworksOfOnePoolMustAgreeOnReservationsAndExclude) {
  NetSpec n1;
  n1.network = "n1";
  n1.pool = "shared";
  n1.extraIpam = R"(, "reservations": {"prod/db-0": "10.56.0.200"}, "exclude": ["10.56.0.64/28"])";
  ASSERT_TRUE(add("node-a", "p1", conf("node-a", n1)));
  for (const auto& [extra, field] : std::vector<std::pair<std::string, std::string>>{
           {R"(, "exclude": ["10.56.0.64/28"])", "ipam.reservations"},
           {R"(, "reservations": {"prod/db-0": "10.56.0.200"})", "ipam.exclude"}}) {
    NetSpec n2 = n1;
    n2.network = "n2";
    n2.extraIpam = extra;
    for (const char* n : {"node-a", "node-b"}) {
      auto r = add(n, "p2", conf(n, n2));
      ASSERT_FALSE(r) << n << ": " << field << " differs";
      EXPECT_EQ(r.error().code, cni::Errc::kInvalidConfig);
      EXPECT_THAT(r.error().msg, HasSubstr(field + " of network \"n2\""));
      EXPECT_THAT(r.error().msg, HasSubstr("network n1 on node node-a"));
      EXPECT_THAT(r.error().msg, Not(HasSubstr("give one of the networks another ipam.cluster.pool")));
    }
  }
}

TEST_F(ClusterSafetyTest, PoolsOverOverlappingRangesAreRefusedNamingTheOther) {
  ASSERT_TRUE(add("node-a", "p1"));  // pool "ibnet" over 10.56.0.0/24
  NetSpec other;
  other.network = "n3";  // its own pool, "n3"
  other.ranges = R"([[{"subnet": "10.56.0.128/25"}]])";
  for (const char* n : {"node-a", "node-b"}) {
    auto r = add(n, "p3", conf(n, other));
    ASSERT_FALSE(r) << n;
    EXPECT_EQ(r.error().code, cni::Errc::kInvalidConfig);
    EXPECT_THAT(r.error().msg, HasSubstr("overlaps pool \"ibnet\""));
    EXPECT_THAT(r.error().msg, HasSubstr("10.56.0.130"));
  }
  NetSpec apart = other;
  apart.ranges = R"([[{"subnet": "10.57.0.0/24"}]])";
  apart.network = "n4";
  auto ok = add("node-b", "p4", conf("node-b", apart));
  EXPECT_TRUE(ok) << ok.error().msg;
}

// --- Case 4: configuration changes and corrupt local state ------------------------------------

TEST_F(ClusterSafetyTest, DelAndGcSucceedWhateverTheConfigurationSaysNow) {
  for (const char* cid : {"c0", "c1", "c2"}) {
    ASSERT_TRUE(add("node-a", cid));
  }
  NetSpec wider;
  wider.ranges = R"([[{"subnet": "10.56.0.0/24"}, {"subnet": "10.56.1.0/24"}]])";
  const std::string now = conf("node-a", wider);
  auto d = del("node-a", "c0", now);
  EXPECT_TRUE(d) << d.error().msg;
  auto g = gc("node-a", now, {"c1"});
  EXPECT_TRUE(g) << g.error().msg;
  EXPECT_EQ(countEntries(ledgerDir("node-a") + "/attachments"), 1U) << "c0 and c2 released, c1 kept";
  auto p = pass("node-a", now);
  EXPECT_TRUE(p) << p.error().msg;
  auto r = add("node-a", "c3", now);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(r.error().msg, HasSubstr("ipam.ranges of network \"ibnet\""));
  EXPECT_THAT(r.error().msg, HasSubstr("Changing a pool"));
  EXPECT_THAT(r.error().msg, Not(HasSubstr("widen")));
  EXPECT_THAT(r.error().msg, Not(HasSubstr("another ipam.cluster.pool")));
}

// The documented way to change a pool: drain it, then --redefine. A node that still knows the old
// definition and claims after the change gives its claim back at once, then is told the new one.
TEST_F(ClusterSafetyTest, ADrainedPoolIsRedefinedAndAClaimUnderTheOldDefinitionIsGivenBack) {
  const std::string extra = R"(, "releaseAfterSeconds": 0)";
  NetSpec wider;
  wider.ranges = R"([[{"subnet": "10.56.0.0/24"}, {"subnet": "10.56.1.0/24"}]])";
  wider.extraCluster = extra;
  ASSERT_TRUE(add("node-a", "c0", conf("node-a", extra)));
  ASSERT_TRUE(add("node-c", "c0", conf("node-c", extra)));
  ASSERT_TRUE(del("node-c", "c0", conf("node-c", extra)));
  ASSERT_TRUE(pass("node-c", conf("node-c", extra)));  // node-c holds nothing, but knows the definition
  auto early = node("node-b").redefinePool(makeRequest(conf("node-b", wider), "", ""));
  ASSERT_FALSE(early) << "node-a's pod still holds a block";
  EXPECT_EQ(early.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(early.error().msg, HasSubstr("is not drained: block"));
  EXPECT_THAT(early.error().msg, HasSubstr("(node-a)"));
  ASSERT_TRUE(add("node-a", "c1", conf("node-a", extra))) << "the definition is open again";
  for (const char* cid : {"c0", "c1"}) {
    ASSERT_TRUE(del("node-a", cid, conf("node-a", extra)));
  }
  ASSERT_TRUE(pass("node-a", conf("node-a", extra)));
  ASSERT_TRUE(etcdBlocks().empty());
  auto done = node("node-b").redefinePool(makeRequest(conf("node-b", wider), "", ""));
  ASSERT_TRUE(done) << done.error().msg;
  auto widened = add("node-a", "c2", conf("node-a", wider));
  ASSERT_TRUE(widened) << "node-a learns the new definition: " << widened.error().msg;
  auto stale = add("node-c", "c1", conf("node-c", extra));
  ASSERT_FALSE(stale) << "node-c's claim under the old definition";
  EXPECT_EQ(stale.error().code, cni::Errc::kTryAgainLater) << stale.error().msg;
  EXPECT_THAT(stale.error().msg, HasSubstr("was redefined or retired while this node claimed"));
  std::size_t ofC = 0;
  for (const auto& [k, holder] : etcdBlocks()) {
    ofC += holder == "node-c" ? 1 : 0;
  }
  EXPECT_EQ(ofC, 0U) << "given back at once";
  auto told = add("node-c", "c1", conf("node-c", extra));
  ASSERT_FALSE(told);
  EXPECT_EQ(told.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(told.error().msg, HasSubstr("(redefined)"));
}

// Retiring a drained pool frees its ranges for another pool; a node that still knows the retired
// pool and claims under it gives the claim back at once; a network still naming it defines it anew
// (and is refused while another pool has its ranges).
TEST_F(ClusterSafetyTest, ARetiredPoolsRangesGoToAnotherPoolAndAClaimUnderItIsGivenBack) {
  const std::string extra = R"(, "releaseAfterSeconds": 0)";
  NetSpec other;
  other.network = "n3";  // its own pool, "n3", over ibnet's addresses
  other.ranges = R"([[{"subnet": "10.56.0.128/25"}]])";
  other.extraCluster = extra;
  ASSERT_TRUE(add("node-a", "c0", conf("node-a", extra)));
  ASSERT_TRUE(add("node-c", "c0", conf("node-c", extra)));
  ASSERT_TRUE(del("node-c", "c0", conf("node-c", extra)));
  ASSERT_TRUE(pass("node-c", conf("node-c", extra)));  // node-c holds nothing, but knows the definition
  auto early = node("node-b").retirePool(makeRequest(conf("node-b", extra), "", ""));
  ASSERT_FALSE(early) << "node-a's pod still holds a block";
  EXPECT_EQ(early.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(early.error().msg, HasSubstr("is not drained: block"));
  EXPECT_THAT(early.error().msg, HasSubstr("--retire again"));
  ASSERT_TRUE(add("node-a", "c1", conf("node-a", extra))) << "the definition is open again";
  ASSERT_FALSE(add("node-b", "p3", conf("node-b", other))) << "ibnet still has the addresses";
  for (const char* cid : {"c0", "c1"}) {
    ASSERT_TRUE(del("node-a", cid, conf("node-a", extra)));
  }
  ASSERT_TRUE(pass("node-a", conf("node-a", extra)));
  ASSERT_TRUE(etcdBlocks().empty());
  auto done = node("node-b").retirePool(makeRequest(conf("node-b", extra), "", ""));
  ASSERT_TRUE(done) << done.error().msg;
  auto again = node("node-b").retirePool(makeRequest(conf("node-b", extra), "", ""));
  EXPECT_TRUE(again) << "retiring a retired pool changes nothing: " << again.error().msg;
  auto taken = add("node-b", "p3", conf("node-b", other));
  ASSERT_TRUE(taken) << "n3 may have the retired pool's addresses now: " << taken.error().msg;
  auto stale = add("node-c", "c1", conf("node-c", extra));
  ASSERT_FALSE(stale) << "node-c's claim under the retired definition";
  EXPECT_EQ(stale.error().code, cni::Errc::kTryAgainLater) << stale.error().msg;
  EXPECT_TRUE(etcdBlocks().empty()) << "given back at once";
  auto refused = add("node-c", "c1", conf("node-c", extra));
  ASSERT_FALSE(refused) << "defined anew, ibnet overlaps n3 now";
  EXPECT_EQ(refused.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(refused.error().msg, HasSubstr("overlaps pool \"n3\""));
  EXPECT_TRUE(etcdBlocks().empty());
}

TEST_F(ClusterSafetyTest, ACorruptLedgerIsSetAsideAndRebuiltFromTheBackend) {
  ASSERT_TRUE(add("node-a", "c0"));
  ASSERT_TRUE(add("node-a", "c1"));
  const std::string block = owned("node-a").at(0);
  std::ofstream(ledgerDir("node-a") + "/blocks.json") << "{not json";
  auto d = del("node-a", "c0");
  EXPECT_TRUE(d) << d.error().msg;
  auto r = add("node-a", "c2");
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_EQ(owned("node-a"), std::vector<std::string>{block}) << "adopted again from the backend";
  bool aside = false;
  for (const auto& e : std::filesystem::directory_iterator(ledgerDir("node-a"))) {
    aside = aside || e.path().filename().string().starts_with("blocks.json.corrupt-");
  }
  EXPECT_TRUE(aside) << "the corrupt ledger is kept aside for a look";
}

// A node whose ledger was set aside meets its block again with its first claim and reads the
// definition after it; when its configuration no longer fits the pool, the ADD is refused and the
// block, whose addresses its pods may still use, stays the node's (it is not given back).
TEST_F(ClusterSafetyTest, ABlockMetAgainByARebuiltLedgerIsKeptWhenTheConfigurationNoLongerFits) {
  ASSERT_TRUE(add("node-a", "c0"));
  const std::string block = owned("node-a").at(0);
  std::ofstream(ledgerDir("node-a") + "/blocks.json") << "{not json";
  NetSpec edited;
  edited.extraIpam = R"(, "exclude": ["10.56.0.200/29"])";
  auto r = add("node-a", "c1", conf("node-a", edited));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, cni::Errc::kInvalidConfig) << r.error().msg;
  EXPECT_EQ(etcdBlocks()[block], "node-a") << "c0's block is still node-a's";
  auto fits = add("node-a", "c2");
  ASSERT_TRUE(fits) << fits.error().msg;
  EXPECT_EQ(owned("node-a"), std::vector<std::string>{block}) << "adopted";
}

TEST_F(ClusterSafetyTest, DelFindsTheAttachmentWhereItWasRecordedUnderAnotherPoolName) {
  NetSpec before;
  before.pool = "old-pool";
  ASSERT_TRUE(add("node-a", "c0", conf("node-a", before)));
  NetSpec after;
  after.pool = "new-pool";
  auto d = del("node-a", "c0", conf("node-a", after));
  ASSERT_TRUE(d) << d.error().msg;
  EXPECT_EQ(countEntries(ledgerDir("node-a", "old-pool") + "/attachments"), 0U) << "released where it was recorded";
}

// --- Case 5: capacity -------------------------------------------------------------------------

// Every block held, all empty (their nodes keep them for releaseAfterSeconds): a new node asks, the
// holders' next passes give them back, its retry gets one.
TEST_F(ClusterSafetyTest, EmptyBlocksGoBackOnDemand) {
  for (const char* n : {"node-a", "node-b"}) {
    ASSERT_TRUE(add(n, "c0", conf(n, small())));
    ASSERT_TRUE(del(n, "c0", conf(n, small())));
  }
  auto asked = add("node-c", "c0", conf("node-c", small()));
  ASSERT_FALSE(asked);
  EXPECT_EQ(asked.error().code, cni::Errc::kTryAgainLater) << asked.error().msg;
  for (const char* n : {"node-a", "node-b"}) {
    auto p = pass(n, conf(n, small()));
    ASSERT_TRUE(p) << p.error().msg;
    EXPECT_EQ(p->upkeep->releasedBlocks.size(), 1U) << n << " gave its empty block back on demand";
  }
  auto got = add("node-c", "c0", conf("node-c", small()));
  ASSERT_TRUE(got) << got.error().msg;
}

// Every block held and in use: the holders lend the node that asked an address each; a lent
// address is never handed out by its lender, and goes back when its borrower is done.
TEST_F(ClusterSafetyTest, ANodeBorrowsWhenEveryBlockIsInUseAndALoanIsNeverHandedOutTwice) {
  const std::string extra = R"(, "leaseDurationSeconds": 30, "releaseAfterSeconds": 30)";
  for (const char* n : {"node-a", "node-b"}) {
    ASSERT_TRUE(add(n, "c0", conf(n, small(extra))));
  }
  ASSERT_FALSE(add("node-c", "c0", conf("node-c", small(extra))));
  for (const char* n : {"node-a", "node-b"}) {
    auto p = pass(n, conf(n, small(extra)));
    ASSERT_TRUE(p) << p.error().msg;
    EXPECT_EQ(p->upkeep->lent.size(), 1U) << n << " lends one address";
  }
  auto got = add("node-c", "c0", conf("node-c", small(extra)));
  ASSERT_TRUE(got) << got.error().msg;
  std::map<std::string, int> added{{"node-a", 1}, {"node-b", 1}};
  std::set<std::string> all{address(got)};
  for (const char* n : {"node-a", "node-b"}) {
    for (int i = 1; i < 20; ++i) {
      auto r = add(n, "c" + std::to_string(i), conf(n, small(extra)));
      if (!r) {
        break;
      }
      ++added[n];
      EXPECT_TRUE(all.insert(address(r)).second) << address(r) << " handed out twice (lent to node-c)";
    }
  }
  // Every pod goes; the lenders' blocks are empty of their own pods but still lend.
  for (const auto& [n, count] : added) {
    for (int i = 0; i < count; ++i) {
      ASSERT_TRUE(del(n, "c" + std::to_string(i), conf(n, small(extra))));
    }
    ASSERT_TRUE(pass(n, conf(n, small(extra))));
  }
  ASSERT_TRUE(del("node-c", "c0", conf("node-c", small(extra))));
  advance(40s);  // the demands are over; the loans are older than timeoutMs + their grace
  // Borrowers give back what they do not use, lenders then hand it out again, and a block empty of
  // its node's pods for releaseAfterSeconds goes back in the pass that gets its last loan back.
  std::size_t returned = 0;
  std::size_t released = 0;
  for (int round = 0; round < 2; ++round) {
    for (const char* n : {"node-c", "node-a", "node-b"}) {
      auto p = pass(n, conf(n, small(extra)));
      ASSERT_TRUE(p) << p.error().msg;
      returned += p->upkeep->loansReturned.size();
      released += p->upkeep->releasedBlocks.size();
      const bool lendsNothing = countEntries(ledgerDir(n) + "/attachments") == 0;
      EXPECT_TRUE(!lendsNothing || owned(n).empty()) << n << " lends nothing more and still holds a block";
    }
  }
  EXPECT_GE(returned, 2U) << "node-c's two loans, at least";
  EXPECT_EQ(released, 2U);
  EXPECT_TRUE(etcdClaims(ClaimKind::kAddress).empty()) << "nothing outlives its holder";
  EXPECT_TRUE(etcdBlocks().empty());
}

}  // namespace
}  // namespace ibcni::ipam::testing
