// SPDX-License-Identifier: Apache-2.0
// ibcni-ipam's cluster mode (ipam.cluster) end to end in process (cluster_fixture.h): distinct
// addresses across nodes from their own aligned blocks, no backend call on the hot path, lost
// answers adopted, ledgers rebuilt, a full pool, pool shapes, pod-named addresses, empty blocks
// given back, dual stack, the node's name, a missing libcurl or kubeconfig. The kubernetes backend
// end to end is cluster_k8s_test.cpp; the faults of ipam/README.md "Cluster safety" are
// cluster_safety_test.cpp.
#include "cluster_fixture.h"
#include "ibcni/os/file_io.h"
#include "ipam/config/node_name.h"

namespace ibcni::ipam::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;
using namespace std::chrono_literals;

// Every case runs on both stores but those that need etcd itself (lost HTTP answers, libcurl, a
// kubeconfig).
using ClusterPoolTest = ClusterStoreFixture;

INSTANTIATE_TEST_SUITE_P(Stores, ClusterPoolTest, ::testing::Values(Store::kEtcd, Store::kMemory), storeName);

TEST_P(ClusterPoolTest, TwoNodesWithOneConfigGetDistinctAddressesFromTheirOwnAlignedBlocks) {
  std::set<std::string> seen;
  for (int i = 0; i < 20; ++i) {
    for (const char* n : {"node-a", "node-b"}) {
      auto r = add(n, "c" + std::to_string(i));
      ASSERT_TRUE(r) << r.error().msg;
      EXPECT_TRUE(seen.insert(address(r)).second) << address(r) << " handed out twice";
    }
  }
  const auto blocks = etcdBlocks();
  for (const char* n : {"node-a", "node-b"}) {
    const Ledger l = ledger(n);
    EXPECT_EQ(l.blocks.size(), 2U) << n << ": 20 addresses take two blocks of 16 (gateway/network excepted at most)";
    for (const auto& e : l.blocks) {
      EXPECT_EQ(e.state, LedgerEntry::State::kOwned);
      ASSERT_TRUE(blocks.contains(e.name)) << e.name;
      EXPECT_EQ(blocks.at(e.name), n) << "etcd and the node agree on the holder of " << e.name;
      auto dash = e.name.rfind('-');
      EXPECT_EQ(e.name.substr(dash), "-28");
      EXPECT_EQ(std::stoi(e.name.substr(e.name.rfind('.') + 1, dash)) % 16, 0) << "aligned: " << e.name;
    }
  }
  for (const auto& a : seen) {
    bool inOwn = false;
    for (const char* n : {"node-a", "node-b"}) {
      for (const auto& e : ledger(n).blocks) {
        inOwn = inOwn || inBlock(a, e.name);
      }
    }
    EXPECT_TRUE(inOwn) << a << " lies outside every owned block";
  }
}

TEST_P(ClusterPoolTest, TheHotPathMakesNoBackendCallAndDelNeedsNone) {
  ASSERT_TRUE(add("node-a", "c0"));
  const int afterFirst = backendCalls();
  ASSERT_GT(afterFirst, 0);
  for (int i = 1; i < 10; ++i) {
    ASSERT_TRUE(add("node-a", "c" + std::to_string(i)));
  }
  EXPECT_EQ(backendCalls(), afterFirst) << "ADDs inside an owned block, confirmed within the lease, call nobody";
  ASSERT_TRUE(stopBackend());
  auto gone = del("node-a", "c3");
  EXPECT_TRUE(gone) << gone.error().msg;
  auto again = add("node-a", "c10");
  EXPECT_TRUE(again) << "an ADD that fits the owned block works with the control plane down: " << again.error().msg;
  EXPECT_EQ(backendCalls(), afterFirst);
}

