// SPDX-License-Identifier: Apache-2.0
// EtcdCluster against Debian's etcd 3.4: the JSON gateway the cluster-wide IPAM talks to (put,
// range, a create-if-absent transaction), and a 3-member cluster that serves writes with one member
// down, refuses them without quorum and serves again once the members are back.
#include "support/etcd_cluster.h"
#include "ibcni/os/text.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "support/exec_program.h"

namespace ibcni::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

struct GatewayReply {
  ProgramRun run;
  json body;  // null when curl failed or the reply is no JSON
  [[nodiscard]] bool ok() const { return run.status == 0 && body.is_object() && !body.contains("error"); }
  [[nodiscard]] std::string describe() const { return run.describe(); }
};

// POST `request` to `endpoint` + `path` (for example "/v3/kv/put") with curl.
GatewayReply post(const std::string& endpoint, const std::string& path, const json& request,
                  std::chrono::seconds maxTime = 5s) {
  GatewayReply reply;
  const auto curl = findProgram("curl");
  if (!curl) {
    reply.run.err = "curl is not installed (scripts/install-deps.sh installs it)";
    return reply;
  }
  reply.run = runProgram(std::vector<std::string>{*curl, "-sS", "--max-time", std::to_string(maxTime.count()), "-X",
                                                  "POST", "--data-binary", "@-", endpoint + path},
                         {kPathEnv}, request.dump(), maxTime + 5s);
  if (reply.run.status == 0) {
    reply.body = json::parse(reply.run.out, nullptr, false);
    if (reply.body.is_discarded()) {
      reply.body = nullptr;
    }
  }
  return reply;
}

GatewayReply put(const std::string& endpoint, const std::string& key, const std::string& value,
                 std::chrono::seconds maxTime = 5s) {
  return post(endpoint, "/v3/kv/put", {{"key", os::base64Encode(key)}, {"value", os::base64Encode(value)}}, maxTime);
}

// The value stored at `key`, read through `endpoint` (std::nullopt: absent or the read failed).
std::optional<std::string> get(const std::string& endpoint, const std::string& key) {
  const auto reply = post(endpoint, "/v3/kv/range", {{"key", os::base64Encode(key)}});
  if (!reply.ok() || !reply.body.contains("kvs") || reply.body["kvs"].size() != 1) {
    return std::nullopt;
  }
  return os::base64Decode(reply.body["kvs"][0].value("value", ""));
}

// Retries the put until it succeeds (a leader election may be in progress) or `within` passed.
GatewayReply putEventually(const std::string& endpoint, const std::string& key, const std::string& value,
                           std::chrono::seconds within = 15s) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  GatewayReply reply;
  do {
    reply = put(endpoint, key, value, 3s);
    if (reply.ok()) {
      break;
    }
    std::this_thread::sleep_for(100ms);
  } while (std::chrono::steady_clock::now() < deadline);
  return reply;
}

// The index of the member that is the leader, or -1.
int leaderIndex(const EtcdCluster& etcd) {
  std::string leader;
  std::vector<std::string> ids(static_cast<std::size_t>(etcd.size()));
  for (int i = 0; i < etcd.size(); ++i) {
    const auto status = post(etcd.endpoint(i), "/v3/maintenance/status", json::object());
    if (!status.ok()) {
      continue;
    }
    ids[static_cast<std::size_t>(i)] = status.body["header"].value("member_id", "");
    leader = status.body.value("leader", leader);
  }
  for (int i = 0; i < etcd.size(); ++i) {
    if (!leader.empty() && ids[static_cast<std::size_t>(i)] == leader) {
      return i;
    }
  }
  return -1;
}

TEST(EtcdCluster, Base64RoundTrips) {
  EXPECT_EQ(os::base64Encode(""), "");
  EXPECT_EQ(os::base64Encode("f"), "Zg==");
  EXPECT_EQ(os::base64Encode("fo"), "Zm8=");
  EXPECT_EQ(os::base64Encode("foo"), "Zm9v");
  EXPECT_EQ(os::base64Encode(std::string("\xff\x00\x10", 3)), "/wAQ");
  EXPECT_EQ(os::base64Decode("Zm9vYg=="), "foob");
  EXPECT_EQ(os::base64Decode("/wAQ"), std::string("\xff\x00\x10", 3));
  EXPECT_EQ(os::base64Decode("Zm9"), std::nullopt);
  EXPECT_EQ(os::base64Decode("Zm=v"), std::nullopt);
  EXPECT_EQ(os::base64Decode("Zm9*"), std::nullopt);
}

TEST(EtcdCluster, FailsClearlyWhenEtcdIsNotInstalled) {
  const std::string saved = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  ::setenv("PATH", "/nonexistent-dir-without-etcd", 1);
  EtcdCluster etcd;
  const auto started = etcd.start(1);
  ::setenv("PATH", saved.c_str(), 1);
  ASSERT_FALSE(started);
  EXPECT_NE(std::string(started.message()).find("etcd is not installed"), std::string::npos) << started.message();
  EXPECT_NE(std::string(started.message()).find("etcd-server"), std::string::npos) << started.message();
}

