// SPDX-License-Identifier: Apache-2.0
// EtcdBlockBackend over a scripted http::HttpClient: what it sends (paths, base64 keys, int64 as
// strings, the node's lease) and how it reads what etcd's gateway may answer, including answers a
// real etcd gives only when broken: garbage JSON, a 500, omitted fields, unreachable endpoints,
// a lease that expired between grant and put. The same operations against a real etcd:
// etcd_block_backend_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "block_backend_print.h"
#include "ibcni/os/text.h"
#include "etcd_block_backend.h"
#include "support/etcd_cluster.h"

namespace ibcni::ipam {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

/// Answers each request with the next scripted answer (or the handler's), and records them.
class ScriptedClient final : public http::HttpClient {
 public:
  using Answer = http::HttpResult<http::Response>;
  using Handler = std::function<Answer(const http::Request&)>;

  void push(Answer a) { script_.emplace_back([a](const http::Request&) { return a; }); }
  void push(Handler h) { script_.push_back(std::move(h)); }
  void pushJson(const json& body, long status = 200) { push(Answer(http::Response{status, {}, body.dump()})); }
  void pushBody(std::string body, long status = 200) { push(Answer(http::Response{status, {}, std::move(body)})); }
  void pushError(http::ErrorKind kind, std::string message) {
    push([kind, message](const http::Request& r) -> Answer {
      return std::unexpected(http::HttpError{kind, "POST " + r.url, message, 7, 111});
    });
  }

  Answer send(const http::Request& request) override {
    const std::lock_guard lock(mutex_);
    requests.push_back(request);
    if (script_.empty()) {
      ADD_FAILURE() << "unexpected request " << request.url << " " << request.body;
      return std::unexpected(http::HttpError{http::ErrorKind::kOther, request.url, "no scripted answer", 0, 0});
    }
    auto h = std::move(script_.front());
    script_.pop_front();
    return h(request);
  }

  [[nodiscard]] json body(std::size_t i) const { return json::parse(requests.at(i).body); }
  [[nodiscard]] std::size_t left() const { return script_.size(); }

  std::vector<http::Request> requests;

 private:
  std::mutex mutex_;
  std::deque<Handler> script_;
};

json header(long rev) { return {{"cluster_id", "1"}, {"member_id", "2"}, {"revision", std::to_string(rev)}}; }
json grantAnswer(long id) { return {{"header", header(1)}, {"ID", std::to_string(id)}, {"TTL", "90"}}; }
json claimedAnswer(long rev) {
  return {{"header", header(rev)}, {"succeeded", true}, {"responses", json::array({{{"response_put", {{"header", header(rev)}}}}})}};
}
json kv(const std::string& key, const std::string& value, long mod, long lease) {
  return {{"key", os::base64Encode(key)}, {"create_revision", std::to_string(mod)}, {"mod_revision", std::to_string(mod)},
          {"version", "1"}, {"value", os::base64Encode(value)}, {"lease", std::to_string(lease)}};
}
// A failed txn as the gateway sends it: no "succeeded" at all.
// (A vector: a one-element braced list would copy the element instead of making an array.)
json heldAnswer(const std::vector<json>& kvs) {
  return {{"header", header(9)},
          {"responses", json::array({{{"response_range", {{"header", header(9)}, {"kvs", json(kvs)}, {"count", "1"}}}}})}};
}

EtcdBlockBackend::Options opts(std::vector<std::string> eps = {"http://e1:2379"}) {
  EtcdBlockBackend::Options o;
  o.endpoints = std::move(eps);
  o.timeout = 2000ms;
  return o;
}

constexpr const char* kKey = "/ibcni/pools/p0/blocks/10.1.0.0-27";

TEST(EtcdBlockBackendFake, ClaimSendsACreateIfAbsentTxnWithTheNodesLease) {
  ScriptedClient http;
  std::vector<std::int64_t> granted;
  auto o = opts();
  o.leaseTtl = 45s;
  o.onLeaseGranted = [&](std::int64_t id) { granted.push_back(id); };
  EtcdBlockBackend b(http, o);
  http.pushJson(grantAnswer(7587));
  http.pushJson(claimedAnswer(12));
  const auto c = b.claim("p0", "10.1.0.0-27", "node-a");
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kClaimed);
  EXPECT_EQ(c->holder.node, "node-a");
  EXPECT_EQ(c->holder.version, "12");
  EXPECT_EQ(granted, std::vector<std::int64_t>{7587});
  EXPECT_EQ(b.leaseId(), 7587);