TEST_P(ClusterPoolTest, ControlPlaneDownFailsAnAddNeedingABlockWithinTheTimeoutNamingTheEndpoint) {
  for (int i = 0; i < 14; ++i) {  // 10.56.0.x/28 blocks: the first holds 14 or 16 usable addresses
    ASSERT_TRUE(add("node-a", "c" + std::to_string(i)));
  }
  ASSERT_TRUE(stopBackend());
  auto start = std::chrono::steady_clock::now();
  cni::Result<cni::AddResult> r;
  for (int i = 14; i < 20; ++i) {
    r = add("node-a", "c" + std::to_string(i));
    if (!r) {
      break;
    }
  }
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r) << "a full block and no etcd: the ADD needing a block must fail";
  EXPECT_EQ(r.error().code, cni::Errc::kTryAgainLater) << r.error().msg;
  EXPECT_THAT(r.error().msg, HasSubstr(backendEndpoint()));
  EXPECT_THAT(r.error().msg, HasSubstr("pool \"ibnet\""));
  EXPECT_LT(took, 2000ms + 1500ms) << "bounded by ipam.cluster.timeoutMs (2000)";
  ASSERT_TRUE(startBackend());
  auto ok = add("node-a", "c20");
  ASSERT_TRUE(ok) << ok.error().msg;
  const Ledger l = ledger("node-a");
  for (const auto& e : l.blocks) {
    EXPECT_EQ(e.state, LedgerEntry::State::kOwned) << e.name;
  }
  EXPECT_EQ(etcdBlocks().size(), l.blocks.size()) << "every block etcd gives node-a is in its ledger";
}

TEST_P(ClusterPoolTest, AClaimWhoseAnswerWasLostIsAdoptedNeverClaimedTwice) {
  ASSERT_TRUE(add("node-a", "c0"));
  // The next block's claim reaches etcd, its answer is lost. (The first block holds 14 to 16
  // addresses, depending on which one was drawn: ADD until the one that needs a block.)
  http_.loseIf = "request_put";
  http_.loseAnswers = 1;
  world_->loseAnswers = 1;
  cni::Result<cni::AddResult> lost;
  for (int i = 1; i < 40 && (lost = add("node-a", "c" + std::to_string(i))); ++i) {
  }
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().code, cni::Errc::kTryAgainLater);
  Ledger l = ledger("node-a");
  const auto intent = std::find_if(l.blocks.begin(), l.blocks.end(),
                                   [](const auto& e) { return e.state == LedgerEntry::State::kIntent; });
  ASSERT_NE(intent, l.blocks.end()) << "the intent was written before the claim";
  const std::string pending = intent->name;
  EXPECT_EQ(etcdBlocks().at(pending), "node-a") << "etcd has it";
  auto next = add("node-a", "c99");
  ASSERT_TRUE(next) << next.error().msg;
  l = ledger("node-a");
  EXPECT_EQ(l.blocks.size(), 2U);
  for (const auto& e : l.blocks) {
    EXPECT_EQ(e.state, LedgerEntry::State::kOwned) << e.name;
  }
  EXPECT_EQ(etcdBlocks().size(), 2U) << "never claimed twice";
}

// No request of an ADD grows with the number of nodes: fresh nodes claim a pool's last free blocks
// among themselves, one key at a time (a claim lost to another node: the next block, in each node's
// own order), without listing the pool; only a node that finds no block left lists it (then asks).
TEST_P(ClusterPoolTest, FreshNodesClaimTheLastBlocksWithoutListingThePool) {
  NetSpec four;
  four.ranges = R"([[{"subnet": "10.56.0.0/26"}]])";  // 4 blocks of 16
  std::set<std::string> blocks;
  for (const char* n : {"node-0", "node-1", "node-2", "node-3"}) {
    auto r = add(n, "c0", conf(n, four));
    ASSERT_TRUE(r) << n << ": " << r.error().msg;
    ASSERT_EQ(owned(n).size(), 1U) << n;
    blocks.insert(owned(n).front());
  }
  EXPECT_EQ(blocks.size(), 4U) << "each node a block of its own";
  EXPECT_EQ(rangeReads(), 0) << "no list of the pool (nor of the nodes) on an ADD's path";
  auto full = add("node-4", "c0", conf("node-4", four));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, cni::Errc::kTryAgainLater) << full.error().msg;
  EXPECT_GT(rangeReads(), 0) << "no block left: the pool listed once, then its holders asked for room";
}

