// SPDX-License-Identifier: Apache-2.0
// KubernetesBlockBackend against the Kubernetes API emulator (tests/support/k8s-emulator) over a
// real etcd 3.4 (label etcd), through CurlHttpClient: create-if-absent claims, adoption, 20
// concurrent claimers of one block, lists by label, conditional release, renewal (a lost block, a
// re-established one), the pool's definition, taking over a gone node's block (refused unless its
// Node is absent AND its Lease expired; of two racing takers one wins), 401 and 403, the
// emulator's faults (500, garbage, a dropped connection, an answer later than the timeout). After
// every test the emulator's validation log must show that every body sent was a valid object of
// the Kubernetes OpenAPI schema.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "block_backend_print.h"
#include "http/curl_http_client.h"
#include "k8s_block_backend.h"
#include "support/etcd_cluster.h"
#include "support/k8s_emulator.h"

namespace ibcni::ipam {
namespace {

using nlohmann::json;
using testing::EtcdCluster;
using testing::K8sEmulator;
using namespace std::chrono_literals;

constexpr const char* kLeases = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";

const json kRbac = {{"rules",
                     {{{"user", "ibcni"},
                       {"namespace", "kube-system"},
                       {"resource", "leases"},
                       {"verbs", {"get", "list", "create", "update", "delete"}}},
                      {{"user", "ibcni"}, {"resource", "nodes"}, {"verbs", {"get"}}},
                      {{"user", "reader"},
                       {"namespace", "kube-system"},
                       {"resource", "leases"},
                       {"verbs", {"get", "list"}}}}}};

class K8sBlockBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.start(1));
    ASSERT_TRUE(k8s_.start(etcd_.endpointList(), {{"good-token", "ibcni"}, {"reader-token", "reader"}}, kRbac.dump()));
  }

  // Every body the backend sent, valid against the OpenAPI schema (and kube-apiserver's rules).
  void TearDown() override {
    if (k8s_.url().empty()) {
      return;
    }
    const json v = admin(http::Method::kGet, "/_emulator/validation");
    ASSERT_TRUE(v.is_object()) << v.dump();
    EXPECT_GT(v["total"], 0) << "no body reached the emulator's validation";
    EXPECT_EQ(v["invalid"], 0) << "invalid bodies: " << v["entries"].dump(1);
  }

  KubernetesBlockBackend::Options opts(std::string token = "good-token", std::chrono::seconds lease = 300s) const {
    KubernetesBlockBackend::Options o;
    o.server = k8s_.url();
    o.token = std::move(token);
    o.timeout = 3000ms;
    o.leaseDuration = lease;
    return o;
  }

  json admin(http::Method method, const std::string& path, const json& body = nullptr) {
    http::Request r;
    r.method = method;
    r.url = k8s_.url() + path;
    if (!body.is_null()) {
      r.body = body.dump();
      r.headers.push_back({"Content-Type", "application/json"});
    }
    const auto a = http_.send(r);
    if (!a) {
      ADD_FAILURE() << a.error().describe();
      return nullptr;
    }
    return json::parse(a->body, nullptr, false);
  }

  // A Lease as the API has it (the good token's view).
  json lease(const std::string& name) {
    http::Request r;
    r.url = k8s_.url() + kLeases + "/" + name;
    r.headers.push_back({"Authorization", "Bearer good-token"});
    const auto a = http_.send(r);
    if (!a) {
      ADD_FAILURE() << a.error().describe();
      return nullptr;
    }
    return a->status == 200 ? json::parse(a->body, nullptr, false) : json(nullptr);
  }

  void addNode(const std::string& name) {
    const json r = admin(http::Method::kPost, "/_emulator/nodes", {{"name", name}});
    ASSERT_TRUE(r.is_object()) << r.dump();
  }

  void fault(const json& f) { (void)admin(http::Method::kPost, "/_emulator/faults", f); }

  EtcdCluster etcd_;
  K8sEmulator k8s_;
  http::CurlHttpClient http_;
};

const std::regex kMicroTime(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)");