  ASSERT_EQ(http.requests.size(), 2U);
  EXPECT_EQ(http.requests[0].url, "http://e1:2379/v3/lease/grant");
  EXPECT_EQ(http.body(0)["TTL"], "45");
  EXPECT_EQ(http.requests[1].url, "http://e1:2379/v3/kv/txn");
  EXPECT_LE(http.requests[1].timeout, 2000ms);
  const json txn = http.body(1);
  EXPECT_EQ(os::base64Decode(txn["compare"][0]["key"].get<std::string>()), kKey);
  EXPECT_EQ(txn["compare"][0]["target"], "CREATE");
  EXPECT_EQ(txn["compare"][0]["create_revision"], "0");
  const json put = txn["success"][0]["request_put"];
  EXPECT_EQ(put["lease"], "7587");
  const json value = json::parse(*os::base64Decode(put["value"].get<std::string>()));
  EXPECT_EQ(value["node"], "node-a");
  EXPECT_TRUE(value["claimedAt"].is_string());
  EXPECT_EQ(os::base64Decode(txn["failure"][0]["request_range"]["key"].get<std::string>()), kKey);

  // The lease is granted once: a second claim goes straight to the txn.
  http.pushJson(claimedAnswer(13));
  ASSERT_TRUE(b.claim("p0", "10.1.0.32-27", "node-a"));
  EXPECT_EQ(http.requests.size(), 3U);
}

TEST(EtcdBlockBackendFake, FailedTxnWithoutSucceededIsHeldByTheHolderInTheRange) {
  ScriptedClient http;
  auto o = opts();
  o.leaseId = 5;
  EtcdBlockBackend b(http, o);
  http.pushJson(heldAnswer({kv(kKey, R"({"node":"node-b","claimedAt":"2026-11-24T18:00:00Z"})", 41, 99)}));
  const auto c = b.claim("p0", "10.1.0.0-27", "node-a");
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kHeldByOther);
  EXPECT_EQ(c->holder.node, "node-b");
  EXPECT_EQ(c->holder.version, "41");
  ASSERT_TRUE(c->holder.claimedAt);
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*c->holder.claimedAt), 1795543200);
}

TEST(EtcdBlockBackendFake, SameNodeOnItsLeaseIsAdoptedWithoutAWrite) {
  ScriptedClient http;
  auto o = opts();
  o.leaseId = 5;
  EtcdBlockBackend b(http, o);
  http.pushJson(heldAnswer({kv(kKey, R"({"node":"node-a"})", 41, 5)}));
  const auto c = b.claim("p0", "10.1.0.0-27", "node-a");
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kAdopted);
  EXPECT_EQ(c->holder.version, "41");
  EXPECT_EQ(http.requests.size(), 1U);
}

TEST(EtcdBlockBackendFake, SameNodeOnAnOlderLeaseIsMovedToTheCurrentOne) {
  ScriptedClient http;
  auto o = opts();
  o.leaseId = 6;
  EtcdBlockBackend b(http, o);
  http.pushJson(heldAnswer({kv(kKey, R"({"node":"node-a"})", 41, 5)}));
  http.pushJson(claimedAnswer(50));
  const auto c = b.claim("p0", "10.1.0.0-27", "node-a");
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kAdopted);
  EXPECT_EQ(c->holder.version, "50");
  ASSERT_EQ(http.requests.size(), 2U);
  const json move = http.body(1);
  EXPECT_EQ(move["compare"][0]["target"], "MOD");
  EXPECT_EQ(move["compare"][0]["mod_revision"], "41");
  EXPECT_EQ(move["success"][0]["request_put"]["lease"], "6");
}