// A reboot wipes the default data directory (tmpfs) with the pool's store and ledger. The pool index
// kept the pool: the node agent gives its directory back with network.json (restorePoolsFromIndex,
// done by hand here), and the pass over it adopts the node's block from the backend and gives it back
// once idle, without waiting for the pool's next ADD.
TEST_P(ClusterPoolTest, AfterAWipeThePoolIndexLetsThePassGiveTheIdleBlockBack) {
  EmbeddedIpamOptions o = nodeOptions("w");
  o.poolIndexDir = tmp_.path() + "/index-w";
  nodes_["w"] = std::make_unique<EmbeddedIpam>(o);
  const std::string c = conf("w", R"(, "releaseAfterSeconds": 0)");
  ASSERT_TRUE(add("w", "c1", c));
  ASSERT_TRUE(del("w", "c1", c));
  EXPECT_EQ(etcdBlocks().size(), 1U) << "DEL gives no block back; the agent's pass does";
  const auto index = readPoolIndex(o.poolIndexDir);
  ASSERT_EQ(index.size(), 1U);
  EXPECT_EQ(index[0].kind, "address");
  EXPECT_EQ(index[0].storeDir, ledgerDir("w"));
  EXPECT_EQ(index[0].fileName, kNetworkFileName);
  EXPECT_EQ(json::parse(index[0].text)["name"], "ibnet");

  fs::remove_all(tmp_.path() + "/w");  // the reboot
  fs::create_directories(index[0].storeDir);
  ASSERT_TRUE(os::writeFileAtomic(index[0].storeDir + "/" + index[0].fileName, index[0].text));
  for (int i = 0; i < 2 && !etcdBlocks().empty(); ++i) {
    auto p = pass("w", c);
    ASSERT_TRUE(p) << p.error().msg;
    advance(1s);
  }
  EXPECT_TRUE(etcdBlocks().empty()) << "the adopted block, idle, went back";

  // An ADD whose pool file is as it was does not touch the index; the agent's pass keeps it.
  fs::remove_all(o.poolIndexDir);
  ASSERT_TRUE(add("w", "c2", c));
  EXPECT_TRUE(readPoolIndex(o.poolIndexDir).empty()) << "not on the ADD's path";
  ASSERT_TRUE(del("w", "c2", c));
  ASSERT_TRUE(pass("w", c));
  EXPECT_EQ(readPoolIndex(o.poolIndexDir).size(), 1U) << "the pass indexes the pool";
}

TEST_P(ClusterPoolTest, ALostLedgerIsRebuiltFromTheBackend) {
  ASSERT_TRUE(add("node-a", "c0"));
  const auto before = ledger("node-a").blocks;
  fs::remove(ledgerDir("node-a") + "/blocks.json");
  nodes_.clear();
  for (int i = 1; i < 20; ++i) {
    ASSERT_TRUE(add("node-a", "c" + std::to_string(i)));
  }
  const auto after = ledger("node-a").blocks;
  ASSERT_EQ(after.size(), 2U);
  EXPECT_TRUE(std::any_of(after.begin(), after.end(), [&](const auto& e) { return e.name == before[0].name; }))
      << "the block etcd gives node-a was adopted, not lost";
  EXPECT_EQ(etcdBlocks().size(), 2U);
}