TEST_F(K8sBlockBackendTest, ClaimCreatesALeaseAndASecondNodeSeesItHeld) {
  KubernetesBlockBackend a(http_, opts());
  KubernetesBlockBackend b(http_, opts());
  const auto ca = a.claim("p0", "10.1.0.0-27", "node-a");
  ASSERT_TRUE(ca) << ca.error().describe();
  EXPECT_EQ(ca->state, ClaimState::kClaimed);
  EXPECT_EQ(ca->holder.node, "node-a");
  EXPECT_FALSE(ca->holder.version.empty());
  ASSERT_TRUE(ca->holder.claimedAt);
  EXPECT_LT(std::chrono::abs(std::chrono::system_clock::now() - *ca->holder.claimedAt), 60s);

  // The object in the API: name, labels, annotations, spec.
  const json l = lease("ibcni-p0--b--10.1.0.0-27");
  ASSERT_TRUE(l.is_object()) << "no Lease ibcni-p0--b--10.1.0.0-27";
  EXPECT_EQ(l["metadata"]["labels"], json({{"ibcni.io/pool", "p0"}, {"ibcni.io/kind", "block"}, {"ibcni.io/node", "node-a"}}));
  EXPECT_EQ(l["metadata"]["annotations"]["ibcni.io/key"], "10.1.0.0-27");
  EXPECT_EQ(l["metadata"]["annotations"]["ibcni.io/pool"], "p0");
  EXPECT_EQ(l["metadata"]["resourceVersion"], ca->holder.version);
  EXPECT_EQ(l["spec"]["holderIdentity"], "node-a");
  EXPECT_EQ(l["spec"]["leaseDurationSeconds"], 300);
  EXPECT_TRUE(std::regex_match(l["spec"]["acquireTime"].get<std::string>(), kMicroTime)) << l.dump();
  EXPECT_TRUE(std::regex_match(l["spec"]["renewTime"].get<std::string>(), kMicroTime)) << l.dump();

  const auto cb = b.claim("p0", "10.1.0.0-27", "node-b");
  ASSERT_TRUE(cb) << cb.error().describe();
  EXPECT_EQ(cb->state, ClaimState::kHeldByOther);
  EXPECT_EQ(cb->holder.node, "node-a");
  EXPECT_EQ(cb->holder.version, ca->holder.version);

  // The same node again: adopted, nothing written.
  const auto again = a.claim("p0", "10.1.0.0-27", "node-a");
  ASSERT_TRUE(again) << again.error().describe();
  EXPECT_EQ(again->state, ClaimState::kAdopted);
  EXPECT_EQ(again->holder.version, ca->holder.version);

  // Another pool's block of the same key is another Lease; an IPv6 block gets a valid name.
  const auto other = b.claim("p1", "10.1.0.0-27", "node-b");
  ASSERT_TRUE(other) << other.error().describe();
  EXPECT_EQ(other->state, ClaimState::kClaimed);
  const auto v6 = b.claim("p1", "fd00::-120", "node-b");
  ASSERT_TRUE(v6) << v6.error().describe();
  EXPECT_EQ(v6->state, ClaimState::kClaimed);
  EXPECT_TRUE(lease(KubernetesBlockBackend::leaseName(ClaimKind::kBlock, "p1", "fd00::-120")).is_object());
}

TEST_F(K8sBlockBackendTest, TwentyConcurrentClaimersOfOneBlockOneWins) {
  constexpr int kClaimers = 20;
  std::vector<BackendResult<ClaimOutcome>> results(kClaimers, std::unexpected(BackendError{}));
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  for (int i = 0; i < kClaimers; ++i) {
    threads.emplace_back([&, i] {
      KubernetesBlockBackend backend(http_, opts());
      while (!go.load()) {
        std::this_thread::yield();
      }
      results[static_cast<std::size_t>(i)] = backend.claim("race", "10.9.0.0-28", "node-" + std::to_string(i));
    });
  }
  go = true;
  for (auto& t : threads) {
    t.join();
  }
  int claimed = 0;
  std::string winner;
  for (const auto& r : results) {
    ASSERT_TRUE(r) << r.error().describe();
    if (r->state == ClaimState::kClaimed) {
      ++claimed;
      winner = r->holder.node;
    } else {
      EXPECT_EQ(r->state, ClaimState::kHeldByOther);
    }
  }
  EXPECT_EQ(claimed, 1);
  for (const auto& r : results) {
    EXPECT_EQ(r->holder.node, winner);
  }
  const json l = lease(KubernetesBlockBackend::leaseName(ClaimKind::kBlock, "race", "10.9.0.0-28"));
  ASSERT_TRUE(l.is_object());
  EXPECT_EQ(l["spec"]["holderIdentity"], winner);
}

