// SPDX-License-Identifier: Apache-2.0
// KubernetesBlockBackend against a real kube-apiserver (tests/support/control_plane.h: the
// fixture's, built from its module) through the fault proxy in front of it, with CurlHttpClient
// and ServiceAccount tokens under real RBAC. What the API holds is read back through the API
// itself. Create-if-absent claims (20 concurrent claimers of one block, one winner), adoption (an
// address of the same pod gets its new owner), lists per kind, pool and node with who lapsed,
// releases judged on the state read now (the regression: a release after a renewal that changed
// the resourceVersion) and kept pending by a finalizer, renewals (renewTime moved; kept, lost,
// gone), takeovers only of a holder certainly gone (Lease lapsed AND Node absent; fenced by a
// renewal between the taker's read and write; racing takers), pool definitions, demands, a
// namespace that does not exist, 401 and 403, and the proxy's faults within the timeout. After
// every test the server must have taken every body sent as valid (no 400 or 422, no warning).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "block_backend_print.h"
#include "block_backend_test_util.h"
#include "lib/http/curl_http_client.h"
#include "ipam/backends/k8s_api.h"
#include "ipam/backends/k8s_block_backend.h"
#include "ibcni/os/time_text.h"
#include "support/control_plane.h"

namespace ibcni::ipam {
namespace {

using nlohmann::json;
using testing::ApiProxy;
using testing::ControlPlane;
using namespace std::chrono_literals;
using Strings = std::vector<std::string>;
using S = HoldCheck::State;
using K = KubernetesBlockBackend;
using SysClock = std::chrono::system_clock;

const std::regex kMicroTime(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)");

/// An HttpClient that calls `before` with each request before passing it on.
class HookedClient final : public http::HttpClient {
 public:
  HookedClient(http::HttpClient& inner, std::function<void(const http::Request&)> before)
      : inner_(inner), before_(std::move(before)) {}
  http::HttpResult<http::Response> send(const http::Request& request) override {
    before_(request);
    return inner_.send(request);
  }

 private:
  http::HttpClient& inner_;
  std::function<void(const http::Request&)> before_;
};

class K8sBlockBackendTest : public ::testing::Test {
 protected:
  // The Nodes a test may create (cluster-wide: removed before and after each test).
  static constexpr std::array kNodes{"node-a", "node-b", "node-c"};

  // A namespace of the test's own; ServiceAccount "ibcni" with the chart's rights on Leases (here
  // cluster-wide, for the namespace created late below) and Nodes, "reader" with get and list.
  void SetUp() override {
    if (!ControlPlane::built()) {
      GTEST_SKIP() << ControlPlane::kNotBuilt;
    }
    ASSERT_TRUE(testing::startApi(cp_, api_));
    auto ns = api_.freshNamespace("k8s-backend");
    ASSERT_TRUE(ns) << ns.error();
    ns_ = *ns;
    json clusterRules = testing::leaseRules();
    clusterRules.push_back(testing::nodeRules()[0]);
    auto good = api_.serviceAccount(ns_, "ibcni", json::array(), clusterRules);
    ASSERT_TRUE(good) << good.error();
    goodToken_ = *good;
    auto reader = api_.serviceAccount(ns_, "reader", testing::leaseRules({"get", "list"}));
    ASSERT_TRUE(reader) << reader.error();
    readerToken_ = *reader;
    for (const char* n : kNodes) {
      ASSERT_TRUE(api_.deleteNode(n));
    }
    api_.clearStats();
  }

  // Every body sent (the backend's and the test's own) was taken by kube-apiserver as valid.
  void TearDown() override {
    if (api_.url().empty()) {
      return;
    }
    ASSERT_TRUE(api_.clearFault());
    EXPECT_TRUE(api_.idle());
    EXPECT_TRUE(api_.allValid());
    for (const char* n : kNodes) {
      EXPECT_TRUE(api_.deleteNode(n));
    }
  }

  /// The token a test names: "good-token" (ibcni's), "reader-token", or any other as given.
  std::string token(const std::string& name) const {
    return name == "good-token" ? goodToken_ : name == "reader-token" ? readerToken_ : name;
  }
  std::string leasesPath() const { return "/apis/coordination.k8s.io/v1/namespaces/" + ns_ + "/leases"; }

  K::Options opts(const std::string& tokenName = "good-token", std::chrono::seconds lease = 300s) const {
    K::Options o;
    o.server = api_.url();
    o.namespace_ = ns_;
    o.token = token(tokenName);
    o.timeout = 3000ms;
    o.leaseDuration = lease;
    return o;
  }
  /// A node's backend, kept for the test's length.
  K& node(K::Options o) {
    nodes_.push_back(std::make_unique<K>(http_, std::move(o)));
    return *nodes_.back();
  }
  K& node() { return node(opts()); }

  /// One request through the proxy with the token named; {status, parsed body}.
  std::pair<long, json> request(http::Method method, const std::string& path, const json& body = nullptr,
                                const std::string& tokenName = "") {
    auto a = api_.call(std::string(http::methodName(method)), path, body, token(tokenName));
    if (a.first == 0) {
      ADD_FAILURE() << a.second.dump();
    }
    return a;
  }
  void addNode(const std::string& name) { ASSERT_TRUE(api_.createNode(name)); }
  void deleteNode(const std::string& name) { ASSERT_TRUE(api_.deleteNode(name)); }
  void fault(const json& f) { ASSERT_TRUE(api_.fault(f)); }

  /// A Lease as the API has it (the good token's view); null when there is none.
  json lease(const std::string& name) {
    const auto [status, l] = request(http::Method::kGet, leasesPath() + "/" + name, nullptr, "good-token");
    return status == 200 ? l : json(nullptr);
  }
  /// PUTs Lease `l` back through the API (as an operator or an admission plugin would);
  /// @return the Lease written.
  json putLease(const json& l) {
    const std::string name = l["metadata"]["name"];
    const auto [status, out] = request(http::Method::kPut, leasesPath() + "/" + name, l, "good-token");
    EXPECT_EQ(status, 200) << out.dump();
    return out;
  }
  /// Lease `name` as its holder left it `ago` ago: its renewTime (and acquireTime) moved back.
  json age(const std::string& name, std::chrono::seconds ago = 1h) {
    json l = lease(name);
    const std::string t = os::rfc3339Micros(SysClock::now() - ago);
    l["spec"]["renewTime"] = t;
    l["spec"]["acquireTime"] = t;
    return putLease(l);
  }