TEST(EtcdCluster, SingleMemberPutsAndReadsThroughTheJsonGateway) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.start(1));
  ASSERT_EQ(etcd.size(), 1);
  const std::string ep = etcd.endpoint(0);
  EXPECT_EQ(etcd.endpointList(), ep);
  EXPECT_EQ(ep.rfind("http://127.0.0.1:", 0), 0U) << ep;
  EXPECT_NE(ep, "http://127.0.0.1:2379") << "never etcd's default port";

  EXPECT_EQ(get(ep, "/ibcni/test/key"), std::nullopt);
  const auto reply = put(ep, "/ibcni/test/key", "value \x01 with bytes");
  ASSERT_TRUE(reply.ok()) << reply.describe();
  // int64 fields arrive as strings.
  ASSERT_TRUE(reply.body["header"]["revision"].is_string()) << reply.body.dump();
  EXPECT_GT(std::stoll(reply.body["header"]["revision"].get<std::string>()), 1);
  EXPECT_EQ(get(ep, "/ibcni/test/key"), "value \x01 with bytes");
}

TEST(EtcdCluster, CreateIfAbsentTransactionSucceedsOnlyOnce) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.start(1));
  const std::string ep = etcd.endpoint(0);
  const auto claim = [&](const std::string& owner) {
    const std::string key = os::base64Encode("/ibcni/test/block/10.0.0.0-26");
    return post(ep, "/v3/kv/txn",
                {{"compare", {{{"key", key}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}}}},
                 {"success", {{{"request_put", {{"key", key}, {"value", os::base64Encode(owner)}}}}}},
                 {"failure", {{{"request_range", {{"key", key}}}}}}});
  };
  const auto first = claim("node-a");
  ASSERT_TRUE(first.ok()) << first.describe();
  EXPECT_EQ(first.body.value("succeeded", false), true) << first.body.dump();
  ASSERT_TRUE(first.body["responses"][0].contains("response_put")) << first.body.dump();

  const auto second = claim("node-b");
  ASSERT_TRUE(second.ok()) << second.describe();
  // A failed comparison: the gateway leaves "succeeded" out (false fields are omitted), and the
  // failure branch shows who holds the key.
  EXPECT_FALSE(second.body.contains("succeeded")) << second.body.dump();
  ASSERT_TRUE(second.body["responses"][0].contains("response_range")) << second.body.dump();
  const auto& kvs = second.body["responses"][0]["response_range"]["kvs"];
  ASSERT_EQ(kvs.size(), 1U) << second.body.dump();
  EXPECT_EQ(os::base64Decode(kvs[0].value("value", "")), "node-a");
  EXPECT_EQ(get(ep, "/ibcni/test/block/10.0.0.0-26"), "node-a");
}

TEST(EtcdCluster, ThreeMembersServeWithOneDownRefuseWithoutQuorumAndRecover) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.start(3));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(etcd.startupTime()).count();
  std::cout << "3-member etcd cluster healthy after " << ms << " ms\n";
  RecordProperty("startup_ms", std::to_string(ms));
  ASSERT_EQ(etcd.size(), 3);
  ASSERT_EQ(etcd.endpoints().size(), 3U);
  EXPECT_EQ(etcd.endpointList(), etcd.endpoint(0) + "," + etcd.endpoint(1) + "," + etcd.endpoint(2));

  auto reply = put(etcd.endpoint(0), "k", "v0");
  ASSERT_TRUE(reply.ok()) << reply.describe();

  // The leader goes first: the other two elect a new one and keep accepting writes.
  const int leader = leaderIndex(etcd);
  ASSERT_GE(leader, 0) << "no member reports a leader";
  ASSERT_TRUE(etcd.stopMember(leader));
  EXPECT_FALSE(etcd.running(leader));
  const int survivor = (leader + 1) % 3;
  const int other = (leader + 2) % 3;
  reply = putEventually(etcd.endpoint(survivor), "k", "v1");
  ASSERT_TRUE(reply.ok()) << "no write with one member of three stopped: " << reply.describe() << "\n"
                          << etcd.logTail(survivor);
  EXPECT_EQ(get(etcd.endpoint(other), "k"), "v1");

  // Two of three stopped: no quorum, so no write is acknowledged (the gateway answers an error or
  // nothing until curl gives up).
  ASSERT_TRUE(etcd.stopMember(other));
  for (int attempt = 0; attempt < 2; ++attempt) {
    reply = put(etcd.endpoint(survivor), "k", "lost", 2s);
    EXPECT_FALSE(reply.ok()) << "a write was acknowledged without quorum: " << reply.run.out;
  }

  ASSERT_TRUE(etcd.startMember(leader));
  ASSERT_TRUE(etcd.startMember(other));
  ASSERT_TRUE(etcd.waitHealthy());
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(etcd.running(i));
  }
  reply = putEventually(etcd.endpoint(leader), "k", "v2");
  ASSERT_TRUE(reply.ok()) << "no write once quorum is back: " << reply.describe();
  for (int i = 0; i < 3; ++i) {
    // The gateway's range is linearizable: every member answers with the last write.
    EXPECT_EQ(get(etcd.endpoint(i), "k"), "v2") << "member " << i;
  }
}

TEST(EtcdCluster, StopsEveryMemberAndRemovesItsDirectory) {
  std::string dir;
  std::string ep;
  {
    EtcdCluster etcd;
    ASSERT_TRUE(etcd.start(1));
    dir = etcd.dir();
    ep = etcd.endpoint(0);
    ASSERT_TRUE(std::filesystem::exists(dir + "/m0/data"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
  const auto reply = post(ep, "/v3/kv/range", {{"key", os::base64Encode("k")}}, 2s);
  EXPECT_NE(reply.run.status, 0) << "the member still answers after the cluster was destroyed: " << reply.run.out;
}

}  // namespace
}  // namespace ibcni::testing