TEST_F(K8sBlockBackendTest, ListsByPoolAndNodeAndAddressesApart) {
  KubernetesBlockBackend k(http_, opts());
  for (const auto& [pool, block, node] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"p0", "10.1.0.32-27", "n1"}, {"p0", "10.1.0.0-27", "n2"}, {"p0", "10.1.0.64-27", "n1"},
           {"p1", "10.1.0.0-27", "n1"}}) {
    const auto c = k.claim(pool, block, node);
    ASSERT_TRUE(c && c->state == ClaimState::kClaimed) << (c ? "not claimed" : c.error().describe());
  }
  const auto addr = k.claimAddress("p0", "10.1.0.5", "n1", "ctr1:ib0");
  ASSERT_TRUE(addr && addr->state == ClaimState::kClaimed) << (addr ? "not claimed" : addr.error().describe());
  const auto otherOwner = k.claimAddress("p0", "10.1.0.5", "n1", "ctr2:ib0");
  ASSERT_TRUE(otherOwner) << otherOwner.error().describe();
  EXPECT_EQ(otherOwner->state, ClaimState::kHeldByOther) << "another owner of the same node";
  EXPECT_EQ(otherOwner->holder.owner, "ctr1:ib0");

  const auto all = k.list("p0");
  ASSERT_TRUE(all) << all.error().describe();
  ASSERT_EQ(all->size(), 3U);
  EXPECT_EQ((*all)[0].name, "10.1.0.0-27");
  EXPECT_EQ((*all)[0].holder.node, "n2");
  EXPECT_EQ((*all)[1].name, "10.1.0.32-27");
  EXPECT_EQ((*all)[2].name, "10.1.0.64-27");
  const auto mine = k.listNode("p0", "n1");
  ASSERT_TRUE(mine) << mine.error().describe();
  ASSERT_EQ(mine->size(), 2U);
  EXPECT_EQ((*mine)[0].name, "10.1.0.32-27");
  EXPECT_EQ((*mine)[1].name, "10.1.0.64-27");
  const auto none = k.list("p9");
  ASSERT_TRUE(none) << none.error().describe();
  EXPECT_TRUE(none->empty());

  const auto addresses = k.listAddresses("p0");
  ASSERT_TRUE(addresses) << addresses.error().describe();
  ASSERT_EQ(addresses->size(), 1U);
  EXPECT_EQ((*addresses)[0].name, "10.1.0.5");
  EXPECT_EQ((*addresses)[0].holder.owner, "ctr1:ib0");
  EXPECT_EQ(k.releaseAddress("p0", "10.1.0.5", "n1", addr->holder.version), ReleaseOutcome::kReleased);
  const auto after = k.listAddresses("p0");
  ASSERT_TRUE(after);
  EXPECT_TRUE(after->empty());
}

TEST_F(K8sBlockBackendTest, ReleaseIsConditionalOnHolderAndVersion) {
  KubernetesBlockBackend k(http_, opts());
  const auto c = k.claim("p0", "b1", "node-a");
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(k.release("p0", "b1", "node-b", c->holder.version), ReleaseOutcome::kNotOurs);
  EXPECT_EQ(k.release("p0", "b1", "node-a", "1"), ReleaseOutcome::kChanged);
  ASSERT_TRUE(lease("ibcni-p0--b--b1").is_object()) << "kept";
  EXPECT_EQ(k.release("p0", "b1", "node-a", c->holder.version), ReleaseOutcome::kReleased);
  EXPECT_TRUE(lease("ibcni-p0--b--b1").is_null()) << "deleted";
  EXPECT_EQ(k.release("p0", "b1", "node-a", c->holder.version), ReleaseOutcome::kGone);

  // A renewal between reading and releasing: the old version is refused.
  const auto d = k.claim("p0", "b2", "node-a");
  ASSERT_TRUE(d) << d.error().describe();
  const auto r = k.renew("node-a", {{ClaimKind::kBlock, "p0", "b2", ""}});
  ASSERT_TRUE(r && r->renewed) << (r ? "not renewed" : r.error().describe());
  EXPECT_EQ(k.release("p0", "b2", "node-a", d->holder.version), ReleaseOutcome::kChanged);
  EXPECT_TRUE(lease("ibcni-p0--b--b2").is_object());
}

