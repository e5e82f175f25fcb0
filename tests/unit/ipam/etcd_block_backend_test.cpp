// SPDX-License-Identifier: Apache-2.0
// EtcdBlockBackend against a real etcd 3.4 (Debian's etcd-server, started by EtcdCluster on
// loopback ports of its own; label etcd) through CurlHttpClient: create-if-absent claims, adoption
// by the same node, 20 concurrent claimers of one block, listing, conditional release, the node's
// lease (expiry frees the blocks, renewal keeps them, a node notices what it lost), and a 3-member
// cluster with one and then two members stopped.
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "block_backend_print.h"
#include "ibcni/os/text.h"
#include "etcd_block_backend.h"
#include "http/curl_http_client.h"
#include "support/etcd_cluster.h"

namespace ibcni::ipam {
namespace {

using nlohmann::json;
using testing::EtcdCluster;
using namespace std::chrono_literals;

EtcdBlockBackend::Options opts(const EtcdCluster& etcd, std::chrono::seconds ttl = 60s) {
  EtcdBlockBackend::Options o;
  o.endpoints = etcd.endpoints();
  o.timeout = 3000ms;
  o.leaseTtl = ttl;
  return o;
}

// A raw gateway call (for what the backend does not do itself: revoke a lease, read a key's lease).
json raw(http::HttpClient& client, const std::string& endpoint, const std::string& path, const json& body) {
  http::Request r;
  r.method = http::Method::kPost;
  r.url = endpoint + path;
  r.body = body.dump();
  const auto answer = client.send(r);
  if (!answer) {
    ADD_FAILURE() << answer.error().describe();
    return nullptr;
  }
  return json::parse(answer->body, nullptr, false);
}

class EtcdBlockBackendTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(etcd_.start(1)); }
  EtcdCluster etcd_;
  http::CurlHttpClient http_;
};

TEST_F(EtcdBlockBackendTest, ASecondNodeSeesTheBlockHeldByTheFirst) {
  EtcdBlockBackend a(http_, opts(etcd_));
  EtcdBlockBackend b(http_, opts(etcd_));
  const auto ca = a.claim("p0", "10.1.0.0-27", "node-a");
  ASSERT_TRUE(ca) << ca.error().describe();
  EXPECT_EQ(ca->state, ClaimState::kClaimed);
  EXPECT_FALSE(ca->holder.version.empty());
  EXPECT_NE(a.leaseId(), 0);

  const auto cb = b.claim("p0", "10.1.0.0-27", "node-b");
  ASSERT_TRUE(cb) << cb.error().describe();
  EXPECT_EQ(cb->state, ClaimState::kHeldByOther);
  EXPECT_EQ(cb->holder.node, "node-a");
  EXPECT_EQ(cb->holder.version, ca->holder.version);
  ASSERT_TRUE(cb->holder.claimedAt);
  EXPECT_LT(std::chrono::abs(std::chrono::system_clock::now() - *cb->holder.claimedAt), 60s);

  // The same block of another pool is another block.
  const auto other = b.claim("p1", "10.1.0.0-27", "node-b");
  ASSERT_TRUE(other) << other.error().describe();
  EXPECT_EQ(other->state, ClaimState::kClaimed);
}

TEST_F(EtcdBlockBackendTest, TheSameNodeClaimingAgainAdoptsNeverClaimsTwice) {
  EtcdBlockBackend a(http_, opts(etcd_));
  const auto first = a.claim("p0", "b1", "node-a");
  ASSERT_TRUE(first) << first.error().describe();
  ASSERT_EQ(first->state, ClaimState::kClaimed);
  const auto again = a.claim("p0", "b1", "node-a");
  ASSERT_TRUE(again) << again.error().describe();
  EXPECT_EQ(again->state, ClaimState::kAdopted);
  EXPECT_EQ(again->holder.version, first->holder.version) << "adoption on the same lease writes nothing";

  // The node restarted without its lease ID: a new lease; the block is adopted onto it, so that
  // revoking the old lease does not take the block away.
  const std::int64_t oldLease = a.leaseId();
  EtcdBlockBackend restarted(http_, opts(etcd_));
  const auto adopted = restarted.claim("p0", "b1", "node-a");
  ASSERT_TRUE(adopted) << adopted.error().describe();
  EXPECT_EQ(adopted->state, ClaimState::kAdopted);
  EXPECT_NE(restarted.leaseId(), oldLease);
  EXPECT_NE(adopted->holder.version, first->holder.version);
  const json revoked = raw(http_, etcd_.endpoint(0), "/v3/lease/revoke", {{"ID", std::to_string(oldLease)}});
  ASSERT_TRUE(revoked.is_object() && !revoked.contains("error")) << revoked.dump();
  const auto list = restarted.list("p0");
  ASSERT_TRUE(list) << list.error().describe();
  ASSERT_EQ(list->size(), 1U);
  EXPECT_EQ((*list)[0].holder.node, "node-a");
  const json range = raw(http_, etcd_.endpoint(0), "/v3/kv/range", {{"key", os::base64Encode(restarted.blockKey("p0", "b1"))}});
  ASSERT_TRUE(range.contains("kvs")) << range.dump();
  EXPECT_EQ(range["kvs"][0]["lease"], std::to_string(restarted.leaseId()));
}

