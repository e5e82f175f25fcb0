// SPDX-License-Identifier: Apache-2.0
// EtcdBlockBackend against a real etcd 3.4 (Debian's etcd-server, started by EtcdCluster on
// loopback ports of its own; label etcd) through CurlHttpClient. What etcd holds is read back
// through the gateway itself: claims and registrations put without a lease, liveness and demands on
// the node's lease. Create-if-absent claims (20 concurrent claimers of one block, one winner),
// adoption (an address of the same pod gets its new owner), lists per kind, pool and node with who
// lapsed, releases judged on the state read now (the regression: a release after a renewal that
// changed the version), renewals (kept, lost, gone; a revoked lease granted anew; a claim an older
// ibcni left on a lease moved off it), takeovers only of a holder certainly gone (liveness AND
// registration absent; forgetNode; the version seen; racing takers), pool definitions, demands,
// and a 3-member cluster with one and then two members stopped.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "block_backend_print.h"
#include "block_backend_test_util.h"
#include "ipam/backends/etcd_block_backend.h"
#include "lib/http/curl_http_client.h"
#include "ibcni/os/text.h"
#include "support/etcd_cluster.h"

namespace ibcni::ipam {
namespace {

using nlohmann::json;
using testing::EtcdCluster;
using namespace std::chrono_literals;
using Strings = std::vector<std::string>;
using S = HoldCheck::State;

EtcdBlockBackend::Options opts(const EtcdCluster& etcd, std::chrono::seconds ttl = 60s) {
  EtcdBlockBackend::Options o;
  o.endpoints = etcd.endpoints();
  o.timeout = 3000ms;
  o.leaseTtl = ttl;
  return o;
}

/// etcd's gateway used directly, for what the backend does not do itself: read a key's lease,
/// grant and revoke leases, put a key as an older ibcni did.
class Gateway {
 public:
  Gateway(http::HttpClient& client, std::string endpoint) : client_(client), endpoint_(std::move(endpoint)) {}

  json post(const std::string& path, const json& body) const {
    http::Request r;
    r.method = http::Method::kPost;
    r.url = endpoint_ + path;
    r.body = body.dump();
    const auto a = client_.send(r);
    if (!a) {
      ADD_FAILURE() << path << ": " << a.error().describe();
      return nullptr;
    }
    json doc = json::parse(a->body, nullptr, false);
    if (a->status != 200 || !doc.is_object() || doc.contains("error")) {
      ADD_FAILURE() << path << " " << body.dump() << ": HTTP " << a->status << ": " << a->body;
    }
    return doc;
  }
  /// The key's kv as the gateway answers it; null when absent.
  json kv(const std::string& key) const {
    const json r = post("/v3/kv/range", {{"key", os::base64Encode(key)}});
    return r.is_object() && r.contains("kvs") ? r["kvs"][0] : json(nullptr);
  }
  [[nodiscard]] bool exists(const std::string& key) const { return !kv(key).is_null(); }
  /// The key's lease (0 when on none); -1 when the key is absent.
  [[nodiscard]] std::int64_t leaseOf(const std::string& key) const {
    const json k = kv(key);
    return k.is_null() ? -1 : std::stoll(k.value("lease", std::string("0")));
  }
  [[nodiscard]] json valueOf(const std::string& key) const {
    const json k = kv(key);
    return k.is_null() ? json(nullptr) : json::parse(*os::base64Decode(k["value"].get<std::string>()), nullptr, false);
  }
  [[nodiscard]] std::int64_t revision() const {
    return std::stoll(post("/v3/kv/range", {{"key", os::base64Encode("/")}})["header"]["revision"].get<std::string>());
  }
  [[nodiscard]] std::int64_t grant(int ttl) const {
    return std::stoll(post("/v3/lease/grant", {{"TTL", std::to_string(ttl)}})["ID"].get<std::string>());
  }
  void revoke(std::int64_t id) const { (void)post("/v3/lease/revoke", {{"ID", std::to_string(id)}}); }
  void put(const std::string& key, const json& value, std::int64_t lease) const {
    (void)post(
        "/v3/kv/put",
        {{"key", os::base64Encode(key)}, {"value", os::base64Encode(value.dump())}, {"lease", std::to_string(lease)}});
  }

 private:
  http::HttpClient& client_;
  std::string endpoint_;
};

class EtcdBlockBackendTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(etcd_.start(1)); }

  /// A node's backend (its own lease), kept for the test's length.
  EtcdBlockBackend& node(std::chrono::seconds ttl = 60s) {
    nodes_.push_back(std::make_unique<EtcdBlockBackend>(http_, opts(etcd_, ttl)));
    return *nodes_.back();
  }
  [[nodiscard]] Gateway gw() { return Gateway(http_, etcd_.endpoint(0)); }