TEST(EtcdBlockBackendFake, GarbageJsonIsABadAnswerNamingTheEndpoint) {
  ScriptedClient http;
  auto o = opts();
  o.leaseId = 5;
  EtcdBlockBackend b(http, o);
  http.pushBody("<html>proxy says hi</html>");
  const auto c = b.claim("p0", "10.1.0.0-27", "node-a");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kBadAnswer);
  EXPECT_NE(c.error().describe().find("http://e1:2379/v3/kv/txn"), std::string::npos) << c.error().describe();
  EXPECT_NE(c.error().describe().find("proxy says hi"), std::string::npos) << c.error().describe();
  const auto e = toCniError(c.error(), "claiming block 10.1.0.0-27 of pool p0");
  EXPECT_EQ(e.code, cni::Errc::kTryAgainLater);
  EXPECT_NE(e.msg.find("claiming block 10.1.0.0-27 of pool p0: bad answer: "), std::string::npos) << e.msg;
}

TEST(EtcdBlockBackendFake, ServerErrorKeepsEtcdsMessageAndCode) {
  ScriptedClient http;
  auto o = opts();
  o.leaseId = 5;
  EtcdBlockBackend b(http, o);
  http.pushJson({{"error", "etcdserver: mvcc: database space exceeded"},
                 {"message", "etcdserver: mvcc: database space exceeded"},
                 {"code", 8}},
                500);
  const auto c = b.claim("p0", "10.1.0.0-27", "node-a");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kBadAnswer);
  EXPECT_EQ(c.error().backendCode, 8);
  EXPECT_NE(c.error().message.find("HTTP 500: etcdserver: mvcc: database space exceeded"), std::string::npos)
      << c.error().describe();
}

TEST(EtcdBlockBackendFake, MissingOrUnreadableFieldsAreBadAnswers) {
  ScriptedClient http;
  auto o = opts();
  o.leaseId = 5;
  EtcdBlockBackend b(http, o);
  // succeeded without a revision
  http.pushJson({{"succeeded", true}});
  auto c = b.claim("p0", "b1", "node-a");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kBadAnswer);
  EXPECT_NE(c.error().message.find("header.revision"), std::string::npos) << c.error().describe();
  // failed without a range response
  http.pushJson({{"header", header(3)}});
  c = b.claim("p0", "b1", "node-a");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("response_range"), std::string::npos) << c.error().describe();
  // a value that is not ours
  http.pushJson(heldAnswer({kv("/ibcni/pools/p0/blocks/b1", "not json", 4, 0)}));
  c = b.claim("p0", "b1", "node-a");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("/ibcni/pools/p0/blocks/b1"), std::string::npos) << c.error().describe();
  // a mod_revision that is no int64
  json bad = kv("/ibcni/pools/p0/blocks/b1", R"({"node":"x"})", 4, 0);
  bad["mod_revision"] = "four";
  http.pushJson(heldAnswer({bad}));
  c = b.claim("p0", "b1", "node-a");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kBadAnswer);
  // a key that is not base64
  bad = kv("/ibcni/pools/p0/blocks/b1", R"({"node":"x"})", 4, 0);
  bad["key"] = "!!";
  http.pushJson({{"kvs", json::array({bad})}});
  const auto l = b.list("p0");
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().kind, BackendErrc::kBadAnswer);
  // a grant without an ID
  EtcdBlockBackend fresh(http, opts());
  http.pushJson({{"header", header(1)}, {"TTL", "90"}});
  c = fresh.claim("p0", "b1", "node-a");
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("no lease ID"), std::string::npos) << c.error().describe();
  EXPECT_EQ(http.left(), 0U);
}

