// SPDX-License-Identifier: Apache-2.0
// ibcni-ipam's cluster mode in process (cluster_fixture.h) with the kubernetes backend against a
// real kube-apiserver (tests/support/control_plane.h, the fixture's): the default backend end to
// end (a new node finds no free block and asks; a gone node's block is taken over by a live node's
// pass and given back), and case 2 of ipam/README.md "Cluster safety": releases after renewals,
// reserved addresses of gone nodes, a reserved claim whose answer was lost.
#include "cluster_fixture.h"

namespace ibcni::ipam::testing {
namespace {

using ClusterPoolTest = ClusterFixture;

// The kubernetes backend through its kubeconfig, against a real kube-apiserver:
// the default backend works end to end; a new node finds no free block and asks; the gone node's
// block is taken over by a live node's pass (Node deleted, Lease unrenewed) and given back; the
// new node then gets it.
TEST_F(ClusterPoolTest, KubernetesLeasesServeThePoolAndAGoneNodesBlockGoesToTheNodeThatAsked) {
  if (!K8sWorld::available()) {
    GTEST_SKIP() << ::ibcni::testing::ControlPlane::kNotBuilt;
  }
  K8sWorld k8s;
  ASSERT_TRUE(k8s.start(tmp_.path()));
  NetSpec s;
  s.network = "ibk";
  s.ranges = R"([[{"subnet": "10.58.0.0/27"}]])";
  k8s.into(s);
  s.extraCluster = R"(, "leaseDurationSeconds": 10)";
  for (const char* n : {"node-a", "node-b", "node-c"}) {
    k8s.addNode(n);
  }
  ASSERT_TRUE(add("node-a", "c0", conf("node-a", s)));
  ASSERT_TRUE(add("node-b", "c0", conf("node-b", s)));
  auto refused = add("node-c", "c0", conf("node-c", s));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, cni::Errc::kTryAgainLater) << refused.error().msg;
  // node-a is gone: its pods with it, its Node deleted, its Lease no longer renewed.
  kill("node-a", "c0");
  k8s.deleteNode("node-a");
  const std::string lease = KubernetesBlockBackend::leaseName(ClaimKind::kBlock, "ibk", owned("node-a", "ibk").at(0));
  ASSERT_TRUE(k8s.age(lease));
  auto p = pass("node-b", conf("node-b", s));
  ASSERT_TRUE(p) << p.error().msg;
  EXPECT_EQ(p->upkeep->takenOver.size(), 1U) << "node-a's block taken over by node-b's pass";
  EXPECT_EQ(p->upkeep->releasedBlocks.size(), 1U) << "and given back at once: empty, and node-c asked";
  auto got = add("node-c", "c1", conf("node-c", s));
  ASSERT_TRUE(got) << got.error().msg;
  EXPECT_EQ(owned("node-c", "ibk").size(), 1U);
  EXPECT_EQ(owned("node-b", "ibk").size(), 1U) << "node-b keeps its own";
  EXPECT_TRUE(k8s.allValid());
}

// --- Case 2: Kubernetes -----------------------------------------------------------------------

class K8sSafetyTest : public ClusterFixture {
 protected:
  void SetUp() override {
    if (!K8sWorld::available()) {
      GTEST_SKIP() << ::ibcni::testing::ControlPlane::kNotBuilt;
    }
    ClusterFixture::SetUp();
    ASSERT_TRUE(k8s_.start(tmp_.path()));
    for (const char* n : {"node-a", "node-b", "node-c"}) {
      k8s_.addNode(n);
    }
  }
  std::string kconf(const std::string& n, const std::string& extraCluster = "", const std::string& extraIpam = "") {
    NetSpec s;
    s.network = "ibk";
    k8s_.into(s);
    s.extraCluster = extraCluster;
    s.extraIpam = extraIpam;
    return conf(n, s);
  }
  K8sWorld k8s_;
};

// A release after a renewal (which changed the resourceVersion) deletes the Lease; the ledger
// drops it only then.
TEST_F(K8sSafetyTest, AReleaseAfterARenewalGivesTheLeaseBack) {
  const std::string extra = R"(, "releaseAfterSeconds": 0)";
  ASSERT_TRUE(add("node-a", "c0", kconf("node-a", extra)));
  ASSERT_TRUE(pass("node-a", kconf("node-a", extra)));  // renewed: a new resourceVersion
  ASSERT_EQ(k8s_.leases("ibcni-ibk--b--").size(), 1U);
  ASSERT_TRUE(del("node-a", "c0", kconf("node-a", extra)));
  auto p = pass("node-a", kconf("node-a", extra));
  ASSERT_TRUE(p) << p.error().msg;
  EXPECT_EQ(p->upkeep->releasedBlocks.size(), 1U);
  EXPECT_TRUE(k8s_.leases("ibcni-ibk--b--").empty()) << "the Lease is gone, not only the ledger's entry";
  EXPECT_TRUE(ledger("node-a", "ibk").blocks.empty());
  EXPECT_TRUE(k8s_.allValid());
}

// A StatefulSet pod whose node is gone (Node deleted, its Leases unrenewed) gets its reserved
// address on another node: the claim is taken over by the same rule as blocks.
TEST_F(K8sSafetyTest, AReservedAddressOfAGoneNodeIsTakenOverByThePodsNewNode) {
  const std::string res = R"(, "reservations": {"prod/db-0": "10.56.0.200"})";
  const std::string pod = "K8S_POD_NAMESPACE=prod;K8S_POD_NAME=db-0";
  auto a = add("node-a", "c1", kconf("node-a", "", res), pod);
  ASSERT_TRUE(a) << a.error().msg;
  auto held = add("node-b", "c2", kconf("node-b", "", res), pod);
  ASSERT_FALSE(held) << "node-a lives: the address is its pod's";
  kill("node-a", "c1");
  k8s_.deleteNode("node-a");
  ASSERT_TRUE(k8s_.age(KubernetesBlockBackend::leaseName(ClaimKind::kAddress, "ibk", "10.56.0.200")));
  auto b = add("node-b", "c2", kconf("node-b", "", res), pod);
  ASSERT_TRUE(b) << b.error().msg;
  EXPECT_EQ(address(b), "10.56.0.200");
  EXPECT_EQ(k8s_.leases("ibcni-ibk--a--").begin()->second, "node-b");
}

// A reserved-address claim whose answer was lost (the ADD failed) is adopted by the pod's next
// sandbox: the claim names the pod.
TEST_F(K8sSafetyTest, AReservedClaimWhoseAnswerWasLostIsAdoptedByThePodsNextSandbox) {
  const std::string res = R"(, "reservations": {"prod/db-0": "10.56.0.200"})";
  const std::string pod = "K8S_POD_NAMESPACE=prod;K8S_POD_NAME=db-0";
  http_.loseMethod = http::Method::kPost;
  http_.loseAnswers = 1;
  http_.loseIf = "10.56.0.200";
  auto lost = add("node-a", "sandbox-1", kconf("node-a", "", res), pod);
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().code, cni::Errc::kTryAgainLater);
  ASSERT_TRUE(del("node-a", "sandbox-1", kconf("node-a", "", res)));  // the runtime's DEL after a failed ADD
  auto retry = add("node-a", "sandbox-2", kconf("node-a", "", res), pod);
  ASSERT_TRUE(retry) << retry.error().msg;
  EXPECT_EQ(address(retry), "10.56.0.200");
  auto p = pass("node-a", kconf("node-a", "", res));
  ASSERT_TRUE(p) << p.error().msg;
  EXPECT_TRUE(p->upkeep->releasedAddresses.empty()) << "held by the pod's live sandbox";
}

}  // namespace
}  // namespace ibcni::ipam::testing