TEST_F(EtcdBlockBackendTest, ThePoolDefinitionIsTheFirstOneAndOutlivesEveryLease) {
  EtcdBlockBackend a(http_, opts(etcd_));
  EtcdBlockBackend b(http_, opts(etcd_));
  const auto first = a.definePool("p0", {"v4 10.1.0.0/16 /27", "network ib0 on node a"});
  ASSERT_TRUE(first) << first.error().describe();
  EXPECT_EQ(first->fingerprint, "v4 10.1.0.0/16 /27");
  const auto same = b.definePool("p0", {"v4 10.1.0.0/16 /27", "network ib1 on node b"});
  ASSERT_TRUE(same) << same.error().describe();
  EXPECT_EQ(same->origin, "network ib0 on node a") << "the first definition stays";
  const auto other = b.definePool("p0", {"v4 10.2.0.0/16 /27", "network ib2 on node b"});
  ASSERT_TRUE(other) << other.error().describe();
  EXPECT_EQ(other->fingerprint, "v4 10.1.0.0/16 /27");
  EXPECT_EQ(other->origin, "network ib0 on node a");
  // Not attached to a lease: a definition is the pool's, not a node's.
  const json range = raw(http_, etcd_.endpoint(0), "/v3/kv/range", {{"key", os::base64Encode("/ibcni/pools/p0/definition")}});
  ASSERT_TRUE(range.contains("kvs")) << range.dump();
  EXPECT_FALSE(range["kvs"][0].contains("lease")) << range.dump();
  // Another pool has its own.
  const auto p1 = b.definePool("p1", {"v4 10.2.0.0/16 /27", "network ib2 on node b"});
  ASSERT_TRUE(p1) << p1.error().describe();
  EXPECT_EQ(p1->fingerprint, "v4 10.2.0.0/16 /27");
  // The definition is not a block.
  const auto blocks = a.list("p0");
  ASSERT_TRUE(blocks) << blocks.error().describe();
  EXPECT_TRUE(blocks->empty());
}

TEST_F(EtcdBlockBackendTest, TakingOverALiveNodesBlockFailsAndAnExpiredOnesSucceeds) {
  EtcdBlockBackend a(http_, opts(etcd_));
  EtcdBlockBackend b(http_, opts(etcd_));
  const auto held = a.claim("p0", "b1", "node-a");
  ASSERT_TRUE(held && held->state == ClaimState::kClaimed);
  const auto refused = b.takeOver("p0", "b1", "node-b", held->holder);
  ASSERT_TRUE(refused) << refused.error().describe();
  EXPECT_EQ(refused->state, ClaimState::kHeldByOther);
  EXPECT_EQ(refused->holder.node, "node-a");
  const json revoked = raw(http_, etcd_.endpoint(0), "/v3/lease/revoke", {{"ID", std::to_string(a.leaseId())}});
  ASSERT_TRUE(revoked.is_object() && !revoked.contains("error")) << revoked.dump();
  const auto taken = b.takeOver("p0", "b1", "node-b", held->holder);
  ASSERT_TRUE(taken) << taken.error().describe();
  EXPECT_EQ(taken->state, ClaimState::kClaimed);
  EXPECT_EQ(taken->holder.node, "node-b");
}