TEST_F(K8sBlockBackendTest, RenewMovesRenewTimeReclaimsWhatVanishedAndReportsWhatWasTaken) {
  KubernetesBlockBackend a(http_, opts());
  KubernetesBlockBackend b(http_, opts());
  std::vector<ClaimRef> held;
  std::vector<std::string> versions;
  for (const char* block : {"b1", "b2", "b3"}) {
    const auto c = a.claim("p0", block, "node-a");
    ASSERT_TRUE(c && c->state == ClaimState::kClaimed);
    held.push_back({ClaimKind::kBlock, "p0", block, ""});
    versions.push_back(c->holder.version);
  }
  const auto addr = a.claimAddress("p0", "10.0.0.9", "node-a", "ctr:ib0");
  ASSERT_TRUE(addr && addr->state == ClaimState::kClaimed);
  held.push_back({ClaimKind::kAddress, "p0", "10.0.0.9", "ctr:ib0"});
  const std::string before = lease("ibcni-p0--b--b1")["spec"]["renewTime"];
  std::this_thread::sleep_for(20ms);

  const auto r = a.renew("node-a", held);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_TRUE(r->renewed);
  EXPECT_FALSE(r->reestablished);
  EXPECT_EQ(r->kept, held);
  EXPECT_TRUE(r->lost.empty());
  const json l1 = lease("ibcni-p0--b--b1");
  EXPECT_GT(l1["spec"]["renewTime"].get<std::string>(), before);
  EXPECT_EQ(l1["spec"]["acquireTime"].get<std::string>(), before) << "acquireTime stays";
  EXPECT_TRUE(std::regex_match(l1["spec"]["renewTime"].get<std::string>(), kMicroTime));

  // b2 vanished (say, deleted by an operator): claimed again. b3 was taken by node-b.
  ASSERT_EQ(a.release("p0", "b2", "node-a", lease("ibcni-p0--b--b2")["metadata"]["resourceVersion"].get<std::string>()),
            ReleaseOutcome::kReleased);
  ASSERT_EQ(a.release("p0", "b3", "node-a", lease("ibcni-p0--b--b3")["metadata"]["resourceVersion"].get<std::string>()),
            ReleaseOutcome::kReleased);
  ASSERT_TRUE(b.claim("p0", "b3", "node-b"));
  const auto r2 = a.renew("node-a", held);
  ASSERT_TRUE(r2) << r2.error().describe();
  EXPECT_FALSE(r2->renewed);
  EXPECT_TRUE(r2->reestablished);
  EXPECT_EQ(r2->kept, (std::vector<ClaimRef>{held[0], held[1], held[3]}));
  ASSERT_EQ(r2->lost.size(), 1U);
  EXPECT_EQ(r2->lost[0].ref, held[2]);
  ASSERT_TRUE(r2->lost[0].holder);
  EXPECT_EQ(r2->lost[0].holder->node, "node-b");
  EXPECT_EQ(lease("ibcni-p0--b--b2")["spec"]["holderIdentity"], "node-a");
  EXPECT_EQ(lease("ibcni-p0--b--b3")["spec"]["holderIdentity"], "node-b") << "never taken back";
}

TEST_F(K8sBlockBackendTest, ThePoolDefinitionIsTheFirstOne) {
  KubernetesBlockBackend a(http_, opts());
  KubernetesBlockBackend b(http_, opts());
  const auto first = a.definePool("p0", {"v4 10.1.0.0/16 /27", "network ib0 on node a"});
  ASSERT_TRUE(first) << first.error().describe();
  EXPECT_EQ(first->fingerprint, "v4 10.1.0.0/16 /27");
  const auto second = b.definePool("p0", {"v4 10.2.0.0/16 /27", "network ib1 on node b"});
  ASSERT_TRUE(second) << second.error().describe();
  EXPECT_EQ(second->fingerprint, "v4 10.1.0.0/16 /27");
  EXPECT_EQ(second->origin, "network ib0 on node a");
  const json l = lease("ibcni-p0--pool");
  ASSERT_TRUE(l.is_object());
  EXPECT_EQ(l["metadata"]["annotations"]["ibcni.io/fingerprint"], "v4 10.1.0.0/16 /27");
  EXPECT_EQ(l["metadata"]["labels"]["ibcni.io/kind"], "pool");
  // Not a block: lists do not show it.
  const auto blocks = a.list("p0");
  ASSERT_TRUE(blocks);
  EXPECT_TRUE(blocks->empty());
}