  ClaimOutcome claim(EtcdBlockBackend& b, ClaimKind kind, const std::string& name, const std::string& node,
                     const ClaimAttrs& attrs = {}, const std::string& pool = "p0") {
    return must(b.claim(kind, pool, name, node, attrs), "claim " + name + " for " + node);
  }
  std::vector<Claim> list(EtcdBlockBackend& b, ClaimKind kind, std::optional<std::string_view> node = std::nullopt,
                          const std::string& pool = "p0") {
    return must(b.list(kind, pool, node), "list " + pool);
  }
  /// The holder of the first claim of `kind` in p0, as list() gives it.
  Holder seenHolder(EtcdBlockBackend& b, ClaimKind kind) {
    const auto l = list(b, kind);
    if (l.empty()) {
      ADD_FAILURE() << "no claim to see";
      return {};
    }
    return l[0].holder;
  }
  RenewOutcome renew(EtcdBlockBackend& b, const std::string& node, const std::vector<HeldClaim>& held) {
    return must(b.renew(node, "p0", held), "renew " + node);
  }

  EtcdCluster etcd_;
  http::CurlHttpClient http_;
  std::vector<std::unique_ptr<EtcdBlockBackend>> nodes_;
};

HeldClaim heldOf(ClaimKind kind, const std::string& name, const Holder& h) {
  return {kind, name, h.identity, h.version};
}

// ---- claim ------------------------------------------------------------------------------------

TEST_F(EtcdBlockBackendTest, AClaimIsPutWithoutALeaseAndRegistersItsNode) {
  auto& a = node();
  auto& b = node();
  const auto ca = claim(a, ClaimKind::kBlock, "10.1.0.0-27", "node-a");
  EXPECT_EQ(ca.state, ClaimState::kClaimed);
  EXPECT_FALSE(ca.holder.identity.empty());
  EXPECT_EQ(ca.holder.version, ca.holder.identity);
  const std::string key = a.claimKey(ClaimKind::kBlock, "p0", "10.1.0.0-27");
  EXPECT_EQ(gw().leaseOf(key), 0) << "a claim never expires";
  EXPECT_EQ(std::to_string(std::stoll(gw().kv(key)["create_revision"].get<std::string>())), ca.holder.identity);
  EXPECT_EQ(gw().leaseOf(a.registeredKey("node-a")), 0) << "registered by its first claim, without a lease";
  EXPECT_EQ(gw().valueOf(a.registeredKey("node-a"))["node"], "node-a");
  EXPECT_FALSE(gw().exists(a.aliveKey("node-a"))) << "only renew() makes a node alive";
  EXPECT_EQ(a.leaseId(), 0);

  const auto cb = claim(b, ClaimKind::kBlock, "10.1.0.0-27", "node-b");
  EXPECT_EQ(cb.state, ClaimState::kHeldByOther);
  EXPECT_EQ(cb.holder.node, "node-a");
  EXPECT_EQ(cb.holder.identity, ca.holder.identity);
  EXPECT_EQ(cb.holder.version, ca.holder.version);
  ASSERT_TRUE(cb.holder.claimedAt);
  EXPECT_LT(std::chrono::abs(std::chrono::system_clock::now() - *cb.holder.claimedAt), 60s);

  const std::int64_t before = gw().revision();
  const auto again = claim(a, ClaimKind::kBlock, "10.1.0.0-27", "node-a");
  EXPECT_EQ(again.state, ClaimState::kAdopted);
  EXPECT_EQ(again.holder.version, ca.holder.version);
  EXPECT_EQ(gw().revision(), before) << "adopting a block writes nothing";

  // The same block of another pool is another claim.
  EXPECT_EQ(claim(b, ClaimKind::kBlock, "10.1.0.0-27", "node-b", {}, "p1").state, ClaimState::kClaimed);
}

TEST_F(EtcdBlockBackendTest, AnAddressOfTheSamePodIsAdoptedUnderItsNewOwner) {
  auto& a = node();
  auto& b = node();
  const auto first = claim(a, ClaimKind::kAddress, "10.1.0.5", "node-a", {"c1:ib0", "ns/pod", ""});
  ASSERT_EQ(first.state, ClaimState::kClaimed);
  const auto moved = claim(a, ClaimKind::kAddress, "10.1.0.5", "node-a", {"c2:ib0", "ns/pod", ""});
  EXPECT_EQ(moved.state, ClaimState::kAdopted);
  EXPECT_EQ(moved.holder.attrs.owner, "c2:ib0");
  EXPECT_EQ(moved.holder.identity, first.holder.identity);
  EXPECT_NE(moved.holder.version, first.holder.version);
  const std::string key = a.claimKey(ClaimKind::kAddress, "p0", "10.1.0.5");
  EXPECT_EQ(gw().valueOf(key)["owner"], "c2:ib0") << "the owner is rewritten in etcd";
  EXPECT_EQ(gw().leaseOf(key), 0);
  const auto listed = list(a, ClaimKind::kAddress);
  ASSERT_EQ(listed.size(), 1U);
  EXPECT_EQ(listed[0].holder.attrs, (ClaimAttrs{"c2:ib0", "ns/pod", ""}));

  // Another pod, or no pod, on the same node: held by the other attachment, untouched.
  for (const ClaimAttrs& other : {ClaimAttrs{"c3:ib0", "ns/other", ""}, ClaimAttrs{"c3:ib0", "", ""}}) {
    const auto c = claim(a, ClaimKind::kAddress, "10.1.0.5", "node-a", other);
    EXPECT_EQ(c.state, ClaimState::kHeldByOther) << other.pod;
    EXPECT_EQ(c.holder.attrs.owner, "c2:ib0");
  }
  // Another node, even for the same pod: held by other.
  const auto c = claim(b, ClaimKind::kAddress, "10.1.0.5", "node-b", {"c2:ib0", "ns/pod", ""});
  EXPECT_EQ(c.state, ClaimState::kHeldByOther);
  EXPECT_EQ(c.holder.node, "node-a");
  EXPECT_EQ(gw().valueOf(key)["owner"], "c2:ib0");
  EXPECT_EQ(gw().valueOf(key)["node"], "node-a");
}

