// SPDX-License-Identifier: Apache-2.0
// ibcni-ipam's cluster mode (ipam.cluster) end to end in process: EmbeddedIpam instances standing
// for nodes (each its own data directory and node name) over a real etcd 3.4 started by the test
// (and, for the kubernetes backend, the API emulator over that etcd). The HTTP client is the real
// one, wrapped to count the calls and to lose an answer on purpose.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "block_ledger.h"
#include "etcd_block_backend.h"
#include "fake_store.h"
#include "http/curl_http_client.h"
#include "ibcni/os/text.h"
#include "k8s_block_backend.h"
#include "store_test_util.h"
#include "support/etcd_cluster.h"
#include "support/k8s_emulator.h"

namespace ibcni::ipam::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using nlohmann::json;
using namespace std::chrono_literals;
using Time = std::chrono::system_clock::time_point;
using ::ibcni::testing::EtcdCluster;
using ::ibcni::testing::K8sEmulator;

// The real client, counting every request; `loseAnswers` requests whose body holds `loseIf` are
// sent but their answer is replaced by a timeout (the write happened, the node never learns it).
class TapClient final : public http::HttpClient {
 public:
  http::HttpResult<http::Response> send(const http::Request& r) override {
    ++calls;
    auto res = inner_.send(r);
    if (loseAnswers > 0 && (loseIf.empty() || r.body.find(loseIf) != std::string::npos)) {
      --loseAnswers;
      return std::unexpected(http::HttpError{http::ErrorKind::kTimeout, r.url, "answer lost on purpose", 28, 0});
    }
    return res;
  }
  std::atomic<int> calls{0};
  std::atomic<int> loseAnswers{0};
  std::string loseIf;

 private:
  http::CurlHttpClient inner_;
};

class ClusterPoolTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(etcd_.start(1)); }

  // One simulated node: its own data directory and name, the shared backend config.
  EmbeddedIpam& node(const std::string& name) {
    auto& slot = nodes_[name];
    if (!slot) {
      EmbeddedIpamOptions o;
      o.defaultDataDir = tmp_.path() + "/" + name;
      o.netnsChecker = checker_;
      o.clock = [this] { return now_.load(); };
      o.nodeNameFile = "";
      o.backends = [this](const config::ClusterConf& c,
                          const BackendContext& ctx) -> cni::Result<std::unique_ptr<BlockBackend>> {
        if (c.backend == config::ClusterBackend::kKubernetes) {
          auto ko = KubernetesBlockBackend::optionsFor(c);
          if (!ko) {
            return std::unexpected(ko.error());
          }
          return std::make_unique<KubernetesBlockBackend>(http_, *ko);
        }
        return std::make_unique<EtcdBlockBackend>(http_,
                                                  EtcdBlockBackend::optionsFor(c, ctx.etcdLease, ctx.onLeaseGranted));
      };
      slot = std::make_unique<EmbeddedIpam>(o);
    }
    return *slot;
  }

  // The network config of node `n` ("nodeName" given per node, data dir from the node's default).
  std::string conf(const std::string& n, const std::string& extraCluster = "",
                   const std::string& ranges = R"([[{"subnet": "10.56.0.0/24"}]])", const std::string& name = "ibnet",
                   const std::string& extraIpam = "") {
    return R"({"cniVersion": "1.1.0", "name": ")" + name + R"(", "type": "ibcni", "ipam": {"type": "ibcni-ipam",
        "dataDir": ")" + tmp_.path() + "/" + n + R"(", "ranges": )" + ranges + extraIpam +
           R"(, "cluster": {"backend": "etcd", "blockSize": 16, "nodeName": ")" + n + R"(", "timeoutMs": 2000,
        "etcd": {"endpoints": [")" + etcd_.endpointList() + R"("]})" + extraCluster + "}}}";
  }

  cni::Result<cni::AddResult> add(const std::string& n, const std::string& cid, const std::string& c = "",
                                  const std::string& cniArgs = "") {
    const std::string netns = "/run/netns/" + n + "-" + cid;
    checker_->state[netns] = os::NetnsLiveness::kAlive;
    auto req = makeRequest(c.empty() ? conf(n) : c, cid, netns, cniArgs);
    return node(n).add(req);
  }

  std::string ledgerDir(const std::string& n, const std::string& pool = "ibnet") {
    return tmp_.path() + "/" + n + "/.cluster/" + pool;
  }
  Ledger ledger(const std::string& n, const std::string& pool = "ibnet") {
    auto l = readLedger(ledgerDir(n, pool));
    EXPECT_TRUE(l && *l) << ledgerDir(n, pool);
    return l && *l ? **l : Ledger{};
  }
  // The blocks etcd holds for the pool: key -> node.
  std::map<std::string, std::string> etcdBlocks(const std::string& pool = "ibnet") {
    EtcdBlockBackend::Options o;
    o.endpoints = etcd_.endpoints();
    EtcdBlockBackend b(http_, o);
    auto list = b.list(pool);
    EXPECT_TRUE(list) << list.error().describe();
    std::map<std::string, std::string> out;
    for (const auto& c : list ? *list : std::vector<Claim>{}) {
      out[c.name] = c.holder.node;
    }
    return out;
  }

  EtcdCluster etcd_;
  TempDir tmp_;
  TapClient http_;
  std::shared_ptr<FakeNetnsChecker> checker_ = std::make_shared<FakeNetnsChecker>();
  std::atomic<Time> now_{Time(std::chrono::seconds(1900000000))};
  std::map<std::string, std::unique_ptr<EmbeddedIpam>> nodes_;
};

