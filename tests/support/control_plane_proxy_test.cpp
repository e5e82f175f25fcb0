// SPDX-License-Identifier: Apache-2.0
// The fault proxy in front of the real kube-apiserver (control_plane.h, api_proxy.js), shown to do
// what the Kubernetes tests rely on: a client's token passed on to the real authorizer (401, 403,
// 201); each fault (a 500 with its message, garbage, a dropped connection, a slow answer, a lost
// answer whose write happened) applied the number of times asked and to the methods asked; the
// requests counted per verb and resource; and allValid() failing on what the server refuses as
// invalid (422) and on what it only warns about (an unknown field), which is how every Kubernetes
// test proves that the plugin's bodies are valid.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "support/control_plane.h"

namespace ibcni::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

class ApiProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ControlPlane::built()) {
      GTEST_SKIP() << ControlPlane::kNotBuilt;
    }
    ASSERT_TRUE(startApi(cp_, api_));
    auto ns = api_.freshNamespace("proxy");
    ASSERT_TRUE(ns) << ns.error();
    ns_ = *ns;
    auto token = api_.serviceAccount(ns_, "ibcni", leaseRules());
    ASSERT_TRUE(token) << token.error();
    token_ = *token;
    api_.clearStats();
  }

  std::string leases() const { return "/apis/coordination.k8s.io/v1/namespaces/" + ns_ + "/leases"; }
  static json lease(const std::string& name) {
    return {{"apiVersion", "coordination.k8s.io/v1"},
            {"kind", "Lease"},
            {"metadata", {{"name", name}}},
            {"spec", {{"holderIdentity", "node-a"}}}};
  }

  ControlPlane cp_;
  ApiProxy api_;
  std::string ns_;
  std::string token_;
};

TEST_F(ApiProxyTest, TheClientsTokenMeetsTheRealAuthorizer) {
  EXPECT_EQ(api_.call("GET", leases(), nullptr, "not-a-token").first, 401);
  EXPECT_EQ(api_.call("GET", "/api/v1/namespaces/" + ns_ + "/secrets", nullptr, token_).first, 403);
  EXPECT_EQ(api_.call("POST", leases(), lease("l1"), token_).first, 201);
  EXPECT_EQ(api_.call("GET", leases() + "/l1", nullptr, token_).first, 200);
  const json s = api_.stats();
  EXPECT_EQ(s["list leases"]["byCode"]["401"], 1) << s.dump();
  EXPECT_EQ(s["list secrets"]["byCode"]["403"], 1) << s.dump();
  EXPECT_EQ(s["create leases"]["byCode"]["201"], 1) << s.dump();
  EXPECT_EQ(s["get leases"]["byCode"]["200"], 1) << s.dump();
  EXPECT_TRUE(api_.allValid());
}

TEST_F(ApiProxyTest, EachFaultIsAppliedAsAskedAndThenDisarmed) {
  ASSERT_TRUE(api_.fault({{"status", 503}, {"message", "etcd unavailable"}, {"count", 2}}));
  for (int i = 0; i < 2; ++i) {
    const auto a = api_.call("GET", leases(), nullptr, token_);
    EXPECT_EQ(a.first, 503);
    EXPECT_EQ(a.second.value("message", ""), "etcd unavailable");
  }
  EXPECT_FALSE(api_.faultArmed()) << "count 2: spent";
  EXPECT_EQ(api_.call("GET", leases(), nullptr, token_).first, 200);

  ASSERT_TRUE(api_.fault({{"garbage", true}, {"methods", {"POST"}}, {"count", 1}}));
  EXPECT_EQ(api_.call("GET", leases(), nullptr, token_).first, 200) << "not a POST: passed on";
  const auto garbage = api_.call("POST", leases(), lease("g"), token_);
  EXPECT_EQ(garbage.first, 200);
  EXPECT_TRUE(garbage.second.is_discarded()) << "not JSON";
  EXPECT_EQ(api_.call("GET", leases() + "/g", nullptr, token_).first, 404) << "garbage without after: not written";

  ASSERT_TRUE(api_.fault({{"drop", true}, {"count", 1}}));
  EXPECT_EQ(api_.call("GET", leases(), nullptr, token_).first, 0) << "connection closed without an answer";

  ASSERT_TRUE(api_.fault({{"delayMs", 600}, {"count", 1}}));
  const auto start = Clock::now();
  EXPECT_EQ(api_.call("GET", leases(), nullptr, token_).first, 200);
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(600));

  // A lost answer: the write happened, the client saw a 500.
  ASSERT_TRUE(api_.fault({{"status", 500}, {"after", true}, {"methods", {"POST"}}, {"count", 1}}));
  EXPECT_EQ(api_.call("POST", leases(), lease("lost"), token_).first, 500);
  EXPECT_EQ(api_.call("GET", leases() + "/lost", nullptr, token_).first, 200) << "the write happened";
  EXPECT_TRUE(api_.idle());
  EXPECT_EQ(api_.inflight(), 0);
}

TEST_F(ApiProxyTest, AllValidFailsOnWhatTheServerRefusesOrWarnsAbout) {
  ASSERT_EQ(api_.call("POST", leases(), lease("ok"), token_).first, 201);
  EXPECT_TRUE(api_.allValid());

  json unknown = lease("unknown");
  unknown["spec"]["holderIdentityy"] = "typo";  // dropped by the server, with a warning
  ASSERT_EQ(api_.call("POST", leases(), unknown, token_).first, 201);
  const auto warned = api_.allValid();
  EXPECT_FALSE(warned);
  EXPECT_NE(std::string(warned.message()).find("holderIdentityy"), std::string::npos) << warned.message();

  api_.clearStats();
  json invalid = lease("invalid");
  invalid["spec"]["leaseDurationSeconds"] = -5;  // the server's validation: must be greater than 0
  EXPECT_EQ(api_.call("POST", leases(), invalid, token_).first, 422);
  const auto refused = api_.allValid();
  EXPECT_FALSE(refused);
  EXPECT_NE(std::string(refused.message()).find("create leases 422"), std::string::npos) << refused.message();

  api_.clearStats();
  EXPECT_FALSE(api_.allValid()) << "no request at all is not a proof";
}

}  // namespace
}  // namespace ibcni::testing