  /// The holder of claim `key` (of `kind`, pool p0) as list() gives it.
  Holder seen(K& k, ClaimKind kind, const std::string& key) {
    for (auto& c : must(k.list(kind, "p0", std::nullopt), "list p0")) {
      if (c.name == key) {
        return c.holder;
      }
    }
    ADD_FAILURE() << "no claim " << key;
    return {};
  }

  ControlPlane cp_;
  ApiProxy api_;
  std::string ns_;
  std::string goodToken_;
  std::string readerToken_;
  http::CurlHttpClient http_;
  std::vector<std::unique_ptr<K>> nodes_;
};

std::string blockLease(const std::string& key, const std::string& pool = "p0") {
  return K::leaseName(ClaimKind::kBlock, pool, key);
}
std::string addressLease(const std::string& key) { return K::leaseName(ClaimKind::kAddress, "p0", key); }

ClaimOutcome claim(K& k, ClaimKind kind, const std::string& key, const std::string& node, const ClaimAttrs& attrs = {},
                   const std::string& pool = "p0") {
  return must(k.claim(kind, pool, key, node, attrs), "claim " + key + " for " + node);
}
RenewOutcome renew(K& k, const std::string& node, const std::vector<HeldClaim>& held) {
  return must(k.renew(node, "p0", held), "renew " + node);
}
HeldClaim heldOf(ClaimKind kind, const std::string& name, const Holder& h) {
  return {kind, name, h.identity, h.version};
}

// ---- claim ------------------------------------------------------------------------------------

TEST_F(K8sBlockBackendTest, AClaimIsALeaseWithItsLabelsAnnotationsAndSpec) {
  auto& a = node();
  auto& b = node();
  const auto ca = claim(a, ClaimKind::kBlock, "10.1.0.0-27", "node-a");
  EXPECT_EQ(ca.state, ClaimState::kClaimed);
  EXPECT_EQ(ca.holder.node, "node-a");
  ASSERT_TRUE(ca.holder.claimedAt);
  EXPECT_LT(std::chrono::abs(SysClock::now() - *ca.holder.claimedAt), 60s);

  const json l = lease("ibcni-p0--b--10.1.0.0-27");
  ASSERT_TRUE(l.is_object()) << "no Lease ibcni-p0--b--10.1.0.0-27";
  EXPECT_EQ(ca.holder.identity, l["metadata"]["uid"].get<std::string>());
  EXPECT_EQ(ca.holder.version, l["metadata"]["resourceVersion"].get<std::string>());
  EXPECT_EQ(l["metadata"]["labels"],
            json({{"ibcni.io/pool", "p0"}, {"ibcni.io/kind", "block"}, {"ibcni.io/node", "node-a"}}));
  EXPECT_EQ(l["metadata"]["annotations"], json({{"ibcni.io/pool", "p0"}, {"ibcni.io/key", "10.1.0.0-27"}}));
  EXPECT_EQ(l["spec"]["holderIdentity"], "node-a");
  EXPECT_EQ(l["spec"]["leaseDurationSeconds"], 300);
  EXPECT_EQ(l["spec"]["leaseTransitions"].get<int>(), 0);
  EXPECT_TRUE(std::regex_match(l["spec"]["acquireTime"].get<std::string>(), kMicroTime)) << l.dump();
  EXPECT_TRUE(std::regex_match(l["spec"]["renewTime"].get<std::string>(), kMicroTime)) << l.dump();

  const auto cb = claim(b, ClaimKind::kBlock, "10.1.0.0-27", "node-b");
  EXPECT_EQ(cb.state, ClaimState::kHeldByOther);
  EXPECT_EQ(cb.holder.node, "node-a");
  EXPECT_EQ(cb.holder.identity, ca.holder.identity);
  EXPECT_EQ(cb.holder.version, ca.holder.version);

  const auto again = claim(a, ClaimKind::kBlock, "10.1.0.0-27", "node-a");
  EXPECT_EQ(again.state, ClaimState::kAdopted);
  EXPECT_EQ(again.holder.version, ca.holder.version);
  EXPECT_EQ(lease("ibcni-p0--b--10.1.0.0-27")["metadata"]["resourceVersion"], ca.holder.version) << "no write";

  // Another pool's block of the same key is another Lease; an IPv6 block gets a valid name.
  EXPECT_EQ(claim(b, ClaimKind::kBlock, "10.1.0.0-27", "node-b", {}, "p1").state, ClaimState::kClaimed);
  EXPECT_EQ(claim(b, ClaimKind::kBlock, "fd00::-120", "node-b", {}, "p1").state, ClaimState::kClaimed);
  EXPECT_TRUE(lease(blockLease("fd00::-120", "p1")).is_object());
}

TEST_F(K8sBlockBackendTest, AnAddressOfTheSamePodIsAdoptedUnderItsNewOwner) {
  auto& a = node();
  auto& b = node();
  const auto first = claim(a, ClaimKind::kAddress, "10.1.0.5", "node-a", {"c1:ib0", "ns/pod", "node-c"});
  ASSERT_EQ(first.state, ClaimState::kClaimed);
  json l = lease(addressLease("10.1.0.5"));
  EXPECT_EQ(l["metadata"]["labels"]["ibcni.io/kind"], "address");
  EXPECT_EQ(l["metadata"]["annotations"], json({{"ibcni.io/pool", "p0"},
                                                {"ibcni.io/key", "10.1.0.5"},
                                                {"ibcni.io/owner", "c1:ib0"},
                                                {"ibcni.io/pod", "ns/pod"},
                                                {"ibcni.io/lender", "node-c"}}));

  const auto moved = claim(a, ClaimKind::kAddress, "10.1.0.5", "node-a", {"c2:ib0", "ns/pod", "node-c"});
  EXPECT_EQ(moved.state, ClaimState::kAdopted);
  EXPECT_EQ(moved.holder.attrs.owner, "c2:ib0");
  EXPECT_EQ(moved.holder.identity, first.holder.identity);
  l = lease(addressLease("10.1.0.5"));
  EXPECT_EQ(l["metadata"]["annotations"]["ibcni.io/owner"], "c2:ib0") << "the owner is rewritten in the API";
  EXPECT_EQ(moved.holder.version, l["metadata"]["resourceVersion"].get<std::string>());
  EXPECT_NE(moved.holder.version, first.holder.version);

  for (const ClaimAttrs& other : {ClaimAttrs{"c3:ib0", "ns/other", ""}, ClaimAttrs{"c3:ib0", "", ""}}) {
    const auto c = claim(a, ClaimKind::kAddress, "10.1.0.5", "node-a", other);
    EXPECT_EQ(c.state, ClaimState::kHeldByOther) << other.pod;
    EXPECT_EQ(c.holder.attrs.owner, "c2:ib0");
  }
  const auto c = claim(b, ClaimKind::kAddress, "10.1.0.5", "node-b", {"c2:ib0", "ns/pod", "node-c"});
  EXPECT_EQ(c.state, ClaimState::kHeldByOther);
  EXPECT_EQ(c.holder.node, "node-a");
  l = lease(addressLease("10.1.0.5"));
  EXPECT_EQ(l["metadata"]["annotations"]["ibcni.io/owner"], "c2:ib0");
  EXPECT_EQ(l["spec"]["holderIdentity"], "node-a");
}

TEST_F(K8sBlockBackendTest, TwentyConcurrentClaimersOfOneBlockOneWins) {
  constexpr int kClaimers = 20;
  const auto results = raceAtOnce(kClaimers, [&](int i, const auto& waitForStart) {
    K backend(http_, opts());
    waitForStart();
    return backend.claim(ClaimKind::kBlock, "race", "10.9.0.0-28", "node-" + std::to_string(i), {});
  });
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
  EXPECT_EQ(lease(blockLease("10.9.0.0-28", "race"))["spec"]["holderIdentity"], winner);
}

// ---- list -------------------------------------------------------------------------------------

TEST_F(K8sBlockBackendTest, ListGivesOneKindOfOnePoolInNameOrderAndWhoseHoldLapsed) {
  auto& k = node();
  for (const auto& [pool, block, n] :
       std::vector<std::tuple<std::string, std::string, std::string>>{{"p0", "10.1.0.32-27", "n1"},
                                                                      {"p0", "10.1.0.0-27", "n2"},
                                                                      {"p0", "10.1.0.64-27", "n1"},
                                                                      {"p1", "10.1.0.96-27", "n1"}}) {
    ASSERT_EQ(claim(k, ClaimKind::kBlock, block, n, {}, pool).state, ClaimState::kClaimed);
  }
  ASSERT_EQ(claim(k, ClaimKind::kAddress, "10.1.0.5", "n1", {"ctr1:ib0", "", ""}).state, ClaimState::kClaimed);
  must(k.demand("p0", "n1", 2), "demand");
  (void)must(k.definePool({"p0", "F", "o", "", false}), "define p0");

  const auto all = must(k.list(ClaimKind::kBlock, "p0", std::nullopt), "list p0");
  EXPECT_EQ(namesOf(all), (Strings{"10.1.0.0-27@n2", "10.1.0.32-27@n1", "10.1.0.64-27@n1"}));
  for (const auto& c : all) {
    EXPECT_EQ(c.kind, ClaimKind::kBlock);
    EXPECT_FALSE(c.holder.identity.empty());
    EXPECT_TRUE(c.holder.renewedAt);
  }
  EXPECT_EQ(namesOf(must(k.list(ClaimKind::kBlock, "p0", "n1"), "list n1")),
            (Strings{"10.1.0.32-27@n1", "10.1.0.64-27@n1"}));
  EXPECT_EQ(namesOf(must(k.list(ClaimKind::kBlock, "p9", std::nullopt), "list p9")), Strings{});
  const auto addresses = must(k.list(ClaimKind::kAddress, "p0", std::nullopt), "addresses");
  ASSERT_EQ(addresses.size(), 1U);
  EXPECT_EQ(addresses[0].kind, ClaimKind::kAddress);
  EXPECT_EQ(addresses[0].name, "10.1.0.5");
  EXPECT_EQ(addresses[0].holder.attrs.owner, "ctr1:ib0");

  // n2 stopped renewing an hour ago: its hold lapsed (renewTime + leaseDurationSeconds passed).
  age(blockLease("10.1.0.0-27"));
  EXPECT_EQ(namesOf(must(k.list(ClaimKind::kBlock, "p0", std::nullopt), "list p0")),
            (Strings{"10.1.0.0-27@n2 lapsed", "10.1.0.32-27@n1", "10.1.0.64-27@n1"}));
}

// ---- release ----------------------------------------------------------------------------------

TEST_F(K8sBlockBackendTest, AReleaseAfterARenewalThatChangedTheResourceVersionReleases) {
  // The regression: a release with the resourceVersion of the claim, stale after a renewal,
  // counted as done while the Lease stayed.
  auto& k = node();
  const auto c = claim(k, ClaimKind::kBlock, "b1", "node-a");
  const auto r = renew(k, "node-a", {heldOf(ClaimKind::kBlock, "b1", c.holder)});
  ASSERT_EQ(r.claims.size(), 1U);
  ASSERT_EQ(r.claims[0].state, S::kKept);
  ASSERT_NE(r.claims[0].now.version, c.holder.version) << "the renewal changed the resourceVersion";
  EXPECT_EQ(k.release(ClaimKind::kBlock, "p0", "b1", "node-a", ""), ReleaseOutcome::kReleased);
  EXPECT_TRUE(lease(blockLease("b1")).is_null()) << "released means gone";
}

TEST_F(K8sBlockBackendTest, AReleaseLeavesWhatIsNotOursAndSaysGoneOnceGone) {
  auto& k = node();
  claim(k, ClaimKind::kBlock, "b1", "node-a");
  claim(k, ClaimKind::kAddress, "10.1.0.5", "node-a", {"c1:ib0", "", ""});
  EXPECT_EQ(k.release(ClaimKind::kBlock, "p0", "b1", "node-b", ""), ReleaseOutcome::kNotOurs);
  EXPECT_EQ(k.release(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", "c2:ib0"), ReleaseOutcome::kNotOurs);
  EXPECT_EQ(k.release(ClaimKind::kAddress, "p0", "b1", "node-a", ""), ReleaseOutcome::kGone) << "kinds apart";
  EXPECT_TRUE(lease(blockLease("b1")).is_object());
  EXPECT_TRUE(lease(addressLease("10.1.0.5")).is_object());
  EXPECT_EQ(k.release(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", "c1:ib0"), ReleaseOutcome::kReleased);
  EXPECT_EQ(k.release(ClaimKind::kBlock, "p0", "b1", "node-a", ""), ReleaseOutcome::kReleased);
  EXPECT_EQ(k.release(ClaimKind::kBlock, "p0", "b1", "node-a", ""), ReleaseOutcome::kGone);
  EXPECT_TRUE(lease(blockLease("b1")).is_null());
  EXPECT_TRUE(lease(addressLease("10.1.0.5")).is_null());
}

TEST_F(K8sBlockBackendTest, AReleaseKeptByAFinalizerIsPendingUntilTheFinalizerGoes) {
  auto& k = node();
  claim(k, ClaimKind::kBlock, "b1", "node-a");
  json l = lease(blockLease("b1"));
  l["metadata"]["finalizers"] = {"example.com/keep"};  // as an admission plugin would add it
  putLease(l);

  EXPECT_EQ(k.release(ClaimKind::kBlock, "p0", "b1", "node-a", ""), ReleaseOutcome::kPending);
  l = lease(blockLease("b1"));
  ASSERT_TRUE(l.is_object()) << "a finalizer keeps it";
  EXPECT_TRUE(l["metadata"].contains("deletionTimestamp")) << l.dump();
  const auto listed = must(k.list(ClaimKind::kBlock, "p0", std::nullopt), "list");
  ASSERT_EQ(listed.size(), 1U);
  EXPECT_TRUE(listed[0].holder.deleting);
  EXPECT_EQ(k.release(ClaimKind::kBlock, "p0", "b1", "node-a", ""), ReleaseOutcome::kPending) << "asked again";
  EXPECT_EQ(claim(k, ClaimKind::kBlock, "b1", "node-b").state, ClaimState::kHeldByOther) << "not free yet";

  l.erase("status");
  l["metadata"].erase("finalizers");
  putLease(l);  // the finalizer's owner is done: the API deletes it
  EXPECT_TRUE(lease(blockLease("b1")).is_null());
  EXPECT_EQ(k.release(ClaimKind::kBlock, "p0", "b1", "node-a", ""), ReleaseOutcome::kGone);
}

// ---- renew ------------------------------------------------------------------------------------

TEST_F(K8sBlockBackendTest, RenewMovesRenewTimeAndSaysWhatIsKeptLostOrGone) {
  auto& a = node();
  auto& b = node();
  std::vector<HeldClaim> held;
  for (const char* blk : {"b1", "b2", "b3", "b4"}) {
    held.push_back(heldOf(ClaimKind::kBlock, blk, claim(a, ClaimKind::kBlock, blk, "node-a").holder));
  }
  const json before = lease(blockLease("b1"));
  std::this_thread::sleep_for(20ms);
  auto r = renew(a, "node-a", held);
  EXPECT_FALSE(r.livenessRenewed);
  ASSERT_EQ(r.claims.size(), 4U);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r.claims[i].state, S::kKept) << held[i].name;
    EXPECT_NE(r.claims[i].now.version, held[i].version) << held[i].name;
  }
  const json after = lease(blockLease("b1"));
  EXPECT_EQ(r.claims[0].now.version, after["metadata"]["resourceVersion"].get<std::string>());
  EXPECT_GT(after["spec"]["renewTime"].get<std::string>(), before["spec"]["renewTime"].get<std::string>());
  EXPECT_EQ(after["spec"]["acquireTime"], before["spec"]["acquireTime"]) << "acquireTime stays";
  EXPECT_TRUE(std::regex_match(after["spec"]["renewTime"].get<std::string>(), kMicroTime));
  ASSERT_TRUE(r.claims[0].now.renewedAt);
  EXPECT_LT(std::chrono::abs(SysClock::now() - *r.claims[0].now.renewedAt), 60s);

  // b2 released; b3 taken by node-b after its release; b4 released and claimed again by node-a
  // (another grant: another uid).
  ASSERT_EQ(a.release(ClaimKind::kBlock, "p0", "b2", "node-a", ""), ReleaseOutcome::kReleased);
  ASSERT_EQ(a.release(ClaimKind::kBlock, "p0", "b3", "node-a", ""), ReleaseOutcome::kReleased);
  ASSERT_EQ(claim(b, ClaimKind::kBlock, "b3", "node-b").state, ClaimState::kClaimed);
  ASSERT_EQ(a.release(ClaimKind::kBlock, "p0", "b4", "node-a", ""), ReleaseOutcome::kReleased);
  ASSERT_EQ(claim(a, ClaimKind::kBlock, "b4", "node-a").state, ClaimState::kClaimed);
  const std::string b3Version = lease(blockLease("b3"))["metadata"]["resourceVersion"];
  r = renew(a, "node-a", held);
  ASSERT_EQ(r.claims.size(), 4U);
  EXPECT_EQ(r.claims[0].state, S::kKept);
  EXPECT_EQ(r.claims[1].state, S::kGone);
  EXPECT_EQ(r.claims[2].state, S::kLost);
  EXPECT_EQ(r.claims[2].now.node, "node-b");
  EXPECT_EQ(r.claims[3].state, S::kLost) << "the same node, another grant";
  EXPECT_NE(r.claims[3].now.identity, held[3].identity);
  EXPECT_TRUE(lease(blockLease("b2")).is_null()) << "renew never claims anything back";
  EXPECT_EQ(lease(blockLease("b3"))["metadata"]["resourceVersion"], b3Version) << "another's Lease is not renewed";
}

// ---- takeOver, removeGone, forgetNode ---------------------------------------------------------

TEST_F(K8sBlockBackendTest, TakeOverNeedsTheLeaseLapsedAndTheNodeAbsent) {
  addNode("node-a");
  auto& a = node();
  auto& b = node();
  const auto c = claim(a, ClaimKind::kBlock, "b1", "node-a");
  const auto refused = [&](const Holder& seen, const char* why) {
    const auto t = must(b.takeOver(ClaimKind::kBlock, "p0", "b1", "node-b", seen, {}), why);
    EXPECT_EQ(t.state, ClaimState::kHeldByOther) << why;
    EXPECT_EQ(t.holder.node, "node-a") << why;
    EXPECT_EQ(b.removeGone(ClaimKind::kBlock, "p0", "b1", seen), ReleaseOutcome::kNotOurs) << why;
    EXPECT_EQ(lease(blockLease("b1"))["spec"]["holderIdentity"], "node-a") << why;
  };
  refused(seen(b, ClaimKind::kBlock, "b1"), "Node present, Lease fresh");
  age(blockLease("b1"));
  refused(seen(b, ClaimKind::kBlock, "b1"), "Node present, Lease lapsed");
  deleteNode("node-a");
  renew(a, "node-a", {heldOf(ClaimKind::kBlock, "b1", c.holder)});
  refused(seen(b, ClaimKind::kBlock, "b1"), "Node absent, Lease renewed within its duration");
  const Holder stale = seen(b, ClaimKind::kBlock, "b1");
  age(blockLease("b1"));
  refused(stale, "Node absent, Lease lapsed, but seen at an older version");

  const Holder lapsed = seen(b, ClaimKind::kBlock, "b1");
  EXPECT_TRUE(lapsed.lapsed);
  const auto t = must(b.takeOver(ClaimKind::kBlock, "p0", "b1", "node-b", lapsed, {}), "take b1");
  EXPECT_EQ(t.state, ClaimState::kClaimed);
  EXPECT_EQ(t.holder.node, "node-b");
  EXPECT_FALSE(t.holder.lapsed);
  const json l = lease(blockLease("b1"));
  EXPECT_EQ(t.holder.version, l["metadata"]["resourceVersion"].get<std::string>());
  EXPECT_EQ(l["spec"]["holderIdentity"], "node-b");
  EXPECT_EQ(l["spec"]["leaseTransitions"], 1);
  EXPECT_EQ(l["spec"]["leaseDurationSeconds"], 300);
  EXPECT_EQ(l["metadata"]["labels"]["ibcni.io/node"], "node-b");
  EXPECT_LT(std::chrono::abs(SysClock::now() - *os::parseRfc3339(l["spec"]["renewTime"].get<std::string>())), 60s);
  EXPECT_EQ(namesOf(must(b.list(ClaimKind::kBlock, "p0", "node-b"), "list node-b")), Strings{"b1@node-b"});

  // The old holder's renewal now reports the block lost.
  const auto r = renew(a, "node-a", {heldOf(ClaimKind::kBlock, "b1", c.holder)});
  ASSERT_EQ(r.claims.size(), 1U);
  EXPECT_EQ(r.claims[0].state, S::kLost);
  EXPECT_EQ(r.claims[0].now.node, "node-b");
}

TEST_F(K8sBlockBackendTest, ARenewalAfterTheTakersListFencesTheTakeOver) {
  auto& a = node();
  auto& b = node();
  const auto c = claim(a, ClaimKind::kBlock, "b1", "node-a");  // node-a has no Node object
  age(blockLease("b1"));
  const Holder seen = this->seen(b, ClaimKind::kBlock, "b1");
  ASSERT_TRUE(seen.lapsed);
  renew(a, "node-a", {heldOf(ClaimKind::kBlock, "b1", c.holder)});  // node-a was only slow
  const auto t = must(b.takeOver(ClaimKind::kBlock, "p0", "b1", "node-b", seen, {}), "take b1");
  EXPECT_EQ(t.state, ClaimState::kHeldByOther);
  EXPECT_EQ(t.holder.node, "node-a");
  EXPECT_EQ(lease(blockLease("b1"))["spec"]["holderIdentity"], "node-a");
}

TEST_F(K8sBlockBackendTest, ARenewalBetweenTheTakersReadAndWriteFailsItsConditionalPut) {
  auto& a = node();
  const auto c = claim(a, ClaimKind::kBlock, "b1", "node-a");  // node-a has no Node object
  age(blockLease("b1"));
  // The taker's PUT is held back until node-a has renewed: the PUT's resourceVersion is stale.
  bool renewed = false;
  HookedClient hooked(http_, [&](const http::Request& r) {
    if (r.method == http::Method::kPut && !renewed) {
      renewed = true;
      const auto rn = renew(a, "node-a", {heldOf(ClaimKind::kBlock, "b1", c.holder)});
      EXPECT_TRUE(rn.claims.size() == 1U && rn.claims[0].state == S::kKept);
    }
  });
  K taker(hooked, opts());
  const Holder seen = this->seen(taker, ClaimKind::kBlock, "b1");
  ASSERT_TRUE(seen.lapsed);
  const auto t = must(taker.takeOver(ClaimKind::kBlock, "p0", "b1", "node-b", seen, {}), "take b1");
  EXPECT_TRUE(renewed) << "the taker never sent its PUT";
  EXPECT_EQ(t.state, ClaimState::kHeldByOther);
  EXPECT_EQ(t.holder.node, "node-a");
  const json l = lease(blockLease("b1"));
  EXPECT_EQ(l["spec"]["holderIdentity"], "node-a");
  EXPECT_EQ(l["spec"]["leaseTransitions"].get<int>(), 0);
}

TEST_F(K8sBlockBackendTest, RemoveGoneFollowsTheTakeOverRule) {
  addNode("node-a");
  auto& a = node();
  auto& b = node();
  claim(a, ClaimKind::kAddress, "10.1.0.5", "node-a", {"c1:ib0", "", ""});
  age(addressLease("10.1.0.5"));
  const Holder seen = this->seen(b, ClaimKind::kAddress, "10.1.0.5");
  EXPECT_EQ(b.removeGone(ClaimKind::kAddress, "p0", "10.1.0.5", seen), ReleaseOutcome::kNotOurs) << "its Node exists";
  deleteNode("node-a");
  EXPECT_EQ(b.removeGone(ClaimKind::kAddress, "p0", "10.1.0.5", seen), ReleaseOutcome::kReleased);
  EXPECT_TRUE(lease(addressLease("10.1.0.5")).is_null());
  EXPECT_EQ(b.removeGone(ClaimKind::kAddress, "p0", "10.1.0.5", seen), ReleaseOutcome::kGone);
}

TEST_F(K8sBlockBackendTest, OfRacingTakersExactlyOneWins) {
  auto& a = node();
  claim(a, ClaimKind::kBlock, "b1", "gone-node");
  age(blockLease("b1"));
  const Holder seen = this->seen(a, ClaimKind::kBlock, "b1");
  constexpr int kTakers = 8;
  const auto results = raceAtOnce(kTakers, [&](int i, const auto& waitForStart) {
    K backend(http_, opts());
    waitForStart();
    return backend.takeOver(ClaimKind::kBlock, "p0", "b1", "taker-" + std::to_string(i), seen, {});
  });
  std::string winner;
  ASSERT_NO_FATAL_FAILURE(expectOneWinner(results, winner));
  EXPECT_EQ(lease(blockLease("b1"))["spec"]["holderIdentity"], winner);
  EXPECT_EQ(lease(blockLease("b1"))["spec"]["leaseTransitions"], 1);
}

TEST_F(K8sBlockBackendTest, ATakeOverThatFallsBackToAClaimStaysWithinTheTimeout) {
  auto o = opts();
  o.timeout = 1000ms;
  auto& k = node(o);
  Holder seen;  // a claim some node saw, released since
  seen.node = "node-a";
  seen.version = "1";
  fault({{"delayMs", 700}});  // every request served after 700 ms
  const auto start = std::chrono::steady_clock::now();
  const auto t = k.takeOver(ClaimKind::kBlock, "p0", "b1", "node-b", seen, {});
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(api_.clearFault());
  // The GET (700 ms) finds no Lease; the create it falls back to has the 300 ms left, not a
  // timeout of its own.
  EXPECT_LT(took, 1300ms) << "the call outlived its 1000 ms timeout";
  ASSERT_FALSE(t) << "claimed after " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  EXPECT_EQ(t.error().kind, BackendErrc::kTimeout) << t.error().describe();
  std::this_thread::sleep_for(800ms);  // the late POST is served meanwhile
  must(k.withdraw("p0", "node-b"), "a body for the validation log");
}

// ---- definitions and demands -------------------------------------------------------------------

TEST_F(K8sBlockBackendTest, ThePoolDefinitionIsTheFirstOneAndTheEarlierIsOrderedFirst) {
  auto& a = node();
  auto& b = node();
  EXPECT_FALSE(must(a.definition("zz"), "definition zz")) << "none yet";
  const auto first = must(a.definePool({"zz", "F-10.1", "network ib0 on node a", "", false, true}), "define zz");
  EXPECT_EQ(first.fields, "F-10.1");
  const json l = lease(K::poolLeaseName("zz"));
  ASSERT_TRUE(l.is_object());
  EXPECT_EQ(first.identity, l["metadata"]["resourceVersion"].get<std::string>()) << "this version of the definition";
  EXPECT_EQ(l["metadata"]["labels"]["ibcni.io/kind"], "pool");
  EXPECT_EQ(l["metadata"]["annotations"]["ibcni.io/definition"], "F-10.1");
  EXPECT_EQ(l["metadata"]["annotations"]["ibcni.io/registered"], "true") << "entered in the registry before";
  const auto second = must(b.definePool({"zz", "F-10.2", "network ib1 on node b", "", false}), "define zz again");
  EXPECT_EQ(second.fields, "F-10.1") << "the first definition stands";
  EXPECT_EQ(second.origin, "network ib0 on node a");
  EXPECT_EQ(second.identity, first.identity);
  const auto read = must(b.definition("zz"), "definition zz");
  ASSERT_TRUE(read);
  EXPECT_EQ(read->fields, "F-10.1");
  EXPECT_TRUE(read->registered);

  EXPECT_TRUE(must(a.list(ClaimKind::kBlock, "zz", std::nullopt), "list").empty()) << "not a claim";
}

TEST_F(K8sBlockBackendTest, ADefinitionReadAfterAClaimIsNotOlderThanTheClaimAndFallsBackToAQuorumRead) {
  std::vector<std::string> gets;
  HookedClient hooked(http_, [&](const http::Request& r) {
    if (r.method == http::Method::kGet) {
      gets.push_back(r.url);
    }
  });
  K b(hooked, opts());
  must(node().definePool({"p0", "F-1", "network ib0 on node a", "", false, true}), "define p0");
  ASSERT_TRUE(must(b.definition("p0"), "definition before any write"));
  ASSERT_EQ(gets.size(), 1U);
  EXPECT_EQ(gets[0].find("resourceVersion="), std::string::npos) << "no write yet: a quorum read: " << gets[0];
  // After its claim, the watch cache answers as of a version not older than the claim's.
  const auto c = claim(b, ClaimKind::kBlock, "b1", "node-b");
  gets.clear();
  auto d = must(b.definition("p0"), "definition after the claim");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->fields, "F-1");
  ASSERT_EQ(gets.size(), 1U);
  EXPECT_TRUE(gets[0].ends_with("/" + K::poolLeaseName("p0") + "?resourceVersion=" + c.holder.version)) << gets[0];
  // A cache that cannot answer (it lags: 504 "Too large resource version"): a quorum read instead.
  fault({{"status", 504}, {"methods", {"GET"}}, {"pathContains", "resourceVersion="}, {"count", 1},
         {"message", "Too large resource version"}});
  gets.clear();
  d = must(b.definition("p0"), "definition, the cache not answering");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->fields, "F-1");
  ASSERT_EQ(gets.size(), 2U);
  EXPECT_NE(gets[0].find("?resourceVersion="), std::string::npos) << gets[0];
  EXPECT_EQ(gets[1].find("resourceVersion="), std::string::npos) << gets[1];
}

TEST_F(K8sBlockBackendTest, TheRegistryTakesOneWriterAtATime) {
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
  const json l = lease("ibcni-pool-registry");
  ASSERT_TRUE(l.is_object());
  EXPECT_EQ(l["metadata"]["labels"]["ibcni.io/kind"], "registry");
}

TEST_F(K8sBlockBackendTest, ADefinitionIsRemovedOnlyAtTheVersionSeenAndNotWhileAFinalizerKeepsIt) {
  auto& a = node();
  const auto first = must(a.definePool({"p0", "F1", "network ib0 on node a", "", false}), "define p0");
  PoolDefinition closing{"p0", "F1", "network ib0 on node a", "", true};
  const auto closed = must(a.replaceDefinition(closing, first.identity), "close p0");
  ASSERT_TRUE(closed);
  EXPECT_FALSE(must(a.removeDefinition("p0", first.identity), "remove at a stale version")) << "changed since";
  EXPECT_TRUE(lease(K::poolLeaseName("p0")).is_object()) << "still there";

  json l = lease(K::poolLeaseName("p0"));
  l["metadata"]["finalizers"] = {"example.com/keep"};
  putLease(l);
  const std::string kept = lease(K::poolLeaseName("p0"))["metadata"]["resourceVersion"];
  EXPECT_FALSE(must(a.removeDefinition("p0", kept), "remove while a finalizer keeps it")) << "not gone";
  l = lease(K::poolLeaseName("p0"));
  ASSERT_TRUE(l.is_object());
  EXPECT_TRUE(must(a.definition("p0"), "definition p0")->closed) << "closed: no node claims under it";
  l.erase("status");
  l["metadata"].erase("finalizers");
  putLease(l);
  EXPECT_TRUE(lease(K::poolLeaseName("p0")).is_null());
  EXPECT_TRUE(must(a.removeDefinition("p0", kept), "remove a removed definition")) << "already gone";
  const auto anew = must(a.definePool({"p0", "F2", "network ib1 on node a", "", false}), "define p0 anew");
  EXPECT_EQ(anew.fields, "F2") << "a removed pool is defined anew";
}

TEST_F(K8sBlockBackendTest, ADefinitionIsReplacedOnlyAtTheVersionSeen) {
  auto& a = node();
  const auto first = must(a.definePool({"p0", "F1", "network ib0 on node a", "", false}), "define p0");
  PoolDefinition next{"p0", "F2", "redefined on node a", "", false};
  next.closed = true;
  const auto replaced = must(a.replaceDefinition(next, first.identity), "replace p0");
  ASSERT_TRUE(replaced);
  EXPECT_EQ(replaced->fields, "F2");
  EXPECT_TRUE(replaced->closed);
  EXPECT_NE(replaced->identity, first.identity) << "a new version";
  const json l = lease(K::poolLeaseName("p0"));
  EXPECT_EQ(l["metadata"]["resourceVersion"], replaced->identity);
  EXPECT_EQ(l["metadata"]["annotations"]["ibcni.io/definition"], "F2");
  EXPECT_EQ(l["metadata"]["annotations"]["ibcni.io/closed"], "true");
  const auto read = must(a.definition("p0"), "definition p0");
  ASSERT_TRUE(read);
  EXPECT_EQ(read->origin, "redefined on node a");
  EXPECT_TRUE(read->closed);

  next.fields = "F3";
  EXPECT_FALSE(must(a.replaceDefinition(next, first.identity), "replace at a stale version")) << "changed since";
  EXPECT_EQ(must(a.definition("p0"), "definition p0")->fields, "F2");
  EXPECT_FALSE(must(a.replaceDefinition({"p9", "F", "o", "", false}, first.identity), "replace p9")) << "none to replace";
  EXPECT_FALSE(must(a.definition("p9"), "definition p9")) << "a replacement creates nothing";
  next.closed = false;
  const auto reopened = must(a.replaceDefinition(next, replaced->identity), "reopen p0");
  ASSERT_TRUE(reopened);
  EXPECT_FALSE(reopened->closed);
  EXPECT_FALSE(lease(K::poolLeaseName("p0"))["metadata"]["annotations"].contains("ibcni.io/closed"));
}

TEST_F(K8sBlockBackendTest, ADemandIsALeaseLabelledDemandUntilWithdrawn) {
  auto& a = node();
  auto& b = node();
  must(a.demand("p0", "node-a", 3), "demand a");
  must(b.demand("p0", "node-b", 1), "demand b");
  must(a.demand("p0", "node-a", 5), "demand a again");
  const json l = lease(K::demandLeaseName("p0", "node-a"));
  ASSERT_TRUE(l.is_object());
  EXPECT_EQ(l["metadata"]["labels"],
            json({{"ibcni.io/pool", "p0"}, {"ibcni.io/kind", "demand"}, {"ibcni.io/node", "node-a"}}));
  EXPECT_EQ(l["metadata"]["annotations"]["ibcni.io/wanted"], "5");
  auto d = must(b.demands("p0"), "demands");
  std::sort(d.begin(), d.end(), [](const Demand& x, const Demand& y) { return x.node < y.node; });
  ASSERT_EQ(d.size(), 2U);
  EXPECT_EQ(d[0].node, "node-a");
  EXPECT_EQ(d[0].wanted, 5);
  ASSERT_TRUE(d[0].requestedAt);
  EXPECT_LT(std::chrono::abs(SysClock::now() - *d[0].requestedAt), 60s);
  EXPECT_FALSE(d[0].lapsed);
  EXPECT_EQ(d[1].node, "node-b");
  EXPECT_EQ(d[1].wanted, 1);
  EXPECT_TRUE(must(b.demands("p1"), "demands p1").empty());
  EXPECT_TRUE(must(b.list(ClaimKind::kBlock, "p0", std::nullopt), "list").empty()) << "not a claim";

  age(K::demandLeaseName("p0", "node-b"));
  for (const auto& x : must(b.demands("p0"), "demands")) {
    EXPECT_EQ(x.lapsed, x.node == "node-b") << x.node;
  }
  must(b.withdraw("p0", "node-b"), "withdraw b");
  EXPECT_TRUE(lease(K::demandLeaseName("p0", "node-b")).is_null());
  must(b.withdraw("p0", "node-b"), "withdraw b again");
  d = must(b.demands("p0"), "demands");
  ASSERT_EQ(d.size(), 1U);
  EXPECT_EQ(d[0].node, "node-a");
}

// ---- configuration, credentials, faults -------------------------------------------------------

TEST_F(K8sBlockBackendTest, ForgetNodeIsRefusedNamingKubectlDeleteNode) {
  auto& k = node();
  const auto f = k.forgetNode("node-a");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().kind, BackendErrc::kInvalidArgument);
  EXPECT_NE(f.error().message.find("kubectl delete node node-a"), std::string::npos) << f.error().describe();
  must(k.demand("p0", "node-a", 1), "a body for the validation log");
}

TEST_F(K8sBlockBackendTest, ANamespaceThatDoesNotExistIsAConfigurationErrorNamingTheSetting) {
  const std::string missing = ns_ + "-late";
  auto o = opts();
  o.namespace_ = missing;
  auto& k = node(o);
  const auto c = k.claim(ClaimKind::kBlock, "p0", "b1", "node-a", {});
  ASSERT_FALSE(c) << "created a Lease in a namespace that does not exist";
  EXPECT_EQ(c.error().kind, BackendErrc::kInvalidArgument) << c.error().describe();
  EXPECT_NE(c.error().message.find("ipam.cluster.kubernetes.namespace"), std::string::npos) << c.error().describe();
  EXPECT_NE(c.error().message.find(missing), std::string::npos) << c.error().describe();
  EXPECT_EQ(toCniError(c.error(), "claiming block b1").code, cni::Errc::kInvalidConfig);
  const auto d = k.definePool({"p0", "F", "o", "", false});
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().kind, BackendErrc::kInvalidArgument) << d.error().describe();