TEST_F(EtcdBlockBackendTest, TwentyConcurrentClaimersOfOneBlockHaveExactlyOneWinner) {
  constexpr int kNodes = 20;
  std::vector<EtcdBlockBackend*> nodes;
  for (int i = 0; i < kNodes; ++i) {
    nodes.push_back(&node());
  }
  for (const std::string block : {"b0", "b1", "b2"}) {
    const auto results = raceAtOnce(kNodes, [&](int i, const auto& waitForStart) {
      waitForStart();
      return nodes[i]->claim(ClaimKind::kBlock, "p0", block, "node-" + std::to_string(i), {});
    });
    int winners = 0;
    std::string winner;
    for (int i = 0; i < kNodes; ++i) {
      ASSERT_TRUE(results[i]) << results[i].error().describe();
      if (results[i]->state == ClaimState::kClaimed) {
        ++winners;
        winner = "node-" + std::to_string(i);
      }
    }
    ASSERT_EQ(winners, 1) << block;
    for (int i = 0; i < kNodes; ++i) {
      EXPECT_EQ(results[i]->holder.node, winner) << "node-" << i;
    }
    EXPECT_EQ(gw().valueOf(nodes[0]->claimKey(ClaimKind::kBlock, "p0", block))["node"], winner);
  }
}

// ---- list -------------------------------------------------------------------------------------

TEST_F(EtcdBlockBackendTest, ListGivesOneKindOfOnePoolInNameOrderAndWhoseHoldLapsed) {
  auto& a = node();
  auto& b = node();
  for (const char* blk : {"10.1.0.64-27", "10.1.0.0-27"}) {
    claim(a, ClaimKind::kBlock, blk, "node-a", {}, "p1");
  }
  claim(b, ClaimKind::kBlock, "10.1.0.32-27", "node-b", {}, "p1");
  claim(b, ClaimKind::kBlock, "10.1.0.96-27", "node-b", {}, "p10");  // a pool whose name extends p1's
  claim(b, ClaimKind::kAddress, "10.1.0.40", "node-b", {"c1:ib0", "", ""}, "p1");

  // Nobody renewed: every holder's hold is lapsed.
  EXPECT_EQ(namesOf(list(a, ClaimKind::kBlock, std::nullopt, "p1")),
            (Strings{"10.1.0.0-27@node-a lapsed", "10.1.0.32-27@node-b lapsed", "10.1.0.64-27@node-a lapsed"}));
  renew(a, "node-a", {});
  const auto all = list(a, ClaimKind::kBlock, std::nullopt, "p1");
  EXPECT_EQ(namesOf(all), (Strings{"10.1.0.0-27@node-a", "10.1.0.32-27@node-b lapsed", "10.1.0.64-27@node-a"}));
  for (const auto& c : all) {
    EXPECT_EQ(c.kind, ClaimKind::kBlock);
    EXPECT_FALSE(c.holder.version.empty());
    EXPECT_FALSE(c.holder.identity.empty());
    EXPECT_TRUE(c.holder.claimedAt);
  }
  EXPECT_EQ(namesOf(list(a, ClaimKind::kBlock, "node-b", "p1")), Strings{"10.1.0.32-27@node-b lapsed"});
  EXPECT_EQ(namesOf(list(a, ClaimKind::kBlock, "node-c", "p1")), Strings{});
  const auto addresses = list(a, ClaimKind::kAddress, std::nullopt, "p1");
  ASSERT_EQ(addresses.size(), 1U);
  EXPECT_EQ(addresses[0].kind, ClaimKind::kAddress);
  EXPECT_EQ(addresses[0].name, "10.1.0.40");
  EXPECT_EQ(addresses[0].holder.attrs.owner, "c1:ib0");
  EXPECT_EQ(namesOf(list(a, ClaimKind::kBlock, std::nullopt, "p2")), Strings{});

  // node-a's lease revoked (as if it expired): lapsed again, its claims still there.
  gw().revoke(a.leaseId());
  EXPECT_EQ(namesOf(list(b, ClaimKind::kBlock, "node-a", "p1")),
            (Strings{"10.1.0.0-27@node-a lapsed", "10.1.0.64-27@node-a lapsed"}));
}

// ---- release ----------------------------------------------------------------------------------