TEST(EtcdBlockBackendFake, ListReadsEveryKeyAndAnOmittedKvsIsEmpty) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushJson({{"header", header(3)}});  // nothing: kvs omitted
  auto l = b.list("p0");
  ASSERT_TRUE(l) << l.error().describe();
  EXPECT_TRUE(l->empty());
  const json range = http.body(0);
  EXPECT_EQ(os::base64Decode(range["key"].get<std::string>()), "/ibcni/pools/p0/blocks/");
  EXPECT_EQ(os::base64Decode(range["range_end"].get<std::string>()), "/ibcni/pools/p0/blocks0");

  http.pushJson({{"header", header(3)},
                 {"kvs",
                  {kv("/ibcni/pools/p0/blocks/a", R"({"node":"n1"})", 3, 1),
                   kv("/ibcni/pools/p0/blocks/b", R"({"node":"n2"})", 4, 2)}},
                 {"count", "2"}});
  l = b.listNode("p0", "n2");
  ASSERT_TRUE(l) << l.error().describe();
  ASSERT_EQ(l->size(), 1U);
  EXPECT_EQ((*l)[0].name, "b");
  EXPECT_EQ((*l)[0].holder.version, "4");
}

TEST(EtcdBlockBackendFake, AnExpiredLeaseIsGrantedAgainAndThePutRetriedOnce) {
  ScriptedClient http;
  std::vector<std::int64_t> granted;
  auto o = opts();
  o.leaseId = 5;
  o.onLeaseGranted = [&](std::int64_t id) { granted.push_back(id); };
  EtcdBlockBackend b(http, o);
  const json notFound{{"error", "etcdserver: requested lease not found"},
                      {"message", "etcdserver: requested lease not found"},
                      {"code", 5}};
  http.pushJson(notFound, 404);
  http.pushJson(grantAnswer(8));
  http.pushJson(claimedAnswer(20));
  const auto c = b.claim("p0", "b1", "node-a");
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kClaimed);
  EXPECT_EQ(granted, std::vector<std::int64_t>{8});
  EXPECT_EQ(http.body(2)["success"][0]["request_put"]["lease"], "8");

  // Twice in a row: the error is given, not a loop.
  http.pushJson(notFound, 404);
  http.pushJson(grantAnswer(9));
  http.pushJson(notFound, 404);
  const auto again = b.claim("p0", "b2", "node-a");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().backendCode, 5);
  EXPECT_EQ(http.left(), 0U);
}

TEST(EtcdBlockBackendFake, UnreachableEndpointsAreTriedInTurnAndAllNamed) {
  ScriptedClient http;
  auto o = opts({"http://e1:2379", "http://e2:2379", "http://e3:2379"});
  o.leaseId = 5;
  EtcdBlockBackend b(http, o);
  http.pushError(http::ErrorKind::kConnect, "Failed to connect");
  http.pushJson({{"error", "etcdserver: no leader"}, {"message", "etcdserver: no leader"}, {"code", 14}}, 503);
  http.pushJson(claimedAnswer(3));
  auto c = b.claim("p0", "b1", "node-a");
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(http.requests[0].url, "http://e1:2379/v3/kv/txn");
  EXPECT_EQ(http.requests[1].url, "http://e2:2379/v3/kv/txn");
  EXPECT_EQ(http.requests[2].url, "http://e3:2379/v3/kv/txn");
  // The endpoint that answered is asked first next time.
  http.pushJson(claimedAnswer(4));
  ASSERT_TRUE(b.claim("p0", "b2", "node-a"));
  EXPECT_EQ(http.requests[3].url, "http://e3:2379/v3/kv/txn");

  http.pushError(http::ErrorKind::kConnect, "Connection refused");
  http.pushError(http::ErrorKind::kDns, "Could not resolve host");
  http.pushError(http::ErrorKind::kConnect, "Connection refused");
  c = b.claim("p0", "b3", "node-a");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kUnreachable);
  for (const char* ep : {"http://e1:2379", "http://e2:2379", "http://e3:2379"}) {
    EXPECT_NE(c.error().endpoint.find(ep), std::string::npos) << c.error().describe();
    EXPECT_NE(c.error().message.find(ep), std::string::npos) << c.error().describe();
  }
  EXPECT_NE(c.error().message.find("Could not resolve host"), std::string::npos) << c.error().describe();
  const auto e = toCniError(c.error(), "claiming a block");
  EXPECT_EQ(e.code, cni::Errc::kTryAgainLater);
  EXPECT_NE(e.msg.find("http://e2:2379"), std::string::npos) << e.msg;
}