  ASSERT_TRUE(api_.createNamespace(missing));
  EXPECT_EQ(claim(k, ClaimKind::kBlock, "b1", "node-a").state, ClaimState::kClaimed);
}

TEST_F(K8sBlockBackendTest, BadTokenAndMissingPermissionAreAuthErrors) {
  K wrong(http_, opts("wrong-token"));
  const auto c = wrong.claim(ClaimKind::kBlock, "p0", "b1", "node-a", {});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kAuth) << c.error().describe();
  EXPECT_EQ(c.error().backendCode, 401);
  EXPECT_NE(c.error().message.find("Unauthorized"), std::string::npos) << c.error().message;

  K reader(http_, opts("reader-token"));
  const auto d = reader.claim(ClaimKind::kBlock, "p0", "b1", "node-a", {});
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().kind, BackendErrc::kAuth) << d.error().describe();
  EXPECT_EQ(d.error().backendCode, 403);
  EXPECT_NE(d.error().message.find("cannot create resource \"leases\""), std::string::npos) << d.error().message;
  EXPECT_TRUE(lease(blockLease("b1")).is_null());
  EXPECT_TRUE(reader.list(ClaimKind::kBlock, "p0", std::nullopt)) << "the reader may list";
  EXPECT_EQ(toCniError(d.error(), "x").code, cni::Errc::kInvalidConfig);

  // A token file is read again for every call (a rotated token is used at once).
  const std::string tokenFile = api_.dir() + "/sa-token";
  std::ofstream(tokenFile) << "wrong-token\n";
  auto o = opts("");
  o.tokenFile = tokenFile;
  K rotating(http_, o);
  const auto before = rotating.claim(ClaimKind::kBlock, "p0", "b1", "node-a", {});
  ASSERT_FALSE(before);
  EXPECT_EQ(before.error().kind, BackendErrc::kAuth);
  std::ofstream(tokenFile, std::ios::trunc) << goodToken_ << "\n";
  EXPECT_EQ(claim(rotating, ClaimKind::kBlock, "b1", "node-a").state, ClaimState::kClaimed);
}