// A node deleted, forgotten (forget-node) and back under its name with a wiped data directory
// meets its old block again with its first claim: the claim finds the block its own, but nothing in
// the backend says the node is alive (forget-node removed its registration, its liveness lapsed).
// It confirms the adopted block (one renewal) before it hands out from it, so no other node takes
// the block over meanwhile and gives its addresses out again (I1).
TEST_P(ClusterPoolTest, ANodeBackAfterItWasForgottenConfirmsTheBlockItAdoptsBeforeHandingOutFromIt) {
  const std::string a = conf("node-a", R"(, "releaseAfterSeconds": 0)");
  const std::string b = conf("node-b", R"(, "releaseAfterSeconds": 0)");
  ASSERT_TRUE(add("node-a", "c0", a));
  ASSERT_TRUE(pass("node-a", a));
  const std::string block = owned("node-a").at(0);
  kill("node-a", "c0");
  if (memory_) {
    advance(world_->ttl + 1s);
  } else {
    lapse("node-a");
  }
  auto forgot = node("node-b").forgetNode(makeRequest(b, "", ""), "node-a");
  ASSERT_TRUE(forgot) << forgot.error().msg;
  nodes_.erase("node-a");
  fs::remove_all(tmp_.path() + "/node-a");  // back with a wiped data directory

  auto back = add("node-a", "c1", a);
  ASSERT_TRUE(back) << back.error().msg;
  ASSERT_EQ(owned("node-a"), std::vector<std::string>{block}) << "its first claim meets its old block";
  auto p = pass("node-b", b);
  ASSERT_TRUE(p) << p.error().msg;
  EXPECT_TRUE(p->upkeep->takenOver.empty()) << "node-a confirmed the block it hands out from";
  EXPECT_EQ(etcdBlocks()[block], "node-a");
  for (int i = 0; i < 20; ++i) {
    auto r = add("node-b", "c" + std::to_string(i), b);
    ASSERT_TRUE(r) << r.error().msg;
    EXPECT_NE(address(r), address(back)) << "one address, two pods";
  }
}

// A full pool: a node that finds no room asks the holders (11) and gets what they can lend, to
// the last address; asked in vain for a whole lease, it says the pool is full (108); a dead pod's
// address is taken back before either.
TEST_P(ClusterPoolTest, AFullPoolLendsToItsLastAddressThenFailsWith108AndReclaimsDeadPodsFirst) {
  NetSpec small;
  small.ranges = R"([[{"subnet": "10.56.0.0/27"}]])";  // 2 blocks of 16: 29 usable addresses
  std::set<std::string> seen;
  bool asked = false;
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 16; ++i) {
      for (const char* n : {"node-a", "node-b"}) {
        auto r = add(n, "r" + std::to_string(round) + "-" + std::to_string(i), conf(n, small));
        if (r) {
          EXPECT_TRUE(seen.insert(address(r)).second) << address(r) << " twice";
        } else if (!asked) {
          asked = true;
          EXPECT_EQ(r.error().code, cni::Errc::kTryAgainLater) << r.error().msg;
          EXPECT_THAT(r.error().msg, HasSubstr("asked to give back empty ones or lend addresses"));
          EXPECT_THAT(r.error().msg, HasSubstr("holds 1 block(s)"));
        }
      }
    }
    for (const char* n : {"node-a", "node-b"}) {
      ASSERT_TRUE(pass(n, conf(n, small)));
    }
  }
  EXPECT_EQ(seen.size(), 29U) << "every address of the pool handed out, once";
  auto stillAsking = add("node-a", "x1", conf("node-a", small));
  ASSERT_FALSE(stillAsking);
  EXPECT_EQ(stillAsking.error().code, cni::Errc::kTryAgainLater) << "asked less than a lease ago";
  advance(200s);
  ASSERT_FALSE(add("node-a", "x1", conf("node-a", small)));
  advance(200s);
  auto full = add("node-a", "x1", conf("node-a", small));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, kIpamExhausted) << full.error().msg;
  EXPECT_THAT(full.error().msg, HasSubstr("the pool is full"));
  EXPECT_THAT(full.error().msg, HasSubstr("none of the pool's 2 blocks is free"));
  EXPECT_THAT(full.error().msg, Not(HasSubstr("widen the range")));
  kill("node-a", "r0-0");
  auto r = add("node-a", "x2", conf("node-a", small));
  ASSERT_TRUE(r) << r.error().msg;
}