TEST_F(EtcdBlockBackendTest, AReleaseAfterARenewalThatChangedTheVersionReleases) {
  // The regression: a release judged on a version remembered from the claim counted as done while
  // the claim stayed. Here the renewal moves the claim off the lease an older ibcni left it on,
  // which changes its version; the release must still delete it.
  auto& a = node();
  const auto c = claim(a, ClaimKind::kBlock, "b1", "node-a");
  const std::string key = a.claimKey(ClaimKind::kBlock, "p0", "b1");
  const std::int64_t old = gw().grant(600);
  gw().put(key, gw().valueOf(key), old);
  const auto r = renew(a, "node-a", {heldOf(ClaimKind::kBlock, "b1", c.holder)});
  ASSERT_EQ(r.claims.size(), 1U);
  ASSERT_EQ(r.claims[0].state, S::kKept);
  ASSERT_NE(r.claims[0].now.version, c.holder.version) << "the renewal changed the version";
  EXPECT_EQ(a.release(ClaimKind::kBlock, "p0", "b1", "node-a", ""), ReleaseOutcome::kReleased);
  EXPECT_FALSE(gw().exists(key)) << "released means gone";

  // An address whose owner was rewritten since its claim: released by its new owner.
  const auto addr = claim(a, ClaimKind::kAddress, "10.1.0.5", "node-a", {"c1:ib0", "ns/p", ""});
  ASSERT_EQ(claim(a, ClaimKind::kAddress, "10.1.0.5", "node-a", {"c2:ib0", "ns/p", ""}).state, ClaimState::kAdopted);
  renew(a, "node-a", {heldOf(ClaimKind::kAddress, "10.1.0.5", addr.holder)});
  EXPECT_EQ(a.release(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", "c2:ib0"), ReleaseOutcome::kReleased);
  EXPECT_FALSE(gw().exists(a.claimKey(ClaimKind::kAddress, "p0", "10.1.0.5")));
}

TEST_F(EtcdBlockBackendTest, AReleaseLeavesWhatIsNotOursAndSaysGoneOnceGone) {
  auto& a = node();
  auto& b = node();
  claim(a, ClaimKind::kBlock, "b1", "node-a");
  claim(a, ClaimKind::kAddress, "fd00::5", "node-a", {"c1:ib0", "", ""});
  const std::string blockKey = a.claimKey(ClaimKind::kBlock, "p0", "b1");
  const std::string addrKey = a.claimKey(ClaimKind::kAddress, "p0", "fd00::5");
  EXPECT_EQ(b.release(ClaimKind::kBlock, "p0", "b1", "node-b", ""), ReleaseOutcome::kNotOurs);
  EXPECT_EQ(a.release(ClaimKind::kAddress, "p0", "fd00::5", "node-a", "c2:ib0"), ReleaseOutcome::kNotOurs);
  EXPECT_EQ(b.release(ClaimKind::kAddress, "p0", "fd00::5", "node-b", "c1:ib0"), ReleaseOutcome::kNotOurs);
  EXPECT_EQ(a.release(ClaimKind::kAddress, "p0", "b1", "node-a", ""), ReleaseOutcome::kGone) << "kinds apart";
  EXPECT_TRUE(gw().exists(blockKey));
  EXPECT_TRUE(gw().exists(addrKey));

  EXPECT_EQ(a.release(ClaimKind::kBlock, "p0", "b1", "node-a", ""), ReleaseOutcome::kReleased);
  EXPECT_EQ(a.release(ClaimKind::kBlock, "p0", "b1", "node-a", ""), ReleaseOutcome::kGone);
  EXPECT_EQ(a.release(ClaimKind::kAddress, "p0", "fd00::5", "node-a", "c1:ib0"), ReleaseOutcome::kReleased);
  EXPECT_FALSE(gw().exists(blockKey));
  EXPECT_FALSE(gw().exists(addrKey));
  EXPECT_EQ(claim(b, ClaimKind::kBlock, "b1", "node-b").state, ClaimState::kClaimed);
}

// ---- renew ------------------------------------------------------------------------------------

TEST_F(EtcdBlockBackendTest, RenewKeepsTheNodeAliveAndSaysWhatIsKeptLostOrGone) {
  auto& a = node(30s);
  auto& b = node();
  std::vector<HeldClaim> held;
  for (const char* blk : {"b1", "b2", "b3", "b4"}) {
    held.push_back(heldOf(ClaimKind::kBlock, blk, claim(a, ClaimKind::kBlock, blk, "node-a").holder));
  }
  auto r = renew(a, "node-a", held);
  EXPECT_FALSE(r.livenessRenewed);
  ASSERT_EQ(r.claims.size(), 4U);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r.claims[i].state, S::kKept) << held[i].name;
    EXPECT_EQ(r.claims[i].now.version, held[i].version) << "etcd: a renewal leaves the claim as it is";
  }
  ASSERT_NE(a.leaseId(), 0);
  EXPECT_EQ(gw().leaseOf(a.aliveKey("node-a")), a.leaseId()) << "the alive key hangs on the node's lease";
  const json ttl = gw().post("/v3/lease/timetolive", {{"ID", std::to_string(a.leaseId())}});
  EXPECT_EQ(ttl["grantedTTL"], "30") << ttl.dump();
  EXPECT_EQ(gw().leaseOf(a.registeredKey("node-a")), 0);

  // b2 released; b3 taken by node-b after its release; b4 released and claimed again by node-a
  // (another grant: another create_revision).
  ASSERT_EQ(a.release(ClaimKind::kBlock, "p0", "b2", "node-a", ""), ReleaseOutcome::kReleased);
  ASSERT_EQ(a.release(ClaimKind::kBlock, "p0", "b3", "node-a", ""), ReleaseOutcome::kReleased);
  ASSERT_EQ(claim(b, ClaimKind::kBlock, "b3", "node-b").state, ClaimState::kClaimed);
  ASSERT_EQ(a.release(ClaimKind::kBlock, "p0", "b4", "node-a", ""), ReleaseOutcome::kReleased);
  ASSERT_EQ(claim(a, ClaimKind::kBlock, "b4", "node-a").state, ClaimState::kClaimed);
  r = renew(a, "node-a", held);
  ASSERT_EQ(r.claims.size(), 4U);
  EXPECT_EQ(r.claims[0].state, S::kKept);
  EXPECT_EQ(r.claims[1].state, S::kGone);
  EXPECT_EQ(r.claims[2].state, S::kLost);
  EXPECT_EQ(r.claims[2].now.node, "node-b");
  EXPECT_EQ(r.claims[3].state, S::kLost) << "the same node, another grant";
  EXPECT_NE(r.claims[3].now.identity, held[3].identity);
  EXPECT_FALSE(gw().exists(a.claimKey(ClaimKind::kBlock, "p0", "b2"))) << "renew never claims anything back";
}