TEST_F(K8sBlockBackendTest, FaultsAreClearErrorsWithinTheTimeout) {
  auto o = opts();
  o.timeout = 1000ms;
  auto& k = node(o);
  const auto timed = [&k] {
    const auto start = std::chrono::steady_clock::now();
    auto r = k.claim(ClaimKind::kBlock, "p0", "b1", "node-a", {});
    return std::pair{std::move(r), std::chrono::steady_clock::now() - start};
  };
  const auto expectError = [&](const json& f, BackendErrc kind) -> BackendError {
    fault(f);
    const auto [r, took] = timed();
    if (r) {
      ADD_FAILURE() << f.dump() << ": no error";
      return {};
    }
    EXPECT_EQ(r.error().kind, kind) << f.dump() << ": " << r.error().describe();
    EXPECT_LT(took, 1800ms) << f.dump() << ": bounded by the 1000 ms timeout";
    return r.error();
  };
  const auto e500 = expectError({{"status", 500}, {"count", 1}}, BackendErrc::kUnreachable);
  EXPECT_EQ(e500.backendCode, 500);
  EXPECT_NE(e500.message.find("HTTP 500"), std::string::npos) << e500.message;
  expectError({{"garbage", true}, {"count", 1}}, BackendErrc::kBadAnswer);
  expectError({{"drop", true}, {"count", 1}}, BackendErrc::kUnreachable);
  expectError({{"delayMs", 4000}, {"count", 1}}, BackendErrc::kTimeout);

  // The write happened but its answer was lost: the retry adopts it.
  expectError({{"status", 500}, {"after", true}, {"methods", {"POST"}}, {"count", 1}}, BackendErrc::kUnreachable);
  ASSERT_TRUE(api_.clearFault());
  EXPECT_EQ(claim(k, ClaimKind::kBlock, "b1", "node-a").state, ClaimState::kAdopted);

  // A call of several requests (a renewal of three claims) shares one deadline.
  claim(k, ClaimKind::kBlock, "b2", "node-a");
  claim(k, ClaimKind::kBlock, "b3", "node-a");
  fault({{"delayMs", 300}});
  const auto start = std::chrono::steady_clock::now();
  const auto r = k.renew(
      "node-a", "p0",
      {{ClaimKind::kBlock, "b1", "", ""}, {ClaimKind::kBlock, "b2", "", ""}, {ClaimKind::kBlock, "b3", "", ""}});
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(api_.clearFault());
  ASSERT_FALSE(r) << "six requests of 300 ms each within 1000 ms";
  EXPECT_EQ(r.error().kind, BackendErrc::kTimeout) << r.error().describe();
  EXPECT_LT(took, 1500ms);

  // Nobody listening: unreachable.
  o.server = "http://127.0.0.1:1";
  K down(http_, o);
  const auto nothing = down.list(ClaimKind::kBlock, "p0", std::nullopt);
  ASSERT_FALSE(nothing);
  EXPECT_EQ(nothing.error().kind, BackendErrc::kUnreachable) << nothing.error().describe();
}

}  // namespace
}  // namespace ibcni::ipam