TEST_F(EtcdBlockBackendTest, TwentyConcurrentClaimersOfOneBlockHaveExactlyOneWinner) {
  constexpr int kNodes = 20;
  std::vector<std::unique_ptr<EtcdBlockBackend>> nodes;
  for (int i = 0; i < kNodes; ++i) {
    nodes.push_back(std::make_unique<EtcdBlockBackend>(http_, opts(etcd_)));
  }
  for (const std::string block : {"b0", "b1", "b2"}) {
    std::vector<BackendResult<ClaimOutcome>> results(kNodes, std::unexpected(BackendError{}));
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < kNodes; ++i) {
      threads.emplace_back([&, i] {
        while (!go.load()) {
          std::this_thread::yield();
        }
        results[i] = nodes[i]->claim("p0", block, "node-" + std::to_string(i));
      });
    }
    go = true;
    for (auto& t : threads) {
      t.join();
    }
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
      if (results[i]->state != ClaimState::kClaimed) {
        EXPECT_EQ(results[i]->state, ClaimState::kHeldByOther);
        EXPECT_EQ(results[i]->holder.node, winner);
      }
    }
    const auto held = nodes[0]->list("p0");
    ASSERT_TRUE(held) << held.error().describe();
    const auto it = std::find_if(held->begin(), held->end(), [&](const Claim& c) { return c.name == block; });
    ASSERT_NE(it, held->end());
    EXPECT_EQ(it->holder.node, winner);
  }
}

TEST_F(EtcdBlockBackendTest, ListGivesEveryBlockOfThePoolOnly) {
  EtcdBlockBackend a(http_, opts(etcd_));
  EtcdBlockBackend b(http_, opts(etcd_));
  for (const char* blk : {"10.1.0.0-27", "10.1.0.32-27", "10.1.0.64-27"}) {
    ASSERT_TRUE(a.claim("p1", blk, "node-a"));
  }
  ASSERT_TRUE(b.claim("p1", "10.1.0.96-27", "node-b"));
  ASSERT_TRUE(b.claim("p10", "10.1.0.0-27", "node-b"));  // a pool whose name extends p1's
  ASSERT_TRUE(b.claimAddress("p1", "10.1.0.40", "node-b", "c1:ib0"));

  const auto all = a.list("p1");
  ASSERT_TRUE(all) << all.error().describe();
  std::vector<std::string> names;
  for (const auto& c : *all) {
    names.push_back(c.name + "@" + c.holder.node);
    EXPECT_FALSE(c.holder.version.empty());
    EXPECT_TRUE(c.holder.claimedAt);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"10.1.0.0-27@node-a", "10.1.0.32-27@node-a", "10.1.0.64-27@node-a",
                                             "10.1.0.96-27@node-b"}));
  const auto mine = a.listNode("p1", "node-b");
  ASSERT_TRUE(mine) << mine.error().describe();
  ASSERT_EQ(mine->size(), 1U);
  EXPECT_EQ((*mine)[0].name, "10.1.0.96-27");
  const auto addresses = a.listAddresses("p1");
  ASSERT_TRUE(addresses) << addresses.error().describe();
  ASSERT_EQ(addresses->size(), 1U);
  EXPECT_EQ((*addresses)[0].name, "10.1.0.40");
  EXPECT_EQ((*addresses)[0].holder.owner, "c1:ib0");
  const auto none = a.list("p2");
  ASSERT_TRUE(none) << none.error().describe();
  EXPECT_TRUE(none->empty());
}