TEST_F(EtcdBlockBackendTest, ARevokedLeaseIsGrantedAnewByRenewAndTheClaimsOutliveIt) {
  std::vector<std::int64_t> granted;
  auto o = opts(etcd_);
  o.onLeaseGranted = [&](std::int64_t id) { granted.push_back(id); };
  EtcdBlockBackend a(http_, o);
  const auto c = claim(a, ClaimKind::kBlock, "b1", "node-a");
  renew(a, "node-a", {});
  ASSERT_EQ(granted.size(), 1U);
  const std::int64_t first = a.leaseId();
  EXPECT_EQ(granted[0], first);

  gw().revoke(first);  // what expiry does
  EXPECT_FALSE(gw().exists(a.aliveKey("node-a")));
  EXPECT_TRUE(gw().exists(a.claimKey(ClaimKind::kBlock, "p0", "b1"))) << "claims do not expire";
  const auto r = renew(a, "node-a", {heldOf(ClaimKind::kBlock, "b1", c.holder)});
  EXPECT_TRUE(r.livenessRenewed);
  ASSERT_EQ(r.claims.size(), 1U);
  EXPECT_EQ(r.claims[0].state, S::kKept);
  EXPECT_NE(a.leaseId(), first);
  EXPECT_EQ(granted, (std::vector<std::int64_t>{first, a.leaseId()}));
  EXPECT_EQ(gw().leaseOf(a.aliveKey("node-a")), a.leaseId()) << "alive again, on the new lease";
  EXPECT_FALSE(renew(a, "node-a", {}).livenessRenewed) << "once";
}

TEST_F(EtcdBlockBackendTest, AClaimAnOlderIbcniLeftOnALeaseIsMovedOffItByRenew) {
  auto& a = node();
  const std::string key = a.claimKey(ClaimKind::kBlock, "p0", "b1");
  const std::int64_t old = gw().grant(600);
  gw().put(key, {{"node", "node-a"}, {"claimedAt", "2026-11-24T18:00:00Z"}}, old);
  ASSERT_EQ(gw().leaseOf(key), old);
  const auto r = renew(a, "node-a", {{ClaimKind::kBlock, "b1", "", ""}});
  ASSERT_EQ(r.claims.size(), 1U);
  EXPECT_EQ(r.claims[0].state, S::kKept);
  EXPECT_EQ(gw().leaseOf(key), 0) << "moved off the lease";
  EXPECT_EQ(r.claims[0].now.version, gw().kv(key)["mod_revision"].get<std::string>());
  gw().revoke(old);
  EXPECT_TRUE(gw().exists(key)) << "the old lease's end no longer takes the claim";
  EXPECT_EQ(gw().valueOf(key)["claimedAt"], "2026-11-24T18:00:00Z");
}

// ---- takeOver, removeGone, forgetNode ---------------------------------------------------------