TEST(EtcdBlockBackendFake, AMemberShuttingDownIsLeftForTheNext) {
  ScriptedClient http;
  auto o = opts({"http://e1:2379", "http://e2:2379"});
  o.leaseId = 5;
  EtcdBlockBackend b(http, o);
  // What a stopping member's gateway answers (seen during a storm with the leader stopped).
  http.pushJson({{"error", "grpc: the client connection is closing"},
                 {"message", "grpc: the client connection is closing"},
                 {"code", 1}},
                408);
  http.pushJson(claimedAnswer(3));
  auto c = b.claim("p0", "b1", "node-a");
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kClaimed);
  EXPECT_EQ(http.requests[1].url, "http://e2:2379/v3/kv/txn");
  // Both members going away: unreachable (error 11), naming each with what it said.
  http.pushJson({{"error", "grpc: the client connection is closing"}, {"code", 1}}, 408);
  http.pushJson({{"error", "etcdserver: request timed out"}, {"code", 14}}, 503);
  c = b.claim("p0", "b2", "node-a");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kUnreachable);
  EXPECT_NE(c.error().message.find("the client connection is closing"), std::string::npos) << c.error().describe();
  EXPECT_NE(c.error().message.find("request timed out"), std::string::npos) << c.error().describe();
}

TEST(EtcdBlockBackendFake, TheWholeCallIsBoundedByTheTimeout) {
  ScriptedClient http;
  auto o = opts({"http://e1:2379", "http://e2:2379", "http://e3:2379"});
  o.leaseId = 5;
  o.timeout = 600ms;
  EtcdBlockBackend b(http, o);
  // Each endpoint hangs until its request's own timeout.
  for (int i = 0; i < 3; ++i) {
    http.push([](const http::Request& r) -> ScriptedClient::Answer {
      std::this_thread::sleep_for(r.timeout);
      return std::unexpected(http::HttpError{http::ErrorKind::kTimeout, "POST " + r.url, "Operation timed out", 28, 0});
    });
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto c = b.claim("p0", "b1", "node-a");
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kTimeout);
  EXPECT_LT(took, 900ms);
  EXPECT_GE(took, 500ms);
  std::chrono::milliseconds sum{0};
  for (const auto& r : http.requests) {
    sum += r.timeout;
  }
  EXPECT_LE(sum, 600ms);
  EXPECT_NE(c.error().message.find("Operation timed out"), std::string::npos) << c.error().describe();
}