TEST_P(ClusterPoolTest, OnePoolWithTwoShapesIsRefusedNamingBothNetworksAndTheField) {
  ASSERT_TRUE(add("node-a", "c0"));
  // Another node, another network, the same pool name, other ranges: the backend's definition wins.
  NetSpec other;
  other.network = "other";
  other.pool = "ibnet";
  other.ranges = R"([[{"subnet": "10.99.0.0/24"}]])";
  auto r = add("node-b", "c0", conf("node-b", other));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(r.error().msg, HasSubstr("ipam.ranges of network \"other\""));
  EXPECT_THAT(r.error().msg, HasSubstr("network ibnet on node node-a"));
  EXPECT_THAT(r.error().msg, HasSubstr("10.99.0.0/24"));
  EXPECT_THAT(r.error().msg, HasSubstr("10.56.0.0/24"));
  // On one node, a second network naming the pool with another block size: refused locally.
  NetSpec third;
  third.network = "third";
  third.pool = "ibnet";
  third.blockSize = 32;
  auto local = add("node-a", "c1", conf("node-a", third));
  ASSERT_FALSE(local);
  EXPECT_EQ(local.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(local.error().msg, HasSubstr("ipam.cluster.blockSize of network \"third\""));
  EXPECT_THAT(local.error().msg, HasSubstr("network ibnet on node node-a"));
  // The same shape under another network name shares the pool (and its blocks).
  NetSpec alias;
  alias.network = "alias";
  alias.pool = "ibnet";
  auto shared = add("node-a", "c2", conf("node-a", alias));
  ASSERT_TRUE(shared) << shared.error().msg;
  EXPECT_EQ(ledger("node-a").blocks.size(), 1U);
}

TEST_P(ClusterPoolTest, AddressesNamedByPodsAreUniqueAcrossTheCluster) {
  NetSpec s;
  s.extraIpam = R"(, "reservations": {"prod/db-0": "10.56.0.200"})";
  auto c = [&](const std::string& n) { return conf(n, s); };
  auto a = add("node-a", "c1", c("node-a"), "K8S_POD_NAMESPACE=prod;K8S_POD_NAME=db-0");
  ASSERT_TRUE(a) << a.error().msg;
  EXPECT_EQ(address(a), "10.56.0.200");
  auto b = add("node-b", "c1", c("node-b"), "K8S_POD_NAMESPACE=prod;K8S_POD_NAME=db-0");
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, cni::Errc::kTryAgainLater);
  EXPECT_THAT(b.error().msg, HasSubstr("held in pool \"ibnet\" by node node-a for pod prod/db-0"));
  // A requested address in a block nobody holds: the node claims that block (and hands out from it).
  auto r = add("node-b", "c2", c("node-b"), "IP=10.56.0.250");
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_EQ(etcdBlocks()["10.56.0.240-28"], "node-b");
  auto r2 = add("node-a", "c2", c("node-a"), "IP=10.56.0.250");
  ASSERT_FALSE(r2);
  EXPECT_EQ(r2.error().code, cni::Errc::kTryAgainLater);
  EXPECT_THAT(r2.error().msg, HasSubstr("which node node-b holds"));
  EXPECT_TRUE(ledger("node-a").blocks.empty()) << "a named address alone claims no block";
  ASSERT_TRUE(add("node-a", "c9", c("node-a")));
  const std::string heldByA = ledger("node-a").blocks.at(0).name;
  const std::string inA = heldByA.substr(0, heldByA.rfind('.') + 1) +
                          std::to_string(std::stoi(heldByA.substr(heldByA.rfind('.') + 1)) + 9);
  auto r3 = add("node-b", "c3", c("node-b"), "IP=" + inA);
  ASSERT_FALSE(r3);
  EXPECT_THAT(r3.error().msg, HasSubstr("which node node-a holds"));
  // DEL gives the claim back on the next pass, not on DEL's path.
  ASSERT_TRUE(del("node-a", "c1", c("node-a")));
  EXPECT_EQ(etcdClaims(ClaimKind::kAddress).size(), 1U);
  ASSERT_TRUE(pass("node-a", c("node-a")));
  EXPECT_TRUE(etcdClaims(ClaimKind::kAddress).empty());
  auto again = add("node-b", "c1", c("node-b"), "K8S_POD_NAMESPACE=prod;K8S_POD_NAME=db-0");
  ASSERT_TRUE(again) << again.error().msg;
  EXPECT_EQ(address(again), "10.56.0.200");
}