std::string address(const cni::Result<cni::AddResult>& r) {
  return r && !r->ips.empty() ? r->ips[0].address.address.toString() : "(failed: " + (r ? "" : r.error().msg) + ")";
}

TEST_F(ClusterPoolTest, TwoNodesWithOneConfigGetDistinctAddressesFromTheirOwnAlignedBlocks) {
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
    auto ipv = *net::IpAddress::parse(a);
    bool inOwn = false;
    for (const char* n : {"node-a", "node-b"}) {
      for (const auto& e : ledger(n).blocks) {
        auto base = *net::IpAddress::parse(e.name.substr(0, e.name.rfind('-')));
        inOwn = inOwn || (toInt(ipv) >= toInt(base) && toInt(ipv) < toInt(base) + 16);
      }
    }
    EXPECT_TRUE(inOwn) << a << " lies outside every owned block";
  }
}

TEST_F(ClusterPoolTest, TheHotPathMakesNoBackendCallAndDelNeedsNone) {
  ASSERT_TRUE(add("node-a", "c0"));
  const int afterFirst = http_.calls;
  ASSERT_GT(afterFirst, 0);
  for (int i = 1; i < 10; ++i) {
    ASSERT_TRUE(add("node-a", "c" + std::to_string(i)));
  }
  EXPECT_EQ(http_.calls, afterFirst) << "ADDs inside an owned block call nobody";
  ASSERT_TRUE(etcd_.stopMember(0));
  auto del = node("node-a").del(makeRequest(conf("node-a"), "c3", "/run/netns/node-a-c3", "", "net1",
                                            cni::Command::kDel));
  EXPECT_TRUE(del) << del.error().msg;
  auto again = add("node-a", "c10");
  EXPECT_TRUE(again) << "an ADD that fits the owned block works with the control plane down: " << again.error().msg;
  EXPECT_EQ(http_.calls, afterFirst);
}

TEST_F(ClusterPoolTest, ControlPlaneDownFailsAnAddNeedingABlockWithinTheTimeoutNamingTheEndpoint) {
  for (int i = 0; i < 14; ++i) {  // 10.56.0.x/28 blocks: the first holds 14 or 16 usable addresses
    ASSERT_TRUE(add("node-a", "c" + std::to_string(i)));
  }
  ASSERT_TRUE(etcd_.stopMember(0));
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
  EXPECT_THAT(r.error().msg, HasSubstr(etcd_.endpoint(0)));
  EXPECT_THAT(r.error().msg, HasSubstr("pool \"ibnet\""));
  EXPECT_LT(took, 2000ms + 1500ms) << "bounded by ipam.cluster.timeoutMs (2000)";
  // Nothing half-claimed: no intent was answered, so at most an intent waits for the next call.
  ASSERT_TRUE(etcd_.startMember(0));
  ASSERT_TRUE(etcd_.waitHealthy());
  auto ok = add("node-a", "c20");
  ASSERT_TRUE(ok) << ok.error().msg;
  const Ledger l = ledger("node-a");
  for (const auto& e : l.blocks) {
    EXPECT_EQ(e.state, LedgerEntry::State::kOwned) << e.name;
  }
  EXPECT_EQ(etcdBlocks().size(), l.blocks.size()) << "every block etcd gives node-a is in its ledger";
}