TEST(EtcdBlockBackendFake, AuthAndTlsFailuresAreConfigurationErrors) {
  ScriptedClient http;
  auto o = opts({"https://e1:2379", "https://e2:2379"});
  o.leaseId = 5;
  o.tls.caFile = "/ca.pem";
  o.tls.certFile = "/cert.pem";
  o.tls.keyFile = "/key.pem";
  EtcdBlockBackend b(http, o);
  http.pushError(http::ErrorKind::kTls, "SSL certificate problem: unable to get local issuer certificate");
  auto c = b.claim("p0", "b1", "node-a");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kAuth);
  EXPECT_EQ(http.requests.size(), 1U) << "a TLS failure is not retried on another endpoint";
  EXPECT_EQ(http.requests[0].tls.caFile, "/ca.pem");
  EXPECT_EQ(http.requests[0].tls.certFile, "/cert.pem");
  EXPECT_EQ(http.requests[0].tls.keyFile, "/key.pem");
  EXPECT_EQ(toCniError(c.error(), "x").code, cni::Errc::kInvalidConfig);

  http.pushJson({{"error", "etcdserver: user name is empty"}, {"message", "etcdserver: user name is empty"}, {"code", 7}},
                403);
  c = b.claim("p0", "b1", "node-a");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kAuth);

  http.pushError(http::ErrorKind::kUnavailable, "libcurl.so.4: cannot open shared object file");
  c = b.claim("p0", "b1", "node-a");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kUnavailable);
  EXPECT_EQ(toCniError(c.error(), "x").code, cni::Errc::kInvalidEnvironment);
}

TEST(EtcdBlockBackendFake, ReleaseTellsReleasedNotOursChangedAndGone) {
  ScriptedClient http;
  auto o = opts();
  o.leaseId = 5;
  EtcdBlockBackend b(http, o);
  const std::string key = "/ibcni/pools/p0/blocks/b1";
  const auto rangeOf = [&](const std::vector<json>& kvs) {
    json r{{"header", header(30)}};
    if (!kvs.empty()) {
      r["kvs"] = kvs;
      r["count"] = std::to_string(kvs.size());
    }
    return r;
  };
  // Ours at that version: deleted on that mod_revision.
  http.pushJson(rangeOf({kv(key, R"({"node":"node-a"})", 12, 5)}));
  http.pushJson({{"header", header(30)},
                 {"succeeded", true},
                 {"responses", json::array({{{"response_delete_range", {{"deleted", "1"}}}}})}});
  EXPECT_EQ(b.release("p0", "b1", "node-a", "12"), ReleaseOutcome::kReleased);
  ASSERT_EQ(http.requests.size(), 2U);
  EXPECT_EQ(http.requests[0].url, "http://e1:2379/v3/kv/range");
  const json txn = http.body(1);
  EXPECT_EQ(txn["compare"][0]["target"], "MOD");
  EXPECT_EQ(txn["compare"][0]["mod_revision"], "12");
  EXPECT_EQ(os::base64Decode(txn["success"][0]["request_delete_range"]["key"].get<std::string>()), key);

  // Judged on the range alone: nothing is deleted.
  http.pushJson(rangeOf({kv(key, R"({"node":"node-b"})", 12, 2)}));
  EXPECT_EQ(b.release("p0", "b1", "node-a", "12"), ReleaseOutcome::kNotOurs);
  http.pushJson(rangeOf({kv(key, R"({"node":"node-a"})", 13, 5)}));
  EXPECT_EQ(b.release("p0", "b1", "node-a", "12"), ReleaseOutcome::kChanged);
  http.pushJson(rangeOf({}));
  EXPECT_EQ(b.release("p0", "b1", "node-a", "12"), ReleaseOutcome::kGone);
  EXPECT_EQ(http.requests.size(), 5U);

  // Changed between the range and the txn: the failed txn's range decides.
  http.pushJson(rangeOf({kv(key, R"({"node":"node-a"})", 12, 5)}));
  http.pushJson(heldAnswer({kv(key, R"({"node":"node-b"})", 14, 2)}));
  EXPECT_EQ(b.release("p0", "b1", "node-a", "12"), ReleaseOutcome::kNotOurs);
  http.pushJson(rangeOf({kv(key, R"({"node":"node-a"})", 12, 5)}));
  http.pushJson({{"header", header(30)}, {"responses", json::array({{{"response_range", {{"header", header(30)}}}}})}});
  EXPECT_EQ(b.release("p0", "b1", "node-a", "12"), ReleaseOutcome::kGone);

  const auto bad = b.release("p0", "b1", "node-a", "abc");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, BackendErrc::kInvalidArgument);
  EXPECT_EQ(http.left(), 0U);
}