TEST_F(K8sBlockBackendTest, TakeOverNeedsTheNodeGoneAndTheLeaseExpired) {
  addNode("node-a");
  KubernetesBlockBackend a(http_, opts("good-token", 1s));
  KubernetesBlockBackend b(http_, opts());
  const auto c = a.claim("p0", "b1", "node-a");
  ASSERT_TRUE(c) << c.error().describe();

  // Node present, Lease fresh.
  auto t = b.takeOver("p0", "b1", "node-b", c->holder);
  ASSERT_TRUE(t) << t.error().describe();
  EXPECT_EQ(t->state, ClaimState::kHeldByOther);
  EXPECT_EQ(t->holder.node, "node-a");
  // Node present, Lease expired: refused.
  std::this_thread::sleep_for(1500ms);
  t = b.takeOver("p0", "b1", "node-b", c->holder);
  ASSERT_TRUE(t) << t.error().describe();
  EXPECT_EQ(t->state, ClaimState::kHeldByOther) << "its Node still exists";
  // Node gone, Lease fresh again (renewed): refused.
  (void)admin(http::Method::kDelete, "/_emulator/nodes/node-a");
  const auto r = a.renew("node-a", {{ClaimKind::kBlock, "p0", "b1", ""}});
  ASSERT_TRUE(r && r->renewed);
  const auto seen = a.list("p0");
  ASSERT_TRUE(seen && seen->size() == 1U);
  t = b.takeOver("p0", "b1", "node-b", (*seen)[0].holder);
  ASSERT_TRUE(t) << t.error().describe();
  EXPECT_EQ(t->state, ClaimState::kHeldByOther) << "its Lease was renewed within its duration";
  // Node gone and Lease expired, but seen at an older version: refused (look again first).
  std::this_thread::sleep_for(1500ms);
  t = b.takeOver("p0", "b1", "node-b", c->holder);
  ASSERT_TRUE(t) << t.error().describe();
  EXPECT_EQ(t->state, ClaimState::kHeldByOther) << "stale version";
  EXPECT_EQ(lease("ibcni-p0--b--b1")["spec"]["holderIdentity"], "node-a");
  // Both: taken.
  t = b.takeOver("p0", "b1", "node-b", (*seen)[0].holder);
  ASSERT_TRUE(t) << t.error().describe();
  EXPECT_EQ(t->state, ClaimState::kClaimed);
  EXPECT_EQ(t->holder.node, "node-b");
  const json l = lease("ibcni-p0--b--b1");
  EXPECT_EQ(l["spec"]["holderIdentity"], "node-b");
  EXPECT_EQ(l["spec"]["leaseTransitions"], 1);
  EXPECT_EQ(l["spec"]["leaseDurationSeconds"], 300);
  EXPECT_EQ(l["metadata"]["labels"]["ibcni.io/node"], "node-b");
  const auto mine = b.listNode("p0", "node-b");
  ASSERT_TRUE(mine && mine->size() == 1U);
  // The old holder's renewal now reports the block lost.
  const auto lost = a.renew("node-a", {{ClaimKind::kBlock, "p0", "b1", ""}});
  ASSERT_TRUE(lost) << lost.error().describe();
  ASSERT_EQ(lost->lost.size(), 1U);
  EXPECT_EQ(lost->lost[0].holder->node, "node-b");
}

TEST_F(K8sBlockBackendTest, OfTwoRacingTakersOneWins) {
  KubernetesBlockBackend a(http_, opts("good-token", 1s));
  const auto c = a.claim("p0", "b1", "gone-node");
  ASSERT_TRUE(c) << c.error().describe();
  std::this_thread::sleep_for(1500ms);
  constexpr int kTakers = 8;
  std::vector<BackendResult<ClaimOutcome>> results(kTakers, std::unexpected(BackendError{}));
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  for (int i = 0; i < kTakers; ++i) {
    threads.emplace_back([&, i] {
      KubernetesBlockBackend backend(http_, opts());
      while (!go.load()) {
        std::this_thread::yield();
      }
      results[static_cast<std::size_t>(i)] = backend.takeOver("p0", "b1", "taker-" + std::to_string(i), c->holder);
    });
  }
  go = true;
  for (auto& t : threads) {
    t.join();
  }
  int claimed = 0;
  std::string winner;
  for (const auto& r : results) {
    ASSERT_TRUE(r) << r.error().describe();
    if (r->state == ClaimState::kClaimed) {
      ++claimed;
      winner = r->holder.node;
    }
  }
  EXPECT_EQ(claimed, 1);
  EXPECT_EQ(lease("ibcni-p0--b--b1")["spec"]["holderIdentity"], winner);
}