TEST_F(EtcdBlockBackendTest, TakeOverNeedsTheHoldersLivenessAndRegistrationGone) {
  auto& a = node();
  auto& b = node();
  const auto c = claim(a, ClaimKind::kBlock, "b1", "node-a");
  renew(a, "node-a", {});
  const Holder seen = seenHolder(b, ClaimKind::kBlock);
  const std::string key = a.claimKey(ClaimKind::kBlock, "p0", "b1");
  const auto refusedWhile = [&](const char* why) {
    const auto t = must(b.takeOver(ClaimKind::kBlock, "p0", "b1", "node-b", seen, {}), why);
    EXPECT_EQ(t.state, ClaimState::kHeldByOther) << why;
    EXPECT_EQ(t.holder.node, "node-a") << why;
    EXPECT_EQ(b.removeGone(ClaimKind::kBlock, "p0", "b1", seen), ReleaseOutcome::kNotOurs) << why;
    EXPECT_EQ(gw().valueOf(key)["node"], "node-a") << why;
  };
  refusedWhile("alive and registered");
  const auto early = b.forgetNode("node-a");
  ASSERT_FALSE(early) << "forgotten while alive";
  EXPECT_EQ(early.error().kind, BackendErrc::kInvalidArgument);
  EXPECT_NE(early.error().message.find("node-a"), std::string::npos) << early.error().describe();
  EXPECT_TRUE(gw().exists(a.registeredKey("node-a")));

  gw().revoke(a.leaseId());
  EXPECT_TRUE(seenHolder(b, ClaimKind::kBlock).lapsed);
  refusedWhile("lapsed but still registered");

  must(b.forgetNode("node-a"), "forget node-a");
  EXPECT_FALSE(gw().exists(a.registeredKey("node-a")));
  const auto t = must(b.takeOver(ClaimKind::kBlock, "p0", "b1", "node-b", seen, {}), "take b1");
  EXPECT_EQ(t.state, ClaimState::kClaimed);
  EXPECT_EQ(t.holder.node, "node-b");
  EXPECT_EQ(gw().valueOf(key)["node"], "node-b");
  EXPECT_EQ(gw().leaseOf(key), 0);
  EXPECT_EQ(t.holder.version, gw().kv(key)["mod_revision"].get<std::string>());
  EXPECT_TRUE(gw().exists(b.registeredKey("node-b"))) << "the taker registers";

  // node-a comes back: its renewal learns the block is lost.
  const auto r = renew(a, "node-a", {heldOf(ClaimKind::kBlock, "b1", c.holder)});
  ASSERT_EQ(r.claims.size(), 1U);
  EXPECT_EQ(r.claims[0].state, S::kLost);
  EXPECT_EQ(r.claims[0].now.node, "node-b");
}

TEST_F(EtcdBlockBackendTest, ARenewalRegistersTheNodeAgainAndSoFencesTakers) {
  auto& a = node();
  auto& b = node();
  claim(a, ClaimKind::kBlock, "b1", "node-a");
  const Holder seen = seenHolder(b, ClaimKind::kBlock);
  must(b.forgetNode("node-a"), "forget node-a (never alive)");
  renew(a, "node-a", {});  // back before anyone took over
  EXPECT_TRUE(gw().exists(a.registeredKey("node-a")));
  gw().revoke(a.leaseId());
  const auto t = must(b.takeOver(ClaimKind::kBlock, "p0", "b1", "node-b", seen, {}), "take b1");
  EXPECT_EQ(t.state, ClaimState::kHeldByOther) << "registered again by its renewal";
  EXPECT_EQ(t.holder.node, "node-a");
}

TEST_F(EtcdBlockBackendTest, TakeOverAndRemoveGoneRefuseAClaimChangedSinceSeen) {
  auto& a = node();
  auto& b = node();
  claim(a, ClaimKind::kAddress, "10.1.0.5", "node-a", {"c1:ib0", "ns/p", ""});
  const Holder stale = seenHolder(b, ClaimKind::kAddress);
  ASSERT_EQ(claim(a, ClaimKind::kAddress, "10.1.0.5", "node-a", {"c2:ib0", "ns/p", ""}).state, ClaimState::kAdopted);
  must(b.forgetNode("node-a"), "forget node-a");
  const ClaimAttrs mine{"c9:ib0", "", ""};
  const auto t = must(b.takeOver(ClaimKind::kAddress, "p0", "10.1.0.5", "node-b", stale, mine), "take");
  EXPECT_EQ(t.state, ClaimState::kHeldByOther);
  EXPECT_EQ(t.holder.attrs.owner, "c2:ib0");
  EXPECT_EQ(b.removeGone(ClaimKind::kAddress, "p0", "10.1.0.5", stale), ReleaseOutcome::kNotOurs);

  const Holder fresh = seenHolder(b, ClaimKind::kAddress);
  EXPECT_EQ(b.removeGone(ClaimKind::kAddress, "p0", "10.1.0.5", fresh), ReleaseOutcome::kReleased);
  EXPECT_FALSE(gw().exists(a.claimKey(ClaimKind::kAddress, "p0", "10.1.0.5")));
  EXPECT_EQ(b.removeGone(ClaimKind::kAddress, "p0", "10.1.0.5", fresh), ReleaseOutcome::kGone);
}

TEST_F(EtcdBlockBackendTest, OfRacingTakersExactlyOneWins) {
  auto& a = node();
  claim(a, ClaimKind::kBlock, "b1", "gone-node");
  must(a.forgetNode("gone-node"), "forget gone-node");
  const Holder seen = seenHolder(a, ClaimKind::kBlock);
  constexpr int kTakers = 8;
  std::vector<EtcdBlockBackend*> takers;
  for (int i = 0; i < kTakers; ++i) {
    takers.push_back(&node());
  }
  const auto results = raceAtOnce(kTakers, [&](int i, const auto& waitForStart) {
    waitForStart();
    return takers[i]->takeOver(ClaimKind::kBlock, "p0", "b1", "taker-" + std::to_string(i), seen, {});
  });
  std::string winner;
  ASSERT_NO_FATAL_FAILURE(expectOneWinner(results, winner));
  EXPECT_EQ(gw().valueOf(a.claimKey(ClaimKind::kBlock, "p0", "b1"))["node"], winner);
}

// ---- definitions and demands -------------------------------------------------------------------