TEST(EtcdBlockBackendFake, RenewKeepsAliveOrReclaimsAfterExpiry) {
  ScriptedClient http;
  auto o = opts();
  o.leaseId = 5;
  EtcdBlockBackend b(http, o);
  const std::vector<ClaimRef> held{{ClaimKind::kBlock, "p0", "b1", ""}, {ClaimKind::kAddress, "p0", "10.1.9.9", "c1:ib0"}};
  http.pushBody(json{{"result", {{"header", header(3)}, {"ID", "5"}, {"TTL", "90"}}}}.dump() + "\n");
  auto r = b.renew("node-a", held);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_TRUE(r->renewed);
  EXPECT_FALSE(r->reestablished);
  EXPECT_EQ(r->kept, held);
  EXPECT_EQ(http.body(0)["ID"], "5");
  EXPECT_EQ(http.requests[0].url, "http://e1:2379/v3/lease/keepalive");

  // Expired: TTL omitted. New lease, b1 claimed again, the address taken by node-b meanwhile.
  http.pushBody(json{{"result", {{"header", header(3)}, {"ID", "5"}}}}.dump() + "\n");
  http.pushJson(grantAnswer(6));
  http.pushJson(claimedAnswer(40));
  http.pushJson(heldAnswer({kv("/ibcni/pools/p0/addresses/10.1.9.9", R"({"node":"node-b","owner":"c7:ib0"})", 41, 2)}));
  r = b.renew("node-a", held);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_FALSE(r->renewed);
  EXPECT_TRUE(r->reestablished);
  EXPECT_EQ(r->kept, std::vector<ClaimRef>{held[0]});
  ASSERT_EQ(r->lost.size(), 1U);
  EXPECT_EQ(r->lost[0].ref, held[1]);
  ASSERT_TRUE(r->lost[0].holder);
  EXPECT_EQ(r->lost[0].holder->node, "node-b");
  EXPECT_EQ(r->lost[0].holder->owner, "c7:ib0");
  EXPECT_EQ(b.leaseId(), 6);
  EXPECT_EQ(http.body(3)["success"][0]["request_put"]["lease"], "6");  // keepalive, keepalive, grant, txn
  EXPECT_EQ(http.left(), 0U);
}

TEST(EtcdBlockBackendFake, MalformedNamesAndOptionsAreRefusedBeforeSending) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  for (const auto& [pool, block, node] : std::vector<std::array<std::string, 3>>{
           {"", "b", "n"}, {"p", "a/b", "n"}, {"p", "b", ""}, {"p", "b", "n\n"}, {"p/q", "b", "n"}}) {
    const auto c = b.claim(pool, block, node);
    ASSERT_FALSE(c) << pool << " " << block << " " << node;
    EXPECT_EQ(c.error().kind, BackendErrc::kInvalidArgument);
  }
  EXPECT_FALSE(b.claimAddress("p", "10.0.0.1", "n", ""));
  EXPECT_TRUE(http.requests.empty());

  EXPECT_TRUE(EtcdBlockBackend::validate(opts({"http://127.0.0.1:2379", "https://etcd.example:2379"})));
  for (const auto& bad : {"127.0.0.1:2379", "ftp://x", "http://", "http://x:2379/", "http://a b"}) {
    const auto v = EtcdBlockBackend::validate(opts({bad}));
    ASSERT_FALSE(v) << bad;
    EXPECT_NE(v.error().message.find(bad), std::string::npos) << v.error().describe();
  }
  EXPECT_FALSE(EtcdBlockBackend::validate(opts({})));
  auto o = opts();
  o.prefix = "/ibcni";
  EXPECT_FALSE(EtcdBlockBackend::validate(o));
}

}  // namespace
}  // namespace ibcni::ipam