// I7: a node without pods keeps no block longer than releaseAfterSeconds, unless minBlocksPerNode
// says so.
TEST_P(ClusterPoolTest, ThePassGivesBackEveryEmptyBlockAfterReleaseAfterKeepingMinBlocksPerNode) {
  for (const auto& [keep, extra] : std::vector<std::pair<std::size_t, std::string>>{
           {0, R"(, "releaseAfterSeconds": 60)"}, {1, R"(, "releaseAfterSeconds": 60, "minBlocksPerNode": 1)"}}) {
    const std::string n = "node-" + std::to_string(keep);
    const std::string c = conf(n, extra);
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(add(n, "c" + std::to_string(i), c));
    }
    ASSERT_EQ(owned(n).size(), 2U);
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(del(n, "c" + std::to_string(i), c));
    }
    ASSERT_TRUE(pass(n, c));
    EXPECT_EQ(owned(n).size(), 2U) << "empty now, not yet for 60 s";
    advance(59s);
    ASSERT_TRUE(pass(n, c));
    EXPECT_EQ(owned(n).size(), 2U);
    advance(2s);
    auto p = pass(n, c);
    ASSERT_TRUE(p) << p.error().msg;
    EXPECT_EQ(owned(n).size(), keep) << "minBlocksPerNode " << keep;
    EXPECT_EQ(p->upkeep->releasedBlocks.size(), 2U - keep);
    std::size_t inEtcd = 0;
    for (const auto& [k, holder] : etcdBlocks()) {
      inEtcd += holder == n ? 1 : 0;
    }
    EXPECT_EQ(inEtcd, keep) << "given back in the backend too";
  }
}