TEST_F(K8sBlockBackendTest, BadTokenAndMissingPermissionAreAuthErrors) {
  KubernetesBlockBackend wrong(http_, opts("wrong-token"));
  const auto c = wrong.claim("p0", "b1", "node-a");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kAuth) << c.error().describe();
  EXPECT_EQ(c.error().backendCode, 401);
  EXPECT_NE(c.error().message.find("Unauthorized"), std::string::npos) << c.error().message;

  KubernetesBlockBackend reader(http_, opts("reader-token"));
  const auto d = reader.claim("p0", "b1", "node-a");
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().kind, BackendErrc::kAuth) << d.error().describe();
  EXPECT_EQ(d.error().backendCode, 403);
  EXPECT_NE(d.error().message.find("cannot create resource \"leases\""), std::string::npos) << d.error().message;
  EXPECT_TRUE(lease("ibcni-p0--b--b1").is_null());
  const auto listed = reader.list("p0");
  EXPECT_TRUE(listed) << "the reader may list";

  // A token file is read again for every call (a rotated token is used at once).
  const std::string tokenFile = k8s_.dir() + "/sa-token";
  std::ofstream(tokenFile) << "wrong-token\n";
  auto o = opts("");
  o.tokenFile = tokenFile;
  KubernetesBlockBackend rotating(http_, o);
  const auto before = rotating.claim("p0", "b1", "node-a");
  ASSERT_FALSE(before);
  EXPECT_EQ(before.error().kind, BackendErrc::kAuth);
  std::ofstream(tokenFile, std::ios::trunc) << "good-token\n";
  const auto after = rotating.claim("p0", "b1", "node-a");
  ASSERT_TRUE(after) << after.error().describe();
  EXPECT_EQ(after->state, ClaimState::kClaimed);
}

TEST_F(K8sBlockBackendTest, FaultsAreClearErrorsWithinTheTimeout) {
  auto o = opts();
  o.timeout = 1000ms;
  KubernetesBlockBackend k(http_, o);
  const auto timed = [&k] {
    const auto start = std::chrono::steady_clock::now();
    auto r = k.claim("p0", "b1", "node-a");
    return std::pair{std::move(r), std::chrono::steady_clock::now() - start};
  };

  fault({{"status", 500}, {"count", 1}});
  auto [r500, t500] = timed();
  ASSERT_FALSE(r500);
  EXPECT_EQ(r500.error().kind, BackendErrc::kUnreachable) << r500.error().describe();
  EXPECT_EQ(r500.error().backendCode, 500);
  EXPECT_NE(r500.error().message.find("HTTP 500"), std::string::npos) << r500.error().message;

  fault({{"garbage", true}, {"count", 1}});
  auto [garbage, tg] = timed();
  ASSERT_FALSE(garbage);
  EXPECT_EQ(garbage.error().kind, BackendErrc::kBadAnswer) << garbage.error().describe();

  fault({{"drop", true}, {"count", 1}});
  auto [dropped, td] = timed();
  ASSERT_FALSE(dropped);
  EXPECT_EQ(dropped.error().kind, BackendErrc::kUnreachable) << dropped.error().describe();

  fault({{"delayMs", 4000}, {"count", 1}});
  auto [slow, ts] = timed();
  ASSERT_FALSE(slow);
  EXPECT_EQ(slow.error().kind, BackendErrc::kTimeout) << slow.error().describe();
  EXPECT_LT(ts, 1800ms) << "bounded by the 1000 ms timeout";
  for (const auto d : {t500, tg, td}) {
    EXPECT_LT(d, 1800ms);
  }

  // The write happened but its answer was lost: the retry adopts it.
  fault({{"status", 500}, {"after", true}, {"methods", {"POST"}}, {"count", 1}});
  auto [lostAnswer, tl] = timed();
  ASSERT_FALSE(lostAnswer);
  (void)admin(http::Method::kDelete, "/_emulator/faults");
  std::this_thread::sleep_for(4000ms);  // the delayed request above is served meanwhile
  const auto retried = k.claim("p0", "b1", "node-a");
  ASSERT_TRUE(retried) << retried.error().describe();
  EXPECT_EQ(retried->state, ClaimState::kAdopted);

  // Nobody listening: unreachable.
  o.server = "http://127.0.0.1:1";
  KubernetesBlockBackend down(http_, o);
  const auto nothing = down.list("p0");
  ASSERT_FALSE(nothing);
  EXPECT_EQ(nothing.error().kind, BackendErrc::kUnreachable) << nothing.error().describe();
}

}  // namespace
}  // namespace ibcni::ipam