TEST_F(ClusterPoolTest, AClaimWhoseAnswerWasLostIsAdoptedNeverClaimedTwice) {
  ASSERT_TRUE(add("node-a", "c0"));
  // The next block's claim reaches etcd, its answer is lost. (The first block holds 14 to 16
  // addresses, depending on which one was drawn: ADD until the one that needs a block.)
  http_.loseIf = "request_put";
  http_.loseAnswers = 1;
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
  // The next ADD adopts it (one listing), and allocates from it.
  auto next = add("node-a", "c99");
  ASSERT_TRUE(next) << next.error().msg;
  l = ledger("node-a");
  EXPECT_EQ(l.blocks.size(), 2U);
  for (const auto& e : l.blocks) {
    EXPECT_EQ(e.state, LedgerEntry::State::kOwned) << e.name;
  }
  EXPECT_EQ(etcdBlocks().size(), 2U) << "never claimed twice";
}

TEST_F(ClusterPoolTest, ALostLedgerIsRebuiltFromTheBackend) {
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

TEST_F(ClusterPoolTest, AFullPoolReclaimsDeadPodsThenFailsWith108NamingThePoolAndTheBlocks) {
  const std::string small = R"([[{"subnet": "10.56.0.0/27"}]])";  // 2 blocks of 16: 29 usable addresses
  int got = 0;
  for (int i = 0; i < 40; ++i) {
    auto r = add(i % 2 == 0 ? "node-a" : "node-b", "c" + std::to_string(i),
                 conf(i % 2 == 0 ? "node-a" : "node-b", "", small));
    got += r ? 1 : 0;
    if (!r && i % 2 == 0) {
      EXPECT_EQ(r.error().code, kIpamExhausted) << r.error().msg;
      EXPECT_THAT(r.error().msg, HasSubstr("pool \"ibnet\""));
      EXPECT_THAT(r.error().msg, HasSubstr("node node-a holds 1 block(s)"));
      EXPECT_THAT(r.error().msg, HasSubstr("none of the pool's 2 blocks is free"));
    }
  }
  EXPECT_EQ(got, 29) << "both blocks used to the last address, nothing twice";
  // A pod of node-a whose namespace is gone: its address is taken back before failing.
  checker_->state["/run/netns/node-a-c0"] = os::NetnsLiveness::kGone;
  auto r = add("node-a", "c100", conf("node-a", "", small));
  ASSERT_TRUE(r) << r.error().msg;
}

TEST_F(ClusterPoolTest, OnePoolWithTwoShapesIsRefusedNamingBoth) {
  ASSERT_TRUE(add("node-a", "c0"));
  // Another node, another network, the same pool name, other ranges: the backend's definition wins.
  auto r = add("node-b", "c0", conf("node-b", R"(, "pool": "ibnet")", R"([[{"subnet": "10.99.0.0/24"}]])", "other"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(r.error().msg, HasSubstr("network \"other\""));
  EXPECT_THAT(r.error().msg, HasSubstr("network ibnet on node node-a"));
  EXPECT_THAT(r.error().msg, HasSubstr("10.99.0.0/24"));
  EXPECT_THAT(r.error().msg, HasSubstr("10.56.0.0/24"));
  // On one node, a second network naming the pool with another block size: refused locally.
  auto local = add("node-a", "c1", conf("node-a", R"(, "pool": "ibnet", "blockSize": 32)", R"([[{"subnet": "10.56.0.0/24"}]])", "third"));
  ASSERT_FALSE(local);
  EXPECT_EQ(local.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(local.error().msg, HasSubstr("network \"third\""));
  EXPECT_THAT(local.error().msg, HasSubstr("network \"ibnet\""));
  // The same shape under another network name shares the pool (and its blocks).
  auto shared = add("node-a", "c2", conf("node-a", R"(, "pool": "ibnet")", R"([[{"subnet": "10.56.0.0/24"}]])", "alias"));
  ASSERT_TRUE(shared) << shared.error().msg;
  EXPECT_EQ(ledger("node-a").blocks.size(), 1U);
}

TEST_F(ClusterPoolTest, AddressesNamedByPodsAreUniqueAcrossTheCluster) {
  const std::string reserved = R"(, "reservations": {"prod/db-0": "10.56.0.200"})";
  auto c = [&](const std::string& n) { return conf(n, "", R"([[{"subnet": "10.56.0.0/24"}]])", "ibnet", reserved); };
  // The reserved address: the first node to start the pod gets it, a second one (the pod's
  // predecessor was never deleted there) is refused while it is held.
  auto a = add("node-a", "c1", c("node-a"), "K8S_POD_NAMESPACE=prod;K8S_POD_NAME=db-0");
  ASSERT_TRUE(a) << a.error().msg;
  EXPECT_EQ(address(a), "10.56.0.200");
  auto b = add("node-b", "c1", c("node-b"), "K8S_POD_NAMESPACE=prod;K8S_POD_NAME=db-0");
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, cni::Errc::kTryAgainLater);
  EXPECT_THAT(b.error().msg, HasSubstr("held in pool \"ibnet\" by node node-a"));
  // A requested address in a block nobody holds: the node claims that block (and hands out from it).
  auto r = add("node-b", "c2", c("node-b"), "IP=10.56.0.250");
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_EQ(etcdBlocks()["10.56.0.240-28"], "node-b");
  auto r2 = add("node-a", "c2", c("node-a"), "IP=10.56.0.250");
  ASSERT_FALSE(r2);
  EXPECT_EQ(r2.error().code, cni::Errc::kTryAgainLater);
  EXPECT_THAT(r2.error().msg, HasSubstr("which node node-b holds"));
  // A requested address inside a block another node holds and hands out from: refused.
  EXPECT_TRUE(ledger("node-a").blocks.empty()) << "a named address alone claims no block";
  ASSERT_TRUE(add("node-a", "c9", c("node-a")));
  const std::string heldByA = ledger("node-a").blocks.at(0).name;
  const std::string inA = heldByA.substr(0, heldByA.rfind('.') + 1) +
                          std::to_string(std::stoi(heldByA.substr(heldByA.rfind('.') + 1)) + 9);
  auto r3 = add("node-b", "c3", c("node-b"), "IP=" + inA);
  ASSERT_FALSE(r3);
  EXPECT_THAT(r3.error().msg, HasSubstr("which node node-a holds"));
  // DEL gives the claim back on the next pass, not on DEL's path.
  ASSERT_TRUE(node("node-a").del(makeRequest(c("node-a"), "c1", "/run/netns/node-a-c1", "", "net1",
                                             cni::Command::kDel)));
  ASSERT_TRUE(node("node-a").reclaim(makeRequest(c("node-a"), "", ""), false));
  auto again = add("node-b", "c1", c("node-b"), "K8S_POD_NAMESPACE=prod;K8S_POD_NAME=db-0");
  ASSERT_TRUE(again) << again.error().msg;
  EXPECT_EQ(address(again), "10.56.0.200");
}

TEST_F(ClusterPoolTest, ThePassGivesBackBlocksEmptyForReleaseAfterKeepingOne) {
  const std::string c = conf("node-a", R"(, "releaseAfterSeconds": 60)");
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(add("node-a", "c" + std::to_string(i), c));
  }
  ASSERT_EQ(ledger("node-a").blocks.size(), 2U);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(node("node-a").del(makeRequest(c, "c" + std::to_string(i), "/run/netns/node-a-c" + std::to_string(i),
                                               "", "net1", cni::Command::kDel)));
  }
  auto pass = [&] { ASSERT_TRUE(node("node-a").reclaim(makeRequest(c, "", ""), false)); };
  pass();
  EXPECT_EQ(ledger("node-a").blocks.size(), 2U) << "empty now, not yet for 60 s";
  now_ = now_.load() + 59s;
  pass();
  EXPECT_EQ(ledger("node-a").blocks.size(), 2U);
  now_ = now_.load() + 2s;
  pass();
  EXPECT_EQ(ledger("node-a").blocks.size(), 1U) << "one given back, one kept";
  EXPECT_EQ(etcdBlocks().size(), 1U);
  now_ = now_.load() + 3600s;
  pass();
  EXPECT_EQ(ledger("node-a").blocks.size(), 1U) << "a node keeps at least one";
}

TEST_F(ClusterPoolTest, ANodeWhoseBlockWasTakenStopsAllocatingFromItAtItsNextRenewal) {
  ASSERT_TRUE(add("node-a", "c0"));
  const Ledger l = ledger("node-a");
  ASSERT_EQ(l.blocks.size(), 1U);
  // node-a's lease expires (a long partition): etcd drops its keys; node-b claims that very block.
  json revoked;
  {
    http::Request r;
    r.method = http::Method::kPost;
    r.url = etcd_.endpoint(0) + "/v3/lease/revoke";
    r.body = json{{"ID", std::to_string(l.etcdLease)}}.dump();
    auto a = http_.send(r);
    ASSERT_TRUE(a && a->status == 200);
  }
  EtcdBlockBackend::Options o;
  o.endpoints = etcd_.endpoints();
  EtcdBlockBackend b(http_, o);
  auto taken = b.claim("ibnet", l.blocks[0].name, "node-b");
  ASSERT_TRUE(taken && taken->state == ClaimState::kClaimed);
  // The pass notices and stops using it; the next ADD claims a fresh block.
  ASSERT_TRUE(node("node-a").reclaim(makeRequest(conf("node-a"), "", ""), false));
  EXPECT_TRUE(ledger("node-a").blocks.empty());
  auto next = add("node-a", "c1");
  ASSERT_TRUE(next) << next.error().msg;
  const std::string blk = l.blocks[0].name;
  const auto base = toInt(*net::IpAddress::parse(blk.substr(0, blk.rfind('-'))));
  const auto got = toInt(*net::IpAddress::parse(address(next)));
  EXPECT_FALSE(got >= base && got < base + 16) << address(next) << " comes from the block node-b holds now";
}

TEST_F(ClusterPoolTest, ConcurrentNodesNeverHoldOneBlockOrOneAddressTwice) {
  std::vector<std::thread> threads;
  std::mutex mu;
  std::vector<std::string> all;
  std::atomic<int> failed{0};
  for (int n = 0; n < 8; ++n) {
    node("node-" + std::to_string(n));  // built before the threads share the map
  }
  for (int n = 0; n < 8; ++n) {
    threads.emplace_back([&, n] {
      const std::string name = "node-" + std::to_string(n);
      for (int i = 0; i < 12; ++i) {
        const std::string netns = "/run/netns/" + name + "-c" + std::to_string(i);
        auto req = makeRequest(conf(name, "", R"([[{"subnet": "10.56.0.0/22"}]])"), "c" + std::to_string(i), netns);
        auto r = node(name).add(req);
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

TEST_F(ClusterPoolTest, DualStackHasBlocksPerRangeSet) {
  const std::string c = conf("node-a", "", R"([[{"subnet": "10.56.0.0/24"}], [{"subnet": "fd00:56::/120"}]])");
  for (int i = 0; i < 20; ++i) {
    auto r = add("node-a", "c" + std::to_string(i), c);
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

TEST_F(ClusterPoolTest, WithoutLibcurlClusterModeIsError4NamingItAndNodeLocalStillWorks) {
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

TEST_F(ClusterPoolTest, AnUnusableKubeconfigIsError7NamingTheFileAndNothingIsHeld) {
  const std::string missing = tmp_.path() + "/no-such.kubeconfig";
  const std::string bad = tmp_.path() + "/bad.kubeconfig";
  std::ofstream(bad) << "apiVersion: v1\nkind: Config\ncurrent-context: nope\ncontexts: []\n";
  for (const auto& [file, words] : std::vector<std::pair<std::string, std::string>>{{missing, "no-such.kubeconfig"},
                                                                                     {bad, "nope"}}) {
    const std::string c = R"({"cniVersion": "1.1.0", "name": "ibk", "type": "ibcni", "ipam": {"type": "ibcni-ipam",
        "dataDir": ")" + tmp_.path() + R"(/node-a", "ranges": [[{"subnet": "10.58.0.0/24"}]],
        "cluster": {"nodeName": "node-a", "kubernetes": {"kubeconfig": ")" + file + R"("}}}})";
    auto r = add("node-a", "c1", c);
    ASSERT_FALSE(r) << file;
    EXPECT_EQ(r.error().code, cni::Errc::kInvalidConfig) << r.error().msg;
    EXPECT_THAT(r.error().msg, HasSubstr("ipam.cluster.kubernetes.kubeconfig"));
    EXPECT_THAT(r.error().msg, HasSubstr(words));
    EXPECT_EQ(countEntries(tmp_.path() + "/node-a/.cluster/ibk/attachments"), 0U) << "nothing allocated";
  }
}

// The kubernetes backend through its kubeconfig, against the API emulator over the same etcd:
// the default backend works end to end, and a gone node's blocks are taken over only once it is
// certainly gone.
TEST_F(ClusterPoolTest, KubernetesLeasesServeThePoolAndAGoneNodesBlocksAreTakenOver) {
  K8sEmulator k8s;
  const std::string user = "system:serviceaccount:kube-system:ibcni";
  ASSERT_TRUE(k8s.start(etcd_.endpointList(), {{"tok", user}},
                        R"({"rules": [{"user": ")" + user + R"(", "namespace": "kube-system", "resource": "leases",
                              "verbs": ["get", "list", "create", "update", "delete"]},
                             {"user": ")" + user + R"(", "resource": "nodes", "verbs": ["get"]}]})"));
  const std::string kubeconfig = tmp_.path() + "/kubeconfig";
  std::ofstream(kubeconfig) << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " << k8s.url()
                            << "\nusers:\n- name: u\n  user:\n    token: tok\ncontexts:\n- name: x\n  context:\n"
                               "    cluster: c\n    user: u\ncurrent-context: x\n";
  auto kconf = [&](const std::string& n) {
    return R"({"cniVersion": "1.1.0", "name": "ibk", "type": "ibcni", "ipam": {"type": "ibcni-ipam",
        "dataDir": ")" + tmp_.path() + "/" + n + R"(", "ranges": [[{"subnet": "10.58.0.0/27"}]],
        "cluster": {"blockSize": 16, "nodeName": ")" + n + R"(", "leaseDurationSeconds": 10,
                    "kubernetes": {"kubeconfig": ")" + kubeconfig + R"("}}}})";
  };
  http::Request mk;
  mk.method = http::Method::kPost;
  mk.url = k8s.url() + "/_emulator/nodes";
  for (const char* n : {"node-a", "node-b", "node-c"}) {
    mk.body = json{{"name", n}}.dump();
    ASSERT_TRUE(http_.send(mk));
  }
  // node-a and node-b take the pool's two blocks.
  ASSERT_TRUE(add("node-a", "c0", kconf("node-a")));
  ASSERT_TRUE(add("node-b", "c0", kconf("node-b")));
  // node-c finds none free; node-a is alive (Node present): refused with 108.
  auto refused = add("node-c", "c0", kconf("node-c"));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, kIpamExhausted) << refused.error().msg;
  // node-a is removed from the cluster; its Lease is still fresh: still refused.
  http::Request rm;
  rm.method = http::Method::kDelete;
  rm.url = k8s.url() + "/_emulator/nodes/node-a";
  ASSERT_TRUE(http_.send(rm));
  auto fresh = add("node-c", "c1", kconf("node-c"));
  ASSERT_FALSE(fresh) << "the Lease was renewed less than leaseDurationSeconds ago";
  // Past leaseDurationSeconds without renewal: taken over by exactly one node.
  std::this_thread::sleep_for(11s);
  auto taken = add("node-c", "c2", kconf("node-c"));
  ASSERT_TRUE(taken) << taken.error().msg;
  EXPECT_EQ(ledger("node-c", "ibk").blocks.size(), 1U);
  // node-b still holds its block (its Node is there).
  EXPECT_EQ(ledger("node-b", "ibk").blocks.size(), 1U);
  auto validation = [&] {
    http::Request v;
    v.url = k8s.url() + "/_emulator/validation";
    auto a = http_.send(v);
    return a ? json::parse(a->body, nullptr, false) : json();
  }();
  ASSERT_TRUE(validation.is_object());
  EXPECT_GT(validation.value("total", 0), 0);
  EXPECT_EQ(validation.value("invalid", -1), 0) << "every body ibcni-ipam sent is a valid Kubernetes object";
}

}  // namespace
}  // namespace ibcni::ipam::testing