TEST_F(EtcdBlockBackendTest, ReleaseIsConditionalOnHolderAndVersion) {
  EtcdBlockBackend a(http_, opts(etcd_));
  EtcdBlockBackend b(http_, opts(etcd_));
  const auto c = a.claim("p0", "b1", "node-a");
  ASSERT_TRUE(c) << c.error().describe();
  const std::string stale = std::to_string(std::stoll(c->holder.version) + 1000);
  EXPECT_EQ(a.release("p0", "b1", "node-a", stale), ReleaseOutcome::kChanged);
  EXPECT_EQ(b.release("p0", "b1", "node-b", stale), ReleaseOutcome::kNotOurs);
  auto held = b.claim("p0", "b1", "node-b");
  ASSERT_TRUE(held);
  EXPECT_EQ(held->state, ClaimState::kHeldByOther) << "a refused release leaves the block held";

  EXPECT_EQ(a.release("p0", "b1", "node-a", c->holder.version), ReleaseOutcome::kReleased);
  EXPECT_EQ(a.release("p0", "b1", "node-a", c->holder.version), ReleaseOutcome::kGone);
  held = b.claim("p0", "b1", "node-b");
  ASSERT_TRUE(held);
  EXPECT_EQ(held->state, ClaimState::kClaimed);

  // Addresses: the same, under their own key space; another owner on the same node is not adopted.
  const auto addr = a.claimAddress("p0", "fd00::5", "node-a", "c1:ib0");
  ASSERT_TRUE(addr) << addr.error().describe();
  EXPECT_EQ(addr->state, ClaimState::kClaimed);
  EXPECT_EQ(a.claimAddress("p0", "fd00::5", "node-a", "c1:ib0")->state, ClaimState::kAdopted);
  const auto otherOwner = a.claimAddress("p0", "fd00::5", "node-a", "c2:ib0");
  ASSERT_TRUE(otherOwner);
  EXPECT_EQ(otherOwner->state, ClaimState::kHeldByOther);
  EXPECT_EQ(otherOwner->holder.owner, "c1:ib0");
  EXPECT_EQ(b.releaseAddress("p0", "fd00::5", "node-b", addr->holder.version), ReleaseOutcome::kNotOurs);
  EXPECT_EQ(a.releaseAddress("p0", "fd00::5", "node-a", addr->holder.version), ReleaseOutcome::kReleased);
  EXPECT_EQ(b.claimAddress("p0", "fd00::5", "node-b", "c9:ib0")->state, ClaimState::kClaimed);
}

TEST_F(EtcdBlockBackendTest, AnExpiredLeaseFreesTheBlocksAndTheNodeLearnsWhatItLost) {
  EtcdBlockBackend a(http_, opts(etcd_, 2s));
  EtcdBlockBackend b(http_, opts(etcd_));
  ASSERT_EQ(a.claim("p0", "b1", "node-a")->state, ClaimState::kClaimed);
  ASSERT_EQ(a.claim("p0", "b2", "node-a")->state, ClaimState::kClaimed);
  ASSERT_EQ(b.claim("p0", "b1", "node-b")->state, ClaimState::kHeldByOther);

  // No renewal: the lease expires (2 s TTL) and node-b can take b1.
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  ClaimState state = ClaimState::kHeldByOther;
  while (state != ClaimState::kClaimed && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(250ms);
    const auto c = b.claim("p0", "b1", "node-b");
    ASSERT_TRUE(c) << c.error().describe();
    state = c->state;
  }
  ASSERT_EQ(state, ClaimState::kClaimed) << "node-a's lease never expired";

  // node-a's next renewal finds its lease gone: b2 (free) is claimed again, b1 is reported lost.
  const std::int64_t oldLease = a.leaseId();
  const std::vector<ClaimRef> held{{ClaimKind::kBlock, "p0", "b1", ""}, {ClaimKind::kBlock, "p0", "b2", ""}};
  const auto r = a.renew("node-a", held);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_FALSE(r->renewed);
  EXPECT_TRUE(r->reestablished);
  EXPECT_NE(a.leaseId(), oldLease);
  EXPECT_EQ(r->kept, std::vector<ClaimRef>{held[1]});
  ASSERT_EQ(r->lost.size(), 1U);
  EXPECT_EQ(r->lost[0].ref, held[0]);
  ASSERT_TRUE(r->lost[0].holder);
  EXPECT_EQ(r->lost[0].holder->node, "node-b");
  const auto b2 = b.claim("p0", "b2", "node-b");
  ASSERT_TRUE(b2);
  EXPECT_EQ(b2->state, ClaimState::kHeldByOther);
  EXPECT_EQ(b2->holder.node, "node-a");
}

TEST_F(EtcdBlockBackendTest, ALeaseGoneBeforeAClaimIsGrantedAgainAndReported) {
  std::vector<std::int64_t> granted;
  auto o = opts(etcd_);
  o.onLeaseGranted = [&](std::int64_t id) { granted.push_back(id); };
  EtcdBlockBackend a(http_, o);
  ASSERT_EQ(a.claim("p0", "b1", "node-a")->state, ClaimState::kClaimed);
  ASSERT_EQ(granted.size(), 1U);
  EXPECT_EQ(granted[0], a.leaseId());
  const json revoked = raw(http_, etcd_.endpoint(0), "/v3/lease/revoke", {{"ID", std::to_string(granted[0])}});
  ASSERT_TRUE(revoked.is_object() && !revoked.contains("error")) << revoked.dump();

  // The put names a lease etcd no longer has: a new one is granted (and handed to the caller)
  // and the claim goes through on it.
  const auto c = a.claim("p0", "b2", "node-a");
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kClaimed);
  ASSERT_EQ(granted.size(), 2U);
  EXPECT_NE(granted[1], granted[0]);
  EXPECT_EQ(a.leaseId(), granted[1]);
  const auto mine = a.listNode("p0", "node-a");
  ASSERT_TRUE(mine) << mine.error().describe();
  ASSERT_EQ(mine->size(), 1U) << "b1 went with the revoked lease";
  EXPECT_EQ((*mine)[0].name, "b2");
}