TEST_P(ClusterPoolTest, ConcurrentNodesNeverHoldOneBlockOrOneAddressTwice) {
  std::vector<std::thread> threads;
  std::mutex mu;
  std::vector<std::string> all;
  std::atomic<int> failed{0};
  NetSpec s;
  s.ranges = R"([[{"subnet": "10.56.0.0/22"}]])";
  for (int n = 0; n < 8; ++n) {
    node("node-" + std::to_string(n));  // built before the threads share the map
  }
  for (int n = 0; n < 8; ++n) {
    threads.emplace_back([&, n] {
      const std::string name = "node-" + std::to_string(n);
      for (int i = 0; i < 12; ++i) {
        const std::string cid = "c" + std::to_string(i);
        {
          std::lock_guard g(mu);
          checker_->state[netns(name, cid)] = os::NetnsLiveness::kAlive;
        }
        auto r = node(name).add(makeRequest(conf(name, s), cid, netns(name, cid)));
        std::lock_guard g(mu);
        if (!r) {
          ++failed;
          ADD_FAILURE() << name << ": " << r.error().msg;
          continue;
        }
        all.push_back(address(r));
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(failed, 0);
  std::set<std::string> unique(all.begin(), all.end());
  EXPECT_EQ(unique.size(), all.size()) << "an address was handed out twice";
  std::map<std::string, std::string> holder;
  for (int n = 0; n < 8; ++n) {
    const std::string name = "node-" + std::to_string(n);
    for (const auto& e : ledger(name, "ibnet").blocks) {
      EXPECT_TRUE(holder.emplace(e.name, name).second) << e.name << " held by " << holder[e.name] << " and " << name;
    }
  }
  EXPECT_EQ(etcdBlocks(), holder);
}

TEST_P(ClusterPoolTest, DualStackHasBlocksPerRangeSet) {
  NetSpec s;
  s.ranges = R"([[{"subnet": "10.56.0.0/24"}], [{"subnet": "fd00:56::/120"}]])";
  for (int i = 0; i < 20; ++i) {
    auto r = add("node-a", "c" + std::to_string(i), conf("node-a", s));
    ASSERT_TRUE(r) << r.error().msg;
    ASSERT_EQ(r->ips.size(), 2U);
    EXPECT_TRUE(r->ips[0].address.address.isV4());
    EXPECT_FALSE(r->ips[1].address.address.isV4());
  }
  std::map<std::size_t, int> perSet;
  for (const auto& e : ledger("node-a").blocks) {
    ++perSet[e.set];
    EXPECT_EQ(e.name.find(':') != std::string::npos, e.set == 1) << e.name;
  }
  EXPECT_EQ(perSet[0], 2) << "20 IPv4 addresses: two blocks of 16";
  EXPECT_EQ(perSet[1], 2) << "20 IPv6 addresses: two blocks of 16";
}

TEST(ClusterNodeName, ConfigThenTheInstallersFileThenTheHostName) {
  TempDir tmp;
  config::ClusterConf c;
  const std::string file = tmp.path() + "/node-name";
  c.nodeName = "from-config";
  std::ofstream(file) << "  gpu-node-7.dc1 \n";
  auto a = clusterNodeIdentity(c, file);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->name, "from-config");
  c.nodeName.clear();
  auto b = clusterNodeIdentity(c, file);
  ASSERT_TRUE(b) << b.error().msg;
  EXPECT_EQ(b->name, "gpu-node-7.dc1");
  std::ofstream(file) << "Not_A_Node\n";
  auto bad = clusterNodeIdentity(c, file);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(bad.error().msg, HasSubstr("Not_A_Node"));
  EXPECT_THAT(bad.error().msg, HasSubstr("ipam.cluster.nodeName"));
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  std::string lower = host;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
  auto h = clusterNodeIdentity(c, tmp.path() + "/absent");
  if (h) {
    EXPECT_EQ(h->name, lower);
  } else {
    EXPECT_THAT(h.error().msg, HasSubstr("host name")) << "a host name that is no node name is refused, naming it";
  }
}

TEST_P(ClusterPoolTest, WithoutLibcurlClusterModeIsError4NamingItAndNodeLocalStillWorks) {
  if (memory_) {
    GTEST_SKIP() << "etcd only: libcurl is etcd's and Kubernetes' transport";
  }
  http::CurlHttpClient missing("libcurl-not-installed.so.4");
  EmbeddedIpamOptions o;
  o.defaultDataDir = tmp_.path() + "/bare";
  o.netnsChecker = checker_;
  o.nodeNameFile = "";
  o.backends = [&](const config::ClusterConf& c,
                   const BackendContext& ctx) -> cni::Result<std::unique_ptr<BlockBackend>> {
    return std::make_unique<EtcdBlockBackend>(missing, EtcdBlockBackend::optionsFor(c, ctx.etcdLease, ctx.onLeaseGranted));
  };
  EmbeddedIpam bare(o);
  checker_->state["/run/netns/x"] = os::NetnsLiveness::kAlive;
  auto r = bare.add(makeRequest(conf("bare"), "c1", "/run/netns/x"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, cni::Errc::kInvalidEnvironment) << r.error().msg;
  EXPECT_THAT(r.error().msg + r.error().details, HasSubstr("libcurl"));
  auto local = bare.add(makeRequest(netConfig(tmp_.path() + "/bare", R"("ranges": [[{"subnet": "10.9.0.0/24"}]])"),
                                    "c1", "/run/netns/x"));
  EXPECT_TRUE(local) << "a node-local network never loads libcurl: " << local.error().msg;
}

TEST_P(ClusterPoolTest, AnUnusableKubeconfigIsError7NamingTheFileAndNothingIsHeld) {
  if (memory_) {
    GTEST_SKIP() << "etcd only: the kubeconfig is read by the production backends' factory";
  }
  const std::string missing = tmp_.path() + "/no-such.kubeconfig";
  const std::string bad = tmp_.path() + "/bad.kubeconfig";
  std::ofstream(bad) << "apiVersion: v1\nkind: Config\ncurrent-context: nope\ncontexts: []\n";
  for (const auto& [file, words] : std::vector<std::pair<std::string, std::string>>{{missing, "no-such.kubeconfig"},
                                                                                     {bad, "nope"}}) {
    NetSpec s;
    s.network = "ibk";
    s.kubeconfig = file;
    auto r = add("node-a", "c1", conf("node-a", s));
    ASSERT_FALSE(r) << file;
    EXPECT_EQ(r.error().code, cni::Errc::kInvalidConfig) << r.error().msg;
    EXPECT_THAT(r.error().msg, HasSubstr("ipam.cluster.kubernetes.kubeconfig"));
    EXPECT_THAT(r.error().msg, HasSubstr(words));
    EXPECT_EQ(countEntries(tmp_.path() + "/node-a/.cluster/ibk/attachments"), 0U) << "nothing allocated";
  }
}

}  // namespace
}  // namespace ibcni::ipam::testing