TEST_F(EtcdBlockBackendTest, ThePoolDefinitionIsTheFirstOneAndNeverExpires) {
  auto& a = node();
  auto& b = node();
  EXPECT_FALSE(must(a.definition("p0"), "definition p0")) << "none yet";
  const auto first = must(a.definePool({"p0", "F-10.1", "network ib0 on node a", "", false, true}), "define p0");
  EXPECT_EQ(first.fields, "F-10.1");
  EXPECT_FALSE(first.identity.empty());
  const auto second = must(b.definePool({"p0", "F-10.2", "network ib1 on node b", "", false}), "define p0 again");
  EXPECT_EQ(second.fields, "F-10.1") << "the first definition stands";
  EXPECT_EQ(second.origin, "network ib0 on node a");
  EXPECT_EQ(second.identity, first.identity);
  const auto read = must(b.definition("p0"), "definition p0");
  ASSERT_TRUE(read);
  EXPECT_EQ(read->fields, "F-10.1");
  EXPECT_EQ(read->identity, first.identity);
  EXPECT_TRUE(read->registered) << "entered in the registry before it was recorded";

  EXPECT_EQ(gw().leaseOf("/ibcni/definitions/p0"), 0) << "a definition is the pool's, not a node's";
  EXPECT_EQ(first.identity, gw().kv("/ibcni/definitions/p0")["mod_revision"].get<std::string>());
  EXPECT_TRUE(list(a, ClaimKind::kBlock).empty()) << "not a claim";
}

TEST_F(EtcdBlockBackendTest, TheRegistryTakesOneWriterAtATime) {
  auto& a = node();
  auto& b = node();
  auto empty = must(a.registry(), "registry");
  EXPECT_TRUE(empty.pools.empty());
  auto fromB = must(b.registry(), "registry");
  empty.pools["p0"] = "F0";
  fromB.pools["p1"] = "F1";
  EXPECT_TRUE(must(a.writeRegistry(empty), "create"));
  EXPECT_FALSE(must(b.writeRegistry(fromB), "create again")) << "b read it before a wrote it";
  auto now = must(b.registry(), "registry");
  EXPECT_EQ(now.pools, (std::map<std::string, std::string>{{"p0", "F0"}}));
  now.pools["p1"] = "F1";
  EXPECT_TRUE(must(b.writeRegistry(now), "update"));
  EXPECT_FALSE(must(a.writeRegistry(empty), "stale update"));
  EXPECT_EQ(must(a.registry(), "registry").pools.size(), 2U);
  EXPECT_EQ(gw().leaseOf("/ibcni/registry"), 0) << "the registry is nobody's: no lease";
}

TEST_F(EtcdBlockBackendTest, ADefinitionIsReplacedOnlyAtTheVersionSeen) {
  auto& a = node();
  const auto first = must(a.definePool({"p0", "F1", "network ib0 on node a", "", false}), "define p0");
  PoolDefinition next{"p0", "F2", "redefined on node a", "", false};
  next.closed = true;
  const auto replaced = must(a.replaceDefinition(next, first.identity), "replace p0");
  ASSERT_TRUE(replaced);
  EXPECT_EQ(replaced->fields, "F2");
  EXPECT_TRUE(replaced->closed);
  EXPECT_NE(replaced->identity, first.identity) << "a new version";
  const auto read = must(a.definition("p0"), "definition p0");
  ASSERT_TRUE(read);
  EXPECT_EQ(read->fields, "F2");
  EXPECT_EQ(read->origin, "redefined on node a");
  EXPECT_TRUE(read->closed);
  EXPECT_EQ(read->identity, replaced->identity);
  EXPECT_EQ(gw().leaseOf("/ibcni/definitions/p0"), 0);

  next.fields = "F3";
  EXPECT_FALSE(must(a.replaceDefinition(next, first.identity), "replace at a stale version")) << "changed since";
  EXPECT_EQ(must(a.definition("p0"), "definition p0")->fields, "F2");
  EXPECT_FALSE(must(a.replaceDefinition({"p9", "F", "o", "", false}, first.identity), "replace p9")) << "none to replace";
  EXPECT_FALSE(must(a.definition("p9"), "definition p9")) << "a replacement creates nothing";
  next.closed = false;
  const auto reopened = must(a.replaceDefinition(next, replaced->identity), "reopen p0");
  ASSERT_TRUE(reopened);
  EXPECT_FALSE(reopened->closed);
  EXPECT_FALSE(must(a.definition("p0"), "definition p0")->closed);
}

TEST_F(EtcdBlockBackendTest, ADefinitionIsRemovedOnlyAtTheVersionSeen) {
  auto& a = node();
  const auto first = must(a.definePool({"p0", "F1", "network ib0 on node a", "", false}), "define p0");
  PoolDefinition closing{"p0", "F1", "network ib0 on node a", "", true};
  const auto closed = must(a.replaceDefinition(closing, first.identity), "close p0");
  ASSERT_TRUE(closed);
  EXPECT_FALSE(must(a.removeDefinition("p0", first.identity), "remove at a stale version")) << "changed since";
  EXPECT_TRUE(must(a.definition("p0"), "definition p0")) << "still there";
  EXPECT_TRUE(must(a.removeDefinition("p0", closed->identity), "remove p0"));
  EXPECT_FALSE(must(a.definition("p0"), "definition p0")) << "gone";
  EXPECT_FALSE(gw().exists("/ibcni/definitions/p0"));
  const auto anew = must(a.definePool({"p0", "F2", "network ib1 on node a", "", false}), "define p0 anew");
  EXPECT_EQ(anew.fields, "F2") << "a removed pool is defined anew";
  EXPECT_NE(anew.identity, first.identity);
}