TEST_F(EtcdBlockBackendTest, RenewalKeepsTheBlocks) {
  EtcdBlockBackend a(http_, opts(etcd_, 2s));
  EtcdBlockBackend b(http_, opts(etcd_));
  ASSERT_EQ(a.claim("p0", "b1", "node-a")->state, ClaimState::kClaimed);
  const std::int64_t lease = a.leaseId();
  const std::vector<ClaimRef> held{{ClaimKind::kBlock, "p0", "b1", ""}};
  for (int i = 0; i < 12; ++i) {  // 6 s: three TTLs
    std::this_thread::sleep_for(500ms);
    const auto r = a.renew("node-a", held);
    ASSERT_TRUE(r) << r.error().describe();
    ASSERT_TRUE(r->renewed) << "renewal " << i;
    EXPECT_EQ(r->kept, held);
  }
  EXPECT_EQ(a.leaseId(), lease);
  const auto c = b.claim("p0", "b1", "node-b");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->state, ClaimState::kHeldByOther);
  EXPECT_EQ(c->holder.node, "node-a");
}

TEST(EtcdBlockBackendCluster, ClaimsWithOneMemberDownFailWithinTheTimeoutWithTwoAndWorkAgain) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.start(3));
  http::CurlHttpClient http;
  auto o = opts(etcd);
  o.timeout = 2000ms;
  EtcdBlockBackend a(http, o);
  EtcdBlockBackend b(http, o);
  ASSERT_EQ(a.claim("p0", "b0", "node-a")->state, ClaimState::kClaimed);

  // Member 0 (the first endpoint) stopped: the next endpoints serve.
  ASSERT_TRUE(etcd.stopMember(0));
  auto c = a.claim("p0", "b1", "node-a");
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kClaimed);
  c = b.claim("p0", "b1", "node-b");
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kHeldByOther);

  // Two of three stopped: no quorum. The claim fails within the timeout, naming the endpoints.
  ASSERT_TRUE(etcd.stopMember(1));
  const auto t0 = std::chrono::steady_clock::now();
  c = a.claim("p0", "b2", "node-a");
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(c) << "claimed without quorum";
  EXPECT_TRUE(c.error().kind == BackendErrc::kTimeout || c.error().kind == BackendErrc::kUnreachable)
      << c.error().describe();
  EXPECT_LT(took, 2000ms + 1000ms) << c.error().describe();
  const auto err = toCniError(c.error(), "claiming block b2 of pool p0");
  EXPECT_EQ(err.code, cni::Errc::kTryAgainLater);
  EXPECT_NE(err.msg.find(etcd.endpoint(2)), std::string::npos) << err.msg;
  std::cout << "with two of three members stopped, after " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
            << " ms: " << err.msg << "\n";
  EXPECT_NE(err.msg.find("claiming block b2 of pool p0"), std::string::npos) << err.msg;

  // Back: claims work again (after the election); the failed claim left nothing half-claimed:
  // b2 is free or node-a's, never held by anyone else, and node-a's next claim settles it.
  ASSERT_TRUE(etcd.startMember(0));
  ASSERT_TRUE(etcd.startMember(1));
  ASSERT_TRUE(etcd.waitHealthy());
  BackendResult<ClaimOutcome> again = std::unexpected(BackendError{});
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    again = a.claim("p0", "b2", "node-a");
    if (again) {
      break;
    }
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_TRUE(again) << again.error().describe();
  EXPECT_TRUE(again->state == ClaimState::kClaimed || again->state == ClaimState::kAdopted);
  c = b.claim("p0", "b2", "node-b");
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kHeldByOther);
  EXPECT_EQ(c->holder.node, "node-a");
  const auto all = b.list("p0");
  ASSERT_TRUE(all) << all.error().describe();
  EXPECT_EQ(all->size(), 3U);
}

}  // namespace
}  // namespace ibcni::ipam