TEST_F(EtcdBlockBackendTest, ADemandHangsOnItsNodesLeaseUntilWithdrawn) {
  auto& a = node();
  auto& b = node();
  must(a.demand("p0", "node-a", 3), "demand a");
  must(b.demand("p0", "node-b", 1), "demand b");
  must(a.demand("p0", "node-a", 5), "demand a again");
  auto d = must(b.demands("p0"), "demands");
  ASSERT_EQ(d.size(), 2U);
  EXPECT_EQ(d[0].node, "node-a");
  EXPECT_EQ(d[0].wanted, 5);
  ASSERT_TRUE(d[0].requestedAt);
  EXPECT_LT(std::chrono::abs(std::chrono::system_clock::now() - *d[0].requestedAt), 60s);
  EXPECT_FALSE(d[0].lapsed);
  EXPECT_EQ(d[1].node, "node-b");
  EXPECT_EQ(d[1].wanted, 1);
  EXPECT_TRUE(must(b.demands("p1"), "demands p1").empty());
  ASSERT_NE(a.leaseId(), 0);
  EXPECT_EQ(gw().leaseOf("/ibcni/pools/p0/demand/node-a"), a.leaseId());

  must(b.withdraw("p0", "node-b"), "withdraw b");
  must(b.withdraw("p0", "node-b"), "withdraw b again");
  d = must(b.demands("p0"), "demands");
  ASSERT_EQ(d.size(), 1U);
  EXPECT_EQ(d[0].node, "node-a");
  gw().revoke(a.leaseId());  // node-a's agent stopped: it asks for nothing
  EXPECT_TRUE(must(b.demands("p0"), "demands").empty());
}

// ---- a 3-member cluster ----------------------------------------------------------------------

TEST(EtcdBlockBackendCluster, ClaimsWithOneMemberDownWorkWithTwoFailWithinTheTimeoutAndWorkAgain) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.start(3));
  http::CurlHttpClient http;
  auto o = opts(etcd);
  o.timeout = 2000ms;
  EtcdBlockBackend a(http, o);
  EtcdBlockBackend b(http, o);
  const auto claimOf = [](EtcdBlockBackend& k, const char* blk, const char* n) {
    return k.claim(ClaimKind::kBlock, "p0", blk, n, {});
  };
  ASSERT_EQ(must(claimOf(a, "b0", "node-a"), "b0").state, ClaimState::kClaimed);

  // Member 0 (the first endpoint) stopped: the next endpoints serve.
  ASSERT_TRUE(etcd.stopMember(0));
  EXPECT_EQ(must(claimOf(a, "b1", "node-a"), "b1").state, ClaimState::kClaimed);
  EXPECT_EQ(must(claimOf(b, "b1", "node-b"), "b1 by b").state, ClaimState::kHeldByOther);
  EXPECT_EQ(must(a.renew("node-a", "p0", {}), "renew").claims.size(), 0U);

  // Two of three stopped: no quorum. The claim fails within the timeout, naming the endpoints.
  ASSERT_TRUE(etcd.stopMember(1));
  const auto t0 = std::chrono::steady_clock::now();
  auto c = claimOf(a, "b2", "node-a");
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(c) << "claimed without quorum";
  EXPECT_TRUE(c.error().kind == BackendErrc::kTimeout || c.error().kind == BackendErrc::kUnreachable)
      << c.error().describe();
  EXPECT_LT(took, 2000ms + 1000ms) << c.error().describe();
  const auto err = toCniError(c.error(), "claiming block b2 of pool p0");
  EXPECT_EQ(err.code, cni::Errc::kTryAgainLater);
  EXPECT_NE(err.msg.find(etcd.endpoint(2)), std::string::npos) << err.msg;
  EXPECT_NE(err.msg.find("claiming block b2 of pool p0"), std::string::npos) << err.msg;
  std::cout << "with two of three members stopped, after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms: " << err.msg << "\n";

  // Back: claims work again (after the election); the failed claim left nothing half-claimed:
  // b2 is free or node-a's, never anyone else's, and node-a's next claim settles it.
  ASSERT_TRUE(etcd.startMember(0));
  ASSERT_TRUE(etcd.startMember(1));
  ASSERT_TRUE(etcd.waitHealthy());
  BackendResult<ClaimOutcome> again = std::unexpected(BackendError{});
  for (const auto deadline = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < deadline;) {
    if ((again = claimOf(a, "b2", "node-a"))) {
      break;
    }
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_TRUE(again) << again.error().describe();
  EXPECT_TRUE(again->state == ClaimState::kClaimed || again->state == ClaimState::kAdopted);
  c = claimOf(b, "b2", "node-b");
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kHeldByOther);
  EXPECT_EQ(c->holder.node, "node-a");
  EXPECT_EQ(must(b.list(ClaimKind::kBlock, "p0", std::nullopt), "list").size(), 3U);
}

}  // namespace
}  // namespace ibcni::ipam
