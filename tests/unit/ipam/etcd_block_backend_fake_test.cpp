// SPDX-License-Identifier: Apache-2.0
// EtcdBlockBackend over a scripted http::HttpClient: what each call SENDS (paths, every txn's
// compares and success/failure ops, keys in base64, int64 as strings, which puts hang on the
// node's lease and which do not) and how it reads what etcd's gateway may answer, including
// answers a real etcd gives only when broken: garbage JSON, a 500, omitted fields, unreachable
// endpoints, a member shutting down, a lease that expired between keepalive and put, the timeout.
// The same operations against a real etcd: etcd_block_backend_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "block_backend_print.h"
#include "block_backend_test_util.h"
#include "ipam/backends/etcd_block_backend.h"
#include "ibcni/os/text.h"
#include "ibcni/os/time_text.h"

namespace ibcni::ipam {
namespace {

using nlohmann::json;
using Strings = std::vector<std::string>;
using namespace std::chrono_literals;

/// Answers each request with the next scripted answer (or the handler's), and records them.
class ScriptedClient final : public http::HttpClient {
 public:
  using Answer = http::HttpResult<http::Response>;
  using Handler = std::function<Answer(const http::Request&)>;

  void push(Answer a) {
    script_.emplace_back([a](const http::Request&) { return a; });
  }
  void push(Handler h) { script_.push_back(std::move(h)); }
  void pushJson(const json& body, long status = 200) { push(Answer(http::Response{status, {}, body.dump()})); }
  void pushBody(std::string body, long status = 200) { push(Answer(http::Response{status, {}, std::move(body)})); }
  void pushError(http::ErrorKind kind, std::string message) {
    push([kind, message](const http::Request& r) -> Answer {
      return std::unexpected(http::HttpError{kind, "POST " + r.url, message, 7, 111});
    });
  }

  Answer send(const http::Request& request) override {
    Handler h;
    {
      const std::lock_guard lock(mutex_);
      requests.push_back(request);
      if (script_.empty()) {
        ADD_FAILURE() << "unexpected request " << request.url << " " << request.body;
        return std::unexpected(http::HttpError{http::ErrorKind::kOther, request.url, "no scripted answer", 0, 0});
      }
      h = std::move(script_.front());
      script_.pop_front();
    }
    return h(request);
  }

  [[nodiscard]] json body(std::size_t i) const { return json::parse(requests.at(i).body); }
  [[nodiscard]] std::string path(std::size_t i) const {
    const std::string& u = requests.at(i).url;
    return u.substr(u.find("/v3/"));
  }
  [[nodiscard]] std::size_t left() const { return script_.size(); }

  std::vector<http::Request> requests;

 private:
  std::mutex mutex_;
  std::deque<Handler> script_;
};

// ---- What the gateway answers ----------------------------------------------------------------

json header(long rev) {
  return {{"cluster_id", "1"}, {"member_id", "2"}, {"revision", std::to_string(rev)}, {"raft_term", "2"}};
}

/// A key-value as a range answers it; the gateway omits a zero lease.
json kv(const std::string& key, const json& value, long created, long mod, long lease = 0) {
  json out{{"key", os::base64Encode(key)},
           {"create_revision", std::to_string(created)},
           {"mod_revision", std::to_string(mod)},
           {"version", "1"},
           {"value", os::base64Encode(value.is_string() ? value.get<std::string>() : value.dump())}};
  if (lease != 0) {
    out["lease"] = std::to_string(lease);
  }
  return out;
}

/// A range's answer; kvs and count omitted when empty, as the gateway does.
json range(const std::vector<json>& kvs, long rev = 30) {
  json r{{"header", header(rev)}};
  if (!kvs.empty()) {
    r["kvs"] = kvs;
    r["count"] = std::to_string(kvs.size());
  }
  return r;
}

/// A txn's answer: "succeeded" omitted when false; `responses` as given.
json txnAnswer(long rev, bool succeeded, const std::vector<json>& responses = {}) {
  json a{{"header", header(rev)}};
  if (succeeded) {
    a["succeeded"] = true;
  }
  if (!responses.empty()) {
    a["responses"] = responses;
  }
  return a;
}
json putResponse(long rev) { return {{"response_put", {{"header", header(rev)}}}}; }
json rangeResponse(const std::vector<json>& kvs, long rev = 30) { return {{"response_range", range(kvs, rev)}}; }
json grantAnswer(long id, long ttl = 300) {
  return {{"header", header(1)}, {"ID", std::to_string(id)}, {"TTL", std::to_string(ttl)}};
}
/// The keepalive stream's one message; TTL omitted once the lease expired.
std::string keepaliveAnswer(long id, long ttl) {
  json result{{"header", header(3)}, {"ID", std::to_string(id)}};
  if (ttl > 0) {
    result["TTL"] = std::to_string(ttl);
  }
  return json{{"result", result}}.dump() + "\n";
}
const json kLeaseNotFound{{"error", "etcdserver: requested lease not found"},
                          {"message", "etcdserver: requested lease not found"},
                          {"code", 5}};

// ---- What the backend sent, decoded -----------------------------------------------------------

std::string decoded(const json& b64) {
  const auto d = b64.is_string() ? os::base64Decode(b64.get<std::string>()) : std::nullopt;
  return d ? *d : "<not base64: " + b64.dump() + ">";
}

/// Every field of `o` but `known`, as text ("" when none): an op or compare with a field the test
/// does not expect shows in the text compared.
std::string extra(const json& o, std::initializer_list<const char*> known) {
  std::string out;
  for (const auto& [k, v] : o.items()) {
    if (std::find_if(known.begin(), known.end(), [&k](const char* n) { return k == n; }) == known.end()) {
      out += " +" + k + "=" + v.dump();
    }
  }
  return out;
}

/// "CREATE <key> EQUAL create_revision=\"0\"", "MOD <key> EQUAL mod_revision=\"41\"".
std::string compareText(const json& c) {
  std::string out = c.value("target", "?") + " " + decoded(c["key"]) + " " + c.value("result", "?");
  for (const char* f : {"create_revision", "mod_revision", "version", "value", "lease"}) {
    if (c.contains(f)) {
      out += std::string(" ") + f + "=" + c[f].dump();
    }
  }
  return out + extra(c, {"key", "target", "result", "create_revision", "mod_revision", "version", "value", "lease"});
}

/// "put <key>" (+ " lease=\"N\"" when on a lease), "range <key>" (+ " to <end>", " keys_only"),
/// "delete <key>".
std::string opText(const json& op) {
  if (op.contains("request_put") && op.size() == 1) {
    const json& p = op["request_put"];
    return "put " + decoded(p["key"]) + (p.contains("lease") ? " lease=" + p["lease"].dump() : "") +
           extra(p, {"key", "value", "lease"});
  }
  if (op.contains("request_range") && op.size() == 1) {
    const json& r = op["request_range"];
    return "range " + decoded(r["key"]) + (r.contains("range_end") ? " to " + decoded(r["range_end"]) : "") +
           (r.value("keys_only", false) ? " keys_only" : "") + extra(r, {"key", "range_end", "keys_only"});
  }
  if (op.contains("request_delete_range") && op.size() == 1) {
    const json& d = op["request_delete_range"];
    return "delete " + decoded(d["key"]) + extra(d, {"key"});
  }
  return "not one op: " + op.dump();
}

/// A txn body as text: its compares, success ops and failure ops.
struct TxnText {
  Strings compare, success, failure;
  std::string extraFields;
};
TxnText txnText(const json& body) {
  TxnText t;
  for (const auto& c : body.value("compare", json::array())) {
    t.compare.push_back(compareText(c));
  }
  for (const auto& o : body.value("success", json::array())) {
    t.success.push_back(opText(o));
  }
  for (const auto& o : body.value("failure", json::array())) {
    t.failure.push_back(opText(o));
  }
  t.extraFields = extra(body, {"compare", "success", "failure"});
  return t;
}

/// The value a put op writes, parsed.
json putValue(const json& op) { return json::parse(decoded(op["request_put"]["value"]), nullptr, false); }

// ---- The backend under test ------------------------------------------------------------------

EtcdBlockBackend::Options opts(std::vector<std::string> eps = {"http://e1:2379"}, std::int64_t lease = 5) {
  EtcdBlockBackend::Options o;
  o.endpoints = std::move(eps);
  o.timeout = 2000ms;
  o.leaseTtl = 90s;
  o.leaseId = lease;
  return o;
}

constexpr const char* kBlockKey = "/ibcni/pools/p0/blocks/10.1.0.0-27";
constexpr const char* kAddrKey = "/ibcni/pools/p0/addresses/10.1.0.5";
constexpr const char* kAliveA = "/ibcni/nodes/node-a/alive";
constexpr const char* kRegA = "/ibcni/nodes/node-a/registered";
constexpr const char* kRegB = "/ibcni/nodes/node-b/registered";
constexpr const char* kAliveB = "/ibcni/nodes/node-b/alive";

const json kHeldByB{{"node", "node-b"}, {"claimedAt", "2026-11-24T18:00:00Z"}};
const json kHeldByA{{"node", "node-a"}, {"claimedAt", "2026-11-24T18:00:00Z"}};

json address(const std::string& node, const std::string& owner, const std::string& pod) {
  json v{{"node", node}, {"claimedAt", "2026-11-24T18:00:00Z"}, {"owner", owner}};
  if (!pod.empty()) {
    v["pod"] = pod;
  }
  return v;
}

// ---- claim ------------------------------------------------------------------------------------

TEST(EtcdBlockBackendFake, ClaimIsOneCreateIfAbsentTxnWithoutALeaseThatRegistersTheNode) {
  ScriptedClient http;
  bool granted = false;
  auto o = opts({"http://e1:2379"}, 0);
  o.onLeaseGranted = [&](std::int64_t) { granted = true; };
  EtcdBlockBackend b(http, o);
  http.pushJson(txnAnswer(12, true, {putResponse(12), putResponse(12)}));
  const auto c = b.claim(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", {});
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kClaimed);
  EXPECT_EQ(c->holder.node, "node-a");
  EXPECT_EQ(c->holder.identity, "12") << "create_revision of the key the txn created";
  EXPECT_EQ(c->holder.version, "12");
  ASSERT_TRUE(c->holder.claimedAt);
  EXPECT_LT(std::chrono::abs(std::chrono::system_clock::now() - *c->holder.claimedAt), 60s);
  EXPECT_FALSE(granted) << "a claim needs no lease";
  EXPECT_EQ(b.leaseId(), 0);

  ASSERT_EQ(http.requests.size(), 1U);
  EXPECT_EQ(http.requests[0].url, "http://e1:2379/v3/kv/txn");
  EXPECT_LE(http.requests[0].timeout, 2000ms);
  const TxnText t = txnText(http.body(0));
  EXPECT_EQ(t.compare, Strings{std::string("CREATE ") + kBlockKey + " EQUAL create_revision=\"0\""});
  EXPECT_EQ(t.success, (Strings{std::string("put ") + kBlockKey, std::string("put ") + kRegA}));
  EXPECT_EQ(t.failure, Strings{std::string("range ") + kBlockKey});
  EXPECT_EQ(t.extraFields, "");
  const json value = putValue(http.body(0)["success"][0]);
  EXPECT_EQ(value["node"], "node-a");
  EXPECT_TRUE(value["claimedAt"].is_string());
  EXPECT_FALSE(value.contains("owner")) << "a block has no owner: " << value.dump();
  const json reg = putValue(http.body(0)["success"][1]);
  EXPECT_EQ(reg["node"], "node-a");
  EXPECT_TRUE(reg["registeredAt"].is_string()) << reg.dump();
}

TEST(EtcdBlockBackendFake, AnAddressClaimWritesItsAttachmentPodAndLender) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushJson(txnAnswer(20, true, {putResponse(20), putResponse(20)}));
  const ClaimAttrs attrs{"c1:ib0", "ns/pod-1", "node-c"};
  const auto c = b.claim(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", attrs);
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kClaimed);
  EXPECT_EQ(c->holder.attrs, attrs);
  const TxnText t = txnText(http.body(0));
  EXPECT_EQ(t.compare, Strings{std::string("CREATE ") + kAddrKey + " EQUAL create_revision=\"0\""});
  EXPECT_EQ(t.success, (Strings{std::string("put ") + kAddrKey, std::string("put ") + kRegA}));
  const json value = putValue(http.body(0)["success"][0]);
  EXPECT_EQ(value["owner"], "c1:ib0");
  EXPECT_EQ(value["pod"], "ns/pod-1");
  EXPECT_EQ(value["lender"], "node-c");
}

TEST(EtcdBlockBackendFake, AFailedClaimWithoutSucceededIsHeldByTheHolderInTheRange) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushJson(txnAnswer(44, false, {rangeResponse({kv(kBlockKey, kHeldByB, 40, 41)})}));
  const auto c = b.claim(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", {});
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kHeldByOther);
  EXPECT_EQ(c->holder.node, "node-b");
  EXPECT_EQ(c->holder.identity, "40");
  EXPECT_EQ(c->holder.version, "41");
  ASSERT_TRUE(c->holder.claimedAt);
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*c->holder.claimedAt), 1795543200);
  EXPECT_EQ(http.requests.size(), 1U);
}

TEST(EtcdBlockBackendFake, TheSameNodeAgainIsAdoptedWithoutAWrite) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushJson(txnAnswer(44, false, {rangeResponse({kv(kBlockKey, kHeldByA, 40, 41)})}));
  auto c = b.claim(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", {});
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kAdopted);
  EXPECT_EQ(c->holder.identity, "40");
  EXPECT_EQ(c->holder.version, "41");
  // The same address for the same attachment: adopted as it is.
  http.pushJson(txnAnswer(44, false, {rangeResponse({kv(kAddrKey, address("node-a", "c1:ib0", "ns/p"), 42, 42)})}));
  c = b.claim(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", {"c1:ib0", "ns/p", ""});
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kAdopted);
  EXPECT_EQ(http.requests.size(), 2U) << "no write for a claim already ours";
  EXPECT_EQ(http.left(), 0U);
}

TEST(EtcdBlockBackendFake, TheSamePodsAddressForAnotherAttachmentIsAdoptedAndItsOwnerRewritten) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushJson(txnAnswer(44, false, {rangeResponse({kv(kAddrKey, address("node-a", "c1:ib0", "ns/p"), 42, 43)})}));
  http.pushJson(txnAnswer(50, true, {putResponse(50)}));
  const auto c = b.claim(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", {"c2:ib0", "ns/p", ""});
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kAdopted);
  EXPECT_EQ(c->holder.attrs.owner, "c2:ib0");
  EXPECT_EQ(c->holder.identity, "42");
  EXPECT_EQ(c->holder.version, "50");
  ASSERT_EQ(http.requests.size(), 2U);
  const TxnText t = txnText(http.body(1));
  EXPECT_EQ(t.compare, Strings{std::string("MOD ") + kAddrKey + " EQUAL mod_revision=\"43\""});
  EXPECT_EQ(t.success, Strings{std::string("put ") + kAddrKey}) << "rewritten without a lease";
  EXPECT_TRUE(t.failure.empty());
  const json value = putValue(http.body(1)["success"][0]);
  EXPECT_EQ(value["owner"], "c2:ib0");
  EXPECT_EQ(value["pod"], "ns/p");
  EXPECT_EQ(value["claimedAt"], "2026-11-24T18:00:00Z") << "the claim's time stays";
}

TEST(EtcdBlockBackendFake, AnOwnerRewriteThatLosesItsRaceLooksAgain) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushJson(txnAnswer(44, false, {rangeResponse({kv(kAddrKey, address("node-a", "c1:ib0", "ns/p"), 42, 43)})}));
  http.pushJson(txnAnswer(45, false));  // changed meanwhile: the compare failed
  http.pushJson(txnAnswer(46, false, {rangeResponse({kv(kAddrKey, address("node-b", "c9:ib0", "ns/q"), 45, 45)})}));
  const auto c = b.claim(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", {"c2:ib0", "ns/p", ""});
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kHeldByOther);
  EXPECT_EQ(c->holder.node, "node-b");
  ASSERT_EQ(http.requests.size(), 3U);
  EXPECT_EQ(txnText(http.body(2)).compare, Strings{std::string("CREATE ") + kAddrKey + " EQUAL create_revision=\"0\""});
}

TEST(EtcdBlockBackendFake, AnotherPodOrAttachmentOnTheSameNodeIsHeldByOtherWithoutAWrite) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  const json held = kv(kAddrKey, address("node-a", "c1:ib0", "ns/p"), 42, 43);
  for (const ClaimAttrs& attrs : {ClaimAttrs{"c2:ib0", "ns/q", ""}, ClaimAttrs{"c2:ib0", "", ""}}) {
    http.pushJson(txnAnswer(44, false, {rangeResponse({held})}));
    const auto c = b.claim(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", attrs);
    ASSERT_TRUE(c) << c.error().describe();
    EXPECT_EQ(c->state, ClaimState::kHeldByOther) << attrs.owner << " " << attrs.pod;
    EXPECT_EQ(c->holder.attrs.owner, "c1:ib0");
    EXPECT_EQ(c->holder.attrs.pod, "ns/p");
  }
  EXPECT_EQ(http.requests.size(), 2U);
}

TEST(EtcdBlockBackendFake, AClaimFoundOnALeaseIsAdoptedAndMovedOffIt) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushJson(txnAnswer(44, false, {rangeResponse({kv(kBlockKey, kHeldByA, 40, 41, 5)})}));
  http.pushJson(txnAnswer(50, true, {putResponse(50)}));
  const auto c = b.claim(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", {});
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kAdopted);
  EXPECT_EQ(c->holder.version, "50");
  ASSERT_EQ(http.requests.size(), 2U);
  const TxnText t = txnText(http.body(1));
  EXPECT_EQ(t.compare, Strings{std::string("MOD ") + kBlockKey + " EQUAL mod_revision=\"41\""});
  EXPECT_EQ(t.success, Strings{std::string("put ") + kBlockKey}) << "no lease any more";
}

TEST(EtcdBlockBackendFake, AClaimDeletedBetweenCompareAndRangeIsCreatedAgainButNotForever) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushJson(txnAnswer(44, false, {rangeResponse({})}));
  http.pushJson(txnAnswer(45, true, {putResponse(45), putResponse(45)}));
  const auto c = b.claim(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", {});
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kClaimed);
  ASSERT_EQ(http.requests.size(), 2U);
  EXPECT_EQ(http.body(1), http.body(0)) << "the same create-if-absent again";

  for (int i = 0; i < 4; ++i) {
    http.pushJson(txnAnswer(50 + i, false, {rangeResponse({})}));
  }
  const auto flapping = b.claim(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", {});
  ASSERT_FALSE(flapping);
  EXPECT_EQ(flapping.error().kind, BackendErrc::kBadAnswer);
  EXPECT_NE(flapping.error().message.find("kept changing"), std::string::npos) << flapping.error().describe();
  EXPECT_EQ(http.left(), 0U);
}

// ---- list -------------------------------------------------------------------------------------

TEST(EtcdBlockBackendFake, ListReadsTheKindsClaimsAndTheNodesLivenessInOneTxn) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  const std::vector<json> claims{kv("/ibcni/pools/p0/blocks/10.1.0.0-27", kHeldByA, 3, 3),
                                 kv("/ibcni/pools/p0/blocks/10.1.0.32-27", kHeldByB, 4, 6)};
  const std::vector<json> nodes{kv(kAliveA, "", 7, 7, 5), kv(kRegA, "", 2, 7), kv(kRegB, "", 4, 4)};
  http.pushJson(txnAnswer(30, true, {rangeResponse(claims), rangeResponse(nodes)}));
  auto l = b.list(ClaimKind::kBlock, "p0", std::nullopt);
  ASSERT_TRUE(l) << l.error().describe();
  ASSERT_EQ(l->size(), 2U);
  EXPECT_EQ((*l)[0].name, "10.1.0.0-27");
  EXPECT_EQ((*l)[0].kind, ClaimKind::kBlock);
  EXPECT_EQ((*l)[0].holder.node, "node-a");
  EXPECT_FALSE((*l)[0].holder.lapsed) << "node-a's alive key exists";
  EXPECT_EQ((*l)[1].name, "10.1.0.32-27");
  EXPECT_EQ((*l)[1].holder.identity, "4");
  EXPECT_EQ((*l)[1].holder.version, "6");
  EXPECT_TRUE((*l)[1].holder.lapsed) << "node-b is registered but has no alive key";

  const TxnText t = txnText(http.body(0));
  EXPECT_TRUE(t.compare.empty());
  EXPECT_EQ(t.success, (Strings{"range /ibcni/pools/p0/blocks/ to /ibcni/pools/p0/blocks0",
                                "range /ibcni/nodes/ to /ibcni/nodes0 keys_only"}));
  EXPECT_TRUE(t.failure.empty());

  // Only node-b's.
  http.pushJson(txnAnswer(30, true, {rangeResponse(claims), rangeResponse(nodes)}));
  l = b.list(ClaimKind::kBlock, "p0", "node-b");
  ASSERT_TRUE(l) << l.error().describe();
  ASSERT_EQ(l->size(), 1U);
  EXPECT_EQ((*l)[0].name, "10.1.0.32-27");
}

TEST(EtcdBlockBackendFake, ListOfAddressesReadsTheirKeySpaceAndAnOmittedKvsIsEmpty) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushJson(txnAnswer(
      30, true, {rangeResponse({kv(kAddrKey, address("node-a", "c1:ib0", "ns/p"), 8, 9)}), rangeResponse({})}));
  auto l = b.list(ClaimKind::kAddress, "p0", std::nullopt);
  ASSERT_TRUE(l) << l.error().describe();
  ASSERT_EQ(l->size(), 1U);
  EXPECT_EQ((*l)[0].kind, ClaimKind::kAddress);
  EXPECT_EQ((*l)[0].name, "10.1.0.5");
  EXPECT_EQ((*l)[0].holder.attrs, (ClaimAttrs{"c1:ib0", "ns/p", ""}));
  EXPECT_TRUE((*l)[0].holder.lapsed) << "no alive key at all";
  EXPECT_EQ(txnText(http.body(0)).success[0], "range /ibcni/pools/p0/addresses/ to /ibcni/pools/p0/addresses0");

  http.pushJson(txnAnswer(30, true, {rangeResponse({}), rangeResponse({})}));
  l = b.list(ClaimKind::kAddress, "p0", std::nullopt);
  ASSERT_TRUE(l) << l.error().describe();
  EXPECT_TRUE(l->empty());
}

// ---- release ----------------------------------------------------------------------------------

TEST(EtcdBlockBackendFake, ReleaseReadsNowThenDeletesOnTheRevisionItRead) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushJson(range({kv(kBlockKey, kHeldByA, 12, 17)}));
  http.pushJson(txnAnswer(31, true, {{{"response_delete_range", {{"header", header(31)}, {"deleted", "1"}}}}}));
  EXPECT_EQ(b.release(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", ""), ReleaseOutcome::kReleased);
  ASSERT_EQ(http.requests.size(), 2U);
  EXPECT_EQ(http.path(0), "/v3/kv/range");
  EXPECT_EQ(http.body(0), json({{"key", os::base64Encode(kBlockKey)}}));
  const TxnText t = txnText(http.body(1));
  EXPECT_EQ(t.compare, Strings{std::string("MOD ") + kBlockKey + " EQUAL mod_revision=\"17\""});
  EXPECT_EQ(t.success, Strings{std::string("delete ") + kBlockKey});
  EXPECT_TRUE(t.failure.empty());
}

TEST(EtcdBlockBackendFake, ReleaseIsNotOursForAnotherNodeOrOwnerAndGoneWhenAbsent) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushJson(range({kv(kBlockKey, kHeldByB, 12, 12)}));
  EXPECT_EQ(b.release(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", ""), ReleaseOutcome::kNotOurs);
  http.pushJson(range({kv(kAddrKey, address("node-a", "c1:ib0", ""), 12, 12)}));
  EXPECT_EQ(b.release(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", "c2:ib0"), ReleaseOutcome::kNotOurs);
  http.pushJson(range({}));
  EXPECT_EQ(b.release(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", ""), ReleaseOutcome::kGone);
  EXPECT_EQ(http.requests.size(), 3U) << "nothing deleted";
  EXPECT_EQ(http.path(1), "/v3/kv/range");
  EXPECT_EQ(decoded(http.body(1)["key"]), kAddrKey);

  // An empty owner: whatever attachment holds it on this node.
  http.pushJson(range({kv(kAddrKey, address("node-a", "c1:ib0", ""), 12, 12)}));
  http.pushJson(txnAnswer(31, true));
  EXPECT_EQ(b.release(ClaimKind::kAddress, "p0", "10.1.0.5", "node-a", ""), ReleaseOutcome::kReleased);
  EXPECT_EQ(http.left(), 0U);
}

TEST(EtcdBlockBackendFake, AReleaseThatLosesItsRaceJudgesTheStateReadAgain) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  // Changed between the range and the delete, then gone.
  http.pushJson(range({kv(kBlockKey, kHeldByA, 12, 12)}));
  http.pushJson(txnAnswer(31, false));
  http.pushJson(range({}));
  EXPECT_EQ(b.release(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", ""), ReleaseOutcome::kGone);
  // Changed (renewed, rewritten) but still ours: deleted on the new revision.
  http.pushJson(range({kv(kBlockKey, kHeldByA, 12, 12)}));
  http.pushJson(txnAnswer(31, false));
  http.pushJson(range({kv(kBlockKey, kHeldByA, 12, 33)}));
  http.pushJson(txnAnswer(34, true));
  EXPECT_EQ(b.release(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", ""), ReleaseOutcome::kReleased);
  EXPECT_EQ(txnText(http.body(6)).compare, Strings{std::string("MOD ") + kBlockKey + " EQUAL mod_revision=\"33\""});
  // Taken meanwhile by another node: not ours.
  http.pushJson(range({kv(kBlockKey, kHeldByA, 12, 12)}));
  http.pushJson(txnAnswer(31, false));
  http.pushJson(range({kv(kBlockKey, kHeldByB, 12, 35)}));
  EXPECT_EQ(b.release(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", ""), ReleaseOutcome::kNotOurs);
  // Changing every time: an error, not a loop.
  for (int i = 0; i < 4; ++i) {
    http.pushJson(range({kv(kBlockKey, kHeldByA, 12, 40 + i)}));
    http.pushJson(txnAnswer(50 + i, false));
  }
  const auto r = b.release(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", "");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, BackendErrc::kBadAnswer);
  EXPECT_EQ(http.left(), 0U);
}

// ---- renew ------------------------------------------------------------------------------------

std::vector<HeldClaim> heldOf(std::initializer_list<HeldClaim> h) { return h; }

TEST(EtcdBlockBackendFake, RenewKeepsTheLeaseAliveThenPutsLivenessAndReadsEveryClaimInOneTxn) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  const auto held = heldOf({{ClaimKind::kBlock, "b1", "10", "10"},
                            {ClaimKind::kBlock, "b2", "11", "11"},
                            {ClaimKind::kBlock, "b3", "12", "12"},
                            {ClaimKind::kAddress, "10.1.0.5", "", ""},
                            {ClaimKind::kBlock, "b4", "", ""}});
  http.pushBody(keepaliveAnswer(5, 90));
  http.pushJson(
      txnAnswer(60, true,
                {putResponse(60), putResponse(60), rangeResponse({kv("/ibcni/pools/p0/blocks/b1", kHeldByA, 10, 10)}),
                 rangeResponse({kv("/ibcni/pools/p0/blocks/b2", kHeldByB, 55, 55)}),
                 rangeResponse({kv("/ibcni/pools/p0/blocks/b3", kHeldByA, 56, 56)}),
                 rangeResponse({kv(kAddrKey, address("node-a", "c1:ib0", ""), 20, 21)}), rangeResponse({})}));
  const auto r = b.renew("node-a", "p0", held);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_FALSE(r->livenessRenewed);
  ASSERT_EQ(r->claims.size(), 5U);
  using S = HoldCheck::State;
  EXPECT_EQ(r->claims[0].state, S::kKept);
  EXPECT_EQ(r->claims[0].now.version, "10") << "etcd: renewing the lease does not touch the claim";
  EXPECT_EQ(r->claims[1].state, S::kLost) << "another node";
  EXPECT_EQ(r->claims[1].now.node, "node-b");
  EXPECT_EQ(r->claims[2].state, S::kLost) << "the same node, but another grant (create_revision 56, not 12)";
  EXPECT_EQ(r->claims[2].now.identity, "56");
  EXPECT_EQ(r->claims[3].state, S::kKept) << "no identity recorded: the node is enough";
  EXPECT_EQ(r->claims[3].now.attrs.owner, "c1:ib0");
  EXPECT_EQ(r->claims[4].state, S::kGone);

  ASSERT_EQ(http.requests.size(), 2U);
  EXPECT_EQ(http.path(0), "/v3/lease/keepalive");
  EXPECT_EQ(http.body(0), json({{"ID", "5"}}));
  const TxnText t = txnText(http.body(1));
  EXPECT_TRUE(t.compare.empty());
  EXPECT_EQ(t.success, (Strings{std::string("put ") + kAliveA + " lease=\"5\"", std::string("put ") + kRegA,
                                "range /ibcni/pools/p0/blocks/b1", "range /ibcni/pools/p0/blocks/b2",
                                "range /ibcni/pools/p0/blocks/b3", std::string("range ") + kAddrKey,
                                "range /ibcni/pools/p0/blocks/b4"}));
  EXPECT_TRUE(t.failure.empty());
  EXPECT_EQ(putValue(http.body(1)["success"][0])["node"], "node-a");
  EXPECT_TRUE(putValue(http.body(1)["success"][0])["renewedAt"].is_string());
}

TEST(EtcdBlockBackendFake, RenewWithoutALeaseGrantsOneWithTheTtlAndReportsIt) {
  ScriptedClient http;
  std::vector<std::int64_t> granted;
  auto o = opts({"http://e1:2379"}, 0);
  o.onLeaseGranted = [&](std::int64_t id) { granted.push_back(id); };
  EtcdBlockBackend b(http, o);
  http.pushJson(grantAnswer(7587, 90));
  http.pushJson(txnAnswer(60, true, {putResponse(60), putResponse(60)}));
  const auto r = b.renew("node-a", "p0", {});
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_FALSE(r->livenessRenewed) << "a first lease is not a lapsed one";
  EXPECT_TRUE(r->claims.empty());
  EXPECT_EQ(granted, std::vector<std::int64_t>{7587});
  EXPECT_EQ(b.leaseId(), 7587);
  ASSERT_EQ(http.requests.size(), 2U);
  EXPECT_EQ(http.path(0), "/v3/lease/grant");
  EXPECT_EQ(http.body(0), json({{"TTL", "90"}}));
  EXPECT_EQ(txnText(http.body(1)).success,
            (Strings{std::string("put ") + kAliveA + " lease=\"7587\"", std::string("put ") + kRegA}));
}

TEST(EtcdBlockBackendFake, ALapsedLeaseIsGrantedAnewAndSaid) {
  ScriptedClient http;
  std::vector<std::int64_t> granted;
  auto o = opts();
  o.onLeaseGranted = [&](std::int64_t id) { granted.push_back(id); };
  EtcdBlockBackend b(http, o);
  http.pushBody(keepaliveAnswer(5, 0));  // expired: TTL omitted
  http.pushJson(grantAnswer(8));
  http.pushJson(
      txnAnswer(60, true, {putResponse(60), putResponse(60), rangeResponse({kv(kBlockKey, kHeldByA, 3, 3)})}));
  const auto r = b.renew("node-a", "p0", heldOf({{ClaimKind::kBlock, "10.1.0.0-27", "3", "3"}}));
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_TRUE(r->livenessRenewed);
  ASSERT_EQ(r->claims.size(), 1U);
  EXPECT_EQ(r->claims[0].state, HoldCheck::State::kKept) << "the claim outlived the lease";
  EXPECT_EQ(b.leaseId(), 8);
  EXPECT_EQ(granted, std::vector<std::int64_t>{8});
  EXPECT_EQ(txnText(http.body(2)).success[0], std::string("put ") + kAliveA + " lease=\"8\"");
}

TEST(EtcdBlockBackendFake, ALeaseThatExpiresBetweenKeepaliveAndPutIsGrantedAnewOnce) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushBody(keepaliveAnswer(5, 1));
  http.pushJson(kLeaseNotFound, 404);
  http.pushJson(grantAnswer(9));
  http.pushJson(txnAnswer(61, true, {putResponse(61), putResponse(61)}));
  auto r = b.renew("node-a", "p0", {});
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_TRUE(r->livenessRenewed);
  EXPECT_EQ(b.leaseId(), 9);
  ASSERT_EQ(http.requests.size(), 4U);
  EXPECT_EQ(txnText(http.body(3)).success[0], std::string("put ") + kAliveA + " lease=\"9\"");

  // Twice in a row: the error is given, not a loop.
  http.pushBody(keepaliveAnswer(9, 1));
  http.pushJson(kLeaseNotFound, 404);
  http.pushJson(grantAnswer(10));
  http.pushJson(kLeaseNotFound, 404);
  r = b.renew("node-a", "p0", {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().backendCode, 5);
  EXPECT_EQ(http.left(), 0U);
}

TEST(EtcdBlockBackendFake, RenewMovesAClaimStillOnALeaseOffIt) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushBody(keepaliveAnswer(5, 90));
  http.pushJson(
      txnAnswer(60, true, {putResponse(60), putResponse(60), rangeResponse({kv(kBlockKey, kHeldByA, 3, 4, 2)})}));
  http.pushJson(txnAnswer(61, true, {putResponse(61)}));
  const auto r = b.renew("node-a", "p0", heldOf({{ClaimKind::kBlock, "10.1.0.0-27", "3", "4"}}));
  ASSERT_TRUE(r) << r.error().describe();
  ASSERT_EQ(r->claims.size(), 1U);
  EXPECT_EQ(r->claims[0].state, HoldCheck::State::kKept);
  EXPECT_EQ(r->claims[0].now.version, "61");
  ASSERT_EQ(http.requests.size(), 3U);
  const TxnText t = txnText(http.body(2));
  EXPECT_EQ(t.compare, Strings{std::string("MOD ") + kBlockKey + " EQUAL mod_revision=\"4\""});
  EXPECT_EQ(t.success, Strings{std::string("put ") + kBlockKey});
  EXPECT_EQ(putValue(http.body(2)["success"][0])["node"], "node-a");
}

TEST(EtcdBlockBackendFake, ManyHeldClaimsAreReadInTxnsBelowEtcdsOpLimit) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  std::vector<HeldClaim> held;
  for (int i = 0; i < 150; ++i) {
    held.push_back({ClaimKind::kAddress, "10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250), "", ""});
  }
  http.pushBody(keepaliveAnswer(5, 90));
  for (const std::size_t n : {100U, 50U}) {
    std::vector<json> responses{putResponse(60), putResponse(60)};
    responses.insert(responses.end(), n, rangeResponse({}));
    http.pushJson(txnAnswer(60, true, responses));
  }
  const auto r = b.renew("node-a", "p0", held);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->claims.size(), 150U);
  ASSERT_EQ(http.requests.size(), 3U);
  for (const auto& [i, ranges] : {std::pair{1U, 100U}, std::pair{2U, 50U}}) {
    const TxnText t = txnText(http.body(i));
    ASSERT_EQ(t.success.size(), 2U + ranges);
    EXPECT_LE(t.success.size(), 128U) << "etcd's --max-txn-ops";
    EXPECT_EQ(t.success[0], std::string("put ") + kAliveA + " lease=\"5\"");
  }
  EXPECT_EQ(txnText(http.body(2)).success[2], "range /ibcni/pools/p0/addresses/10.1.0.100");
}

// ---- takeOver, removeGone, forgetNode ---------------------------------------------------------

Holder seenB(const std::string& version = "41") {
  Holder h;
  h.node = "node-b";
  h.identity = "40";
  h.version = version;
  h.lapsed = true;
  return h;
}

Strings goneCompares(const std::string& key, const std::string& version) {
  return {"MOD " + key + " EQUAL mod_revision=\"" + version + "\"",
          std::string("CREATE ") + kAliveB + " EQUAL create_revision=\"0\"",
          std::string("CREATE ") + kRegB + " EQUAL create_revision=\"0\""};
}

TEST(EtcdBlockBackendFake, TakeOverComparesTheVersionSeenAndTheHoldersLivenessAndRegistrationInOneTxn) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushJson(txnAnswer(70, true, {putResponse(70), putResponse(70)}));
  const auto t = b.takeOver(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", seenB(), {});
  ASSERT_TRUE(t) << t.error().describe();
  EXPECT_EQ(t->state, ClaimState::kClaimed);
  EXPECT_EQ(t->holder.node, "node-a");
  EXPECT_EQ(t->holder.version, "70");
  EXPECT_EQ(t->holder.identity, "40") << "a put keeps the key's create_revision";
  ASSERT_EQ(http.requests.size(), 1U);
  const TxnText x = txnText(http.body(0));
  EXPECT_EQ(x.compare, goneCompares(kBlockKey, "41"));
  EXPECT_EQ(x.success, (Strings{std::string("put ") + kBlockKey, std::string("put ") + kRegA}));
  EXPECT_EQ(x.failure, Strings{std::string("range ") + kBlockKey});
  EXPECT_EQ(putValue(http.body(0)["success"][0])["node"], "node-a");
}

TEST(EtcdBlockBackendFake, ARefusedTakeOverSaysWhoHoldsItAndAReleasedOneIsClaimed) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushJson(txnAnswer(70, false, {rangeResponse({kv(kBlockKey, kHeldByB, 40, 41)})}));
  auto t = b.takeOver(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", seenB(), {});
  ASSERT_TRUE(t) << t.error().describe();
  EXPECT_EQ(t->state, ClaimState::kHeldByOther);
  EXPECT_EQ(t->holder.node, "node-b");
  // Released meanwhile: a plain claim.
  http.pushJson(txnAnswer(71, false, {rangeResponse({})}));
  http.pushJson(txnAnswer(72, true, {putResponse(72), putResponse(72)}));
  t = b.takeOver(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", seenB(), {});
  ASSERT_TRUE(t) << t.error().describe();
  EXPECT_EQ(t->state, ClaimState::kClaimed);
  EXPECT_EQ(t->holder.identity, "72");
  EXPECT_EQ(txnText(http.body(2)).compare,
            Strings{std::string("CREATE ") + kBlockKey + " EQUAL create_revision=\"0\""});
  // Taken by this very node meanwhile (another of its threads): adopted.
  http.pushJson(txnAnswer(73, false, {rangeResponse({kv(kBlockKey, kHeldByA, 40, 73)})}));
  t = b.takeOver(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", seenB(), {});
  ASSERT_TRUE(t) << t.error().describe();
  EXPECT_EQ(t->state, ClaimState::kAdopted);
  EXPECT_EQ(http.left(), 0U);
}

TEST(EtcdBlockBackendFake, RemoveGoneDeletesUnderTheSameCompares) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushJson(txnAnswer(70, true));
  EXPECT_EQ(b.removeGone(ClaimKind::kAddress, "p0", "10.1.0.5", seenB("43")), ReleaseOutcome::kReleased);
  const TxnText x = txnText(http.body(0));
  EXPECT_EQ(x.compare, goneCompares(kAddrKey, "43"));
  EXPECT_EQ(x.success, Strings{std::string("delete ") + kAddrKey});
  EXPECT_EQ(x.failure, Strings{std::string("range ") + kAddrKey});

  http.pushJson(txnAnswer(71, false, {rangeResponse({kv(kAddrKey, address("node-b", "c1:ib0", ""), 40, 43)})}));
  EXPECT_EQ(b.removeGone(ClaimKind::kAddress, "p0", "10.1.0.5", seenB("43")), ReleaseOutcome::kNotOurs);
  http.pushJson(txnAnswer(72, false, {rangeResponse({})}));
  EXPECT_EQ(b.removeGone(ClaimKind::kAddress, "p0", "10.1.0.5", seenB("43")), ReleaseOutcome::kGone);
  EXPECT_EQ(http.left(), 0U);
}

TEST(EtcdBlockBackendFake, ASeenHolderNotReadFromEtcdIsRefusedBeforeSending) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  for (const auto& version : {"", "abc", "0", "-3"}) {
    const auto t = b.takeOver(ClaimKind::kBlock, "p0", "b1", "node-a", seenB(version), {});
    ASSERT_FALSE(t) << version;
    EXPECT_EQ(t.error().kind, BackendErrc::kInvalidArgument);
    const auto r = b.removeGone(ClaimKind::kBlock, "p0", "b1", seenB(version));
    ASSERT_FALSE(r) << version;
    EXPECT_EQ(r.error().kind, BackendErrc::kInvalidArgument);
  }
  Holder noNode = seenB();
  noNode.node = "";
  EXPECT_FALSE(b.takeOver(ClaimKind::kBlock, "p0", "b1", "node-a", noNode, {}));
  EXPECT_TRUE(http.requests.empty());
}

TEST(EtcdBlockBackendFake, ForgetNodeDeletesTheRegistrationOnlyWithoutAnAliveKey) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushJson(txnAnswer(80, true));
  ASSERT_TRUE(b.forgetNode("node-b"));
  const TxnText x = txnText(http.body(0));
  EXPECT_EQ(x.compare, Strings{std::string("CREATE ") + kAliveB + " EQUAL create_revision=\"0\""});
  EXPECT_EQ(x.success, Strings{std::string("delete ") + kRegB});
  EXPECT_TRUE(x.failure.empty());

  http.pushJson(txnAnswer(81, false));
  const auto refused = b.forgetNode("node-b");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, BackendErrc::kInvalidArgument);
  EXPECT_NE(refused.error().message.find("node-b"), std::string::npos) << refused.error().describe();
  EXPECT_NE(refused.error().message.find("alive"), std::string::npos) << refused.error().describe();
}

// ---- definitions and demands -------------------------------------------------------------------

TEST(EtcdBlockBackendFake, DefinePoolIsCreateIfAbsentWithoutALeaseAndTheFirstStands) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  const std::string key = "/ibcni/definitions/p0";
  http.pushJson(txnAnswer(12, true, {putResponse(12)}));
  auto d = b.definePool({"p0", R"({"ranges":["10.1.0.0/16"]})", "network ib0 on node-a", "", false});
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->fields, R"({"ranges":["10.1.0.0/16"]})");
  EXPECT_EQ(d->identity, "12");
  const TxnText x = txnText(http.body(0));
  EXPECT_EQ(x.compare, Strings{"CREATE " + key + " EQUAL create_revision=\"0\""});
  EXPECT_EQ(x.success, Strings{"put " + key});
  EXPECT_EQ(x.failure, Strings{"range " + key});
  EXPECT_EQ(putValue(http.body(0)["success"][0]),
            json({{"fields", R"({"ranges":["10.1.0.0/16"]})"}, {"origin", "network ib0 on node-a"}}));

  // Replaced once since it was created (create_revision 7, mod_revision 9), and closed.
  const json first{{"fields", "F1"}, {"origin", "first"}, {"closed", true}};
  http.pushJson(txnAnswer(13, false, {rangeResponse({kv(key, first, 7, 9)})}));
  d = b.definePool({"p0", "F2", "second", "", false});
  ASSERT_TRUE(d) << d.error().describe();
  EXPECT_EQ(d->pool, "p0");
  EXPECT_EQ(d->fields, "F1");
  EXPECT_EQ(d->origin, "first");
  EXPECT_EQ(d->identity, "9") << "this version: mod_revision";
  EXPECT_TRUE(d->closed);

  http.pushJson(txnAnswer(14, true, {putResponse(14)}));
  PoolDefinition closed{"p1", "F", "o", "", false};
  closed.closed = true;
  ASSERT_TRUE(b.definePool(closed));
  EXPECT_EQ(putValue(http.body(2)["success"][0]), json({{"fields", "F"}, {"origin", "o"}, {"closed", true}}));
}

TEST(EtcdBlockBackendFake, ReplaceDefinitionIsOnePutComparedOnTheVersionSeen) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  const std::string key = "/ibcni/definitions/p0";
  PoolDefinition def{"p0", "F2", "redefined by node-a", "", false};
  def.closed = true;
  const json stored{{"fields", "F2"}, {"origin", "redefined by node-a"}, {"closed", true}};
  http.pushJson(txnAnswer(12, true, {putResponse(12), rangeResponse({kv(key, stored, 7, 12)})}));
  auto r = b.replaceDefinition(def, "9");
  ASSERT_TRUE(r) << r.error().describe();
  ASSERT_TRUE(*r);
  EXPECT_EQ((*r)->fields, "F2");
  EXPECT_EQ((*r)->identity, "12");
  EXPECT_TRUE((*r)->closed);
  const TxnText x = txnText(http.body(0));
  EXPECT_EQ(x.compare, Strings{"MOD " + key + " EQUAL mod_revision=\"9\""});
  EXPECT_EQ(x.success, (Strings{"put " + key, "range " + key})) << "without a lease";
  EXPECT_TRUE(x.failure.empty());
  EXPECT_EQ(putValue(http.body(0)["success"][0]), stored);

  http.pushJson(txnAnswer(13, false));  // changed or gone since seen
  r = b.replaceDefinition(def, "9");
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_FALSE(*r);
  for (const char* seen : {"", "abc", "0"}) {
    const auto bad = b.replaceDefinition(def, seen);
    ASSERT_FALSE(bad) << seen;
    EXPECT_EQ(bad.error().kind, BackendErrc::kInvalidArgument);
  }
  EXPECT_EQ(http.requests.size(), 2U);
}

TEST(EtcdBlockBackendFake, DefinitionAndDefinitionsReadTheDefinitionKeys) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushJson(range({}));
  auto one = b.definition("p0");
  ASSERT_TRUE(one) << one.error().describe();
  EXPECT_FALSE(*one);
  EXPECT_EQ(http.body(0), json({{"key", os::base64Encode("/ibcni/definitions/p0")}}));

  http.pushJson(range({kv("/ibcni/definitions/p0", json{{"fields", "F"}, {"origin", "o"}}, 7, 7)}));
  one = b.definition("p0");
  ASSERT_TRUE(one && *one);
  EXPECT_EQ((*one)->fields, "F");
  http.pushJson(range({kv("/ibcni/definitions/p0", "not a definition", 7, 7)}));
  one = b.definition("p0");
  ASSERT_FALSE(one);
  EXPECT_EQ(one.error().kind, BackendErrc::kBadAnswer);

}

TEST(EtcdBlockBackendFake, TheRegistryIsReadAndWrittenByCompareAndSwap) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts({"http://e1:2379"}, 0));
  http.pushJson(json::object());  // no registry yet
  auto none = b.registry();
  ASSERT_TRUE(none) << none.error().describe();
  EXPECT_TRUE(none->pools.empty());
  EXPECT_EQ(none->version, "");
  EXPECT_EQ(http.body(0), json({{"key", os::base64Encode("/ibcni/registry")}}));
  http.pushJson(txnAnswer(11, true, {putResponse(11)}));
  PoolRegistry reg{{{"p0", "F0"}}, ""};
  auto created = b.writeRegistry(reg);
  ASSERT_TRUE(created && *created);
  EXPECT_EQ(http.body(1)["compare"][0]["target"], "CREATE") << "created only if absent";
  EXPECT_EQ(decoded(http.body(1)["success"][0]["request_put"]["value"]), json({{"pools", {{"p0", "F0"}}}}).dump());
  http.pushJson(range({kv("/ibcni/registry", json{{"pools", {{"p0", "F0"}, {"p1", "F1"}}}}, 11, 12)}));
  auto two = b.registry();
  ASSERT_TRUE(two) << two.error().describe();
  EXPECT_EQ(two->pools.size(), 2U);
  EXPECT_EQ(two->version, "12");
  http.pushJson(txnAnswer(13, false, {}));
  auto stale = b.writeRegistry(*two);
  ASSERT_TRUE(stale);
  EXPECT_FALSE(*stale) << "changed meanwhile";
  EXPECT_EQ(http.body(3)["compare"][0]["target"], "MOD");
  EXPECT_EQ(http.body(3)["compare"][0]["mod_revision"], "12");
  http.pushJson(range({kv("/ibcni/registry", "not a registry", 11, 12)}));
  auto bad = b.registry();
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, BackendErrc::kBadAnswer);
}

TEST(EtcdBlockBackendFake, ADemandHangsOnTheNodesLeaseAndIsWithdrawnByADelete) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts({"http://e1:2379"}, 0));
  const std::string key = "/ibcni/pools/p0/demand/node-a";
  http.pushJson(grantAnswer(21));
  http.pushJson(txnAnswer(90, true, {putResponse(90)}));
  ASSERT_TRUE(b.demand("p0", "node-a", 3));
  EXPECT_EQ(http.path(0), "/v3/lease/grant");
  const TxnText x = txnText(http.body(1));
  EXPECT_TRUE(x.compare.empty());
  EXPECT_EQ(x.success, Strings{"put " + key + " lease=\"21\""});
  const json v = putValue(http.body(1)["success"][0]);
  EXPECT_EQ(v["node"], "node-a");
  EXPECT_EQ(v["wanted"], 3);
  EXPECT_TRUE(v["requestedAt"].is_string());

  // The lease expired: granted anew, the put again on it.
  http.pushJson(kLeaseNotFound, 404);
  http.pushJson(grantAnswer(22));
  http.pushJson(txnAnswer(91, true, {putResponse(91)}));
  ASSERT_TRUE(b.demand("p0", "node-a", 1));
  EXPECT_EQ(txnText(http.body(4)).success, Strings{"put " + key + " lease=\"22\""});

  http.pushJson(txnAnswer(92, true));
  ASSERT_TRUE(b.withdraw("p0", "node-a"));
  EXPECT_EQ(txnText(http.body(5)).success, Strings{"delete " + key});
  EXPECT_EQ(http.left(), 0U);
}

TEST(EtcdBlockBackendFake, DemandsAreReadWithWhenAndHowManyAndOldOnesLapse) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());  // leaseTtl 90 s
  const std::string fresh = os::rfc3339(std::chrono::system_clock::now());
  const std::string old = os::rfc3339(std::chrono::system_clock::now() - 10min);
  http.pushJson(range(
      {kv("/ibcni/pools/p0/demand/node-a", json{{"node", "node-a"}, {"wanted", 4}, {"requestedAt", fresh}}, 5, 5, 5),
       kv("/ibcni/pools/p0/demand/node-b", json{{"node", "node-b"}, {"wanted", 1}, {"requestedAt", old}}, 6, 6, 6)}));
  const auto d = b.demands("p0");
  ASSERT_TRUE(d) << d.error().describe();
  ASSERT_EQ(d->size(), 2U);
  EXPECT_EQ((*d)[0].node, "node-a");
  EXPECT_EQ((*d)[0].wanted, 4);
  ASSERT_TRUE((*d)[0].requestedAt);
  EXPECT_EQ(os::rfc3339(*(*d)[0].requestedAt), fresh);
  EXPECT_FALSE((*d)[0].lapsed);
  EXPECT_EQ((*d)[1].node, "node-b");
  EXPECT_TRUE((*d)[1].lapsed) << "older than the lease's TTL";
  EXPECT_EQ(decoded(http.body(0)["key"]), "/ibcni/pools/p0/demand/");
}

// ---- transport and answers ---------------------------------------------------------------------

BackendResult<ClaimOutcome> claimB1(EtcdBlockBackend& b) {
  return b.claim(ClaimKind::kBlock, "p0", "b1", "node-a", {});
}

TEST(EtcdBlockBackendFake, GarbageJsonIsABadAnswerNamingTheEndpoint) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  http.pushBody("<html>proxy says hi</html>");
  const auto c = claimB1(b);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kBadAnswer);
  EXPECT_NE(c.error().describe().find("http://e1:2379/v3/kv/txn"), std::string::npos) << c.error().describe();
  EXPECT_NE(c.error().describe().find("proxy says hi"), std::string::npos) << c.error().describe();
  const auto e = toCniError(c.error(), "claiming block b1 of pool p0");
  EXPECT_EQ(e.code, cni::Errc::kTryAgainLater);
  EXPECT_NE(e.msg.find("claiming block b1 of pool p0: bad answer: "), std::string::npos) << e.msg;
}

TEST(EtcdBlockBackendFake, AServerErrorKeepsEtcdsMessageAndCode) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts({"http://e1:2379", "http://e2:2379"}));
  http.pushJson({{"error", "etcdserver: mvcc: database space exceeded"},
                 {"message", "etcdserver: mvcc: database space exceeded"},
                 {"code", 8}},
                500);
  const auto c = claimB1(b);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kBadAnswer);
  EXPECT_EQ(c.error().backendCode, 8);
  EXPECT_NE(c.error().message.find("HTTP 500: etcdserver: mvcc: database space exceeded"), std::string::npos)
      << c.error().describe();
  EXPECT_EQ(http.requests.size(), 1U) << "not a reason to try another member";
}

TEST(EtcdBlockBackendFake, MissingOrUnreadableFieldsAreBadAnswers) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  const auto expectBad = [&](const char* what, const std::string& needle) {
    const auto c = claimB1(b);
    ASSERT_FALSE(c) << what;
    EXPECT_EQ(c.error().kind, BackendErrc::kBadAnswer) << what;
    EXPECT_NE(c.error().message.find(needle), std::string::npos) << what << ": " << c.error().describe();
  };
  http.pushJson({{"succeeded", true}});
  expectBad("succeeded without a revision", "header.revision");
  http.pushJson({{"header", header(3)}});
  expectBad("failed without a range response", "response_range");
  http.pushJson(txnAnswer(3, false, {rangeResponse({kv("/ibcni/pools/p0/blocks/b1", "not json", 4, 4)})}));
  expectBad("a value that is not ours", "/ibcni/pools/p0/blocks/b1");
  json bad = kv("/ibcni/pools/p0/blocks/b1", kHeldByB, 4, 4);
  bad["mod_revision"] = "four";
  http.pushJson(txnAnswer(3, false, {rangeResponse({bad})}));
  expectBad("a mod_revision that is no int64", "mod_revision");
  bad = kv("/ibcni/pools/p0/blocks/b1", kHeldByB, 4, 4);
  bad["key"] = "!!";
  http.pushJson(txnAnswer(3, false, {rangeResponse({bad})}));
  expectBad("a key that is not base64", "key");
  http.pushJson({{"header", header(3)}, {"responses", "none"}});
  expectBad("responses not an array", "responses");
  http.pushJson(txnAnswer(3, false, {{{"response_range", {{"kvs", "x"}}}}}));
  expectBad("kvs not an array", "kvs");

  EtcdBlockBackend fresh(http, opts({"http://e1:2379"}, 0));
  http.pushJson({{"header", header(1)}, {"TTL", "90"}});
  const auto g = fresh.renew("node-a", "p0", {});
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message.find("no lease ID"), std::string::npos) << g.error().describe();
  http.pushBody(R"({"result":{"ID":"5","TTL":"ninety"}})");
  const auto k = b.renew("node-a", "p0", {});
  ASSERT_FALSE(k);
  EXPECT_EQ(k.error().kind, BackendErrc::kBadAnswer);
  EXPECT_NE(k.error().message.find("TTL"), std::string::npos) << k.error().describe();
  EXPECT_EQ(http.left(), 0U);
}

TEST(EtcdBlockBackendFake, UnreachableEndpointsAreTriedInTurnAndAllNamed) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts({"http://e1:2379", "http://e2:2379", "http://e3:2379"}));
  http.pushError(http::ErrorKind::kConnect, "Failed to connect");
  http.pushJson({{"error", "etcdserver: no leader"}, {"message", "etcdserver: no leader"}, {"code", 14}}, 503);
  http.pushJson(txnAnswer(3, true));
  auto c = claimB1(b);
  ASSERT_TRUE(c) << c.error().describe();
  ASSERT_EQ(http.requests.size(), 3U);
  EXPECT_EQ(http.requests[0].url, "http://e1:2379/v3/kv/txn");
  EXPECT_EQ(http.requests[1].url, "http://e2:2379/v3/kv/txn");
  EXPECT_EQ(http.requests[2].url, "http://e3:2379/v3/kv/txn");
  EXPECT_EQ(http.requests[2].body, http.requests[0].body) << "the same txn";
  // The endpoint that answered is asked first next time, by every call.
  http.pushJson(range({}));
  ASSERT_TRUE(b.definition("p0"));
  EXPECT_EQ(http.requests[3].url, "http://e3:2379/v3/kv/range");

  http.pushError(http::ErrorKind::kConnect, "Connection refused");
  http.pushError(http::ErrorKind::kDns, "Could not resolve host");
  http.pushError(http::ErrorKind::kConnect, "Connection refused");
  c = claimB1(b);
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
  EtcdBlockBackend b(http, opts({"http://e1:2379", "http://e2:2379"}));
  // What a stopping member's gateway answers (seen during a storm with the leader stopped).
  http.pushJson({{"error", "grpc: the client connection is closing"},
                 {"message", "grpc: the client connection is closing"},
                 {"code", 1}},
                408);
  http.pushJson(txnAnswer(3, true));
  auto c = claimB1(b);
  ASSERT_TRUE(c) << c.error().describe();
  EXPECT_EQ(c->state, ClaimState::kClaimed);
  EXPECT_EQ(http.requests[1].url, "http://e2:2379/v3/kv/txn");
  // Both members going away: unreachable (error 11), naming each with what it said.
  http.pushJson({{"error", "grpc: the client connection is closing"}, {"code", 1}}, 408);
  http.pushJson({{"error", "etcdserver: request timed out"}, {"code", 14}}, 503);
  c = claimB1(b);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kUnreachable);
  EXPECT_NE(c.error().message.find("the client connection is closing"), std::string::npos) << c.error().describe();
  EXPECT_NE(c.error().message.find("request timed out"), std::string::npos) << c.error().describe();
}

ScriptedClient::Handler hangUntilTimeout() {
  return [](const http::Request& r) -> ScriptedClient::Answer {
    std::this_thread::sleep_for(r.timeout);
    return std::unexpected(http::HttpError{http::ErrorKind::kTimeout, "POST " + r.url, "Operation timed out", 28, 0});
  };
}

TEST(EtcdBlockBackendFake, TheWholeCallIsBoundedByTheTimeout) {
  ScriptedClient http;
  auto o = opts({"http://e1:2379", "http://e2:2379", "http://e3:2379"});
  o.timeout = 600ms;
  EtcdBlockBackend b(http, o);
  for (int i = 0; i < 3; ++i) {
    http.push(hangUntilTimeout());
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto c = claimB1(b);
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

TEST(EtcdBlockBackendFake, ACallsSecondRequestGetsOnlyTheTimeLeft) {
  ScriptedClient http;
  auto o = opts();
  o.timeout = 600ms;
  EtcdBlockBackend b(http, o);
  // The release's range takes 400 ms; its delete then has at most the 200 ms left.
  http.push([](const http::Request&) -> ScriptedClient::Answer {
    std::this_thread::sleep_for(400ms);
    return http::Response{200, {}, range({kv("/ibcni/pools/p0/blocks/b1", kHeldByA, 3, 3)}).dump()};
  });
  http.push(hangUntilTimeout());
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = b.release(ClaimKind::kBlock, "p0", "b1", "node-a", "");
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, BackendErrc::kTimeout);
  ASSERT_EQ(http.requests.size(), 2U);
  EXPECT_LE(http.requests[1].timeout, 200ms);
  EXPECT_LT(took, 800ms);
}

TEST(EtcdBlockBackendFake, ATakeOverThatFallsBackToAClaimGetsOnlyTheTimeLeft) {
  ScriptedClient http;
  auto o = opts();
  o.timeout = 600ms;
  EtcdBlockBackend b(http, o);
  // The takeover's txn takes 450 ms and finds the claim released: the claim it then makes is
  // part of the same call, with the 150 ms left.
  http.push([](const http::Request&) -> ScriptedClient::Answer {
    std::this_thread::sleep_for(450ms);
    return http::Response{200, {}, txnAnswer(70, false, {rangeResponse({})}).dump()};
  });
  http.push(hangUntilTimeout());
  const auto t0 = std::chrono::steady_clock::now();
  const auto t = b.takeOver(ClaimKind::kBlock, "p0", "10.1.0.0-27", "node-a", seenB(), {});
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_EQ(http.requests.size(), 2U);
  EXPECT_LE(http.requests[1].timeout, 150ms) << "the fallback claim was given a timeout of its own";
  EXPECT_LT(took, 800ms) << "the call outlived its 600 ms timeout";
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().kind, BackendErrc::kTimeout);
}

TEST(EtcdBlockBackendFake, AuthAndTlsFailuresAreConfigurationErrors) {
  ScriptedClient http;
  auto o = opts({"https://e1:2379", "https://e2:2379"});
  o.tls.caFile = "ca.pem";
  o.tls.certFile = "cert.pem";
  o.tls.keyFile = "key.pem";
  EtcdBlockBackend b(http, o);
  http.pushError(http::ErrorKind::kTls, "SSL certificate problem: unable to get local issuer certificate");
  auto c = claimB1(b);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kAuth);
  EXPECT_EQ(http.requests.size(), 1U) << "a TLS failure is not retried on another endpoint";
  EXPECT_EQ(http.requests[0].tls.caFile, "ca.pem");
  EXPECT_EQ(http.requests[0].tls.certFile, "cert.pem");
  EXPECT_EQ(http.requests[0].tls.keyFile, "key.pem");
  EXPECT_EQ(toCniError(c.error(), "x").code, cni::Errc::kInvalidConfig);

  for (const auto& [status, code] : {std::pair{403L, 7}, std::pair{401L, 16}}) {
    http.pushJson(
        {{"error", "etcdserver: permission denied"}, {"message", "etcdserver: permission denied"}, {"code", code}},
        status);
    c = claimB1(b);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().kind, BackendErrc::kAuth) << status;
    EXPECT_EQ(c.error().backendCode, code);
  }

  http.pushError(http::ErrorKind::kUnavailable, "libcurl.so.4: cannot open shared object file");
  c = claimB1(b);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kUnavailable);
  EXPECT_EQ(toCniError(c.error(), "x").code, cni::Errc::kInvalidEnvironment);
  http.pushError(http::ErrorKind::kInvalidRequest, "bad TLS options");
  c = claimB1(b);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, BackendErrc::kInvalidArgument);
  EXPECT_EQ(http.left(), 0U);
}

TEST(EtcdBlockBackendFake, MalformedNamesAreRefusedBeforeSendingByEveryCall) {
  ScriptedClient http;
  EtcdBlockBackend b(http, opts());
  const Holder seen = seenB();
  for (const std::string& bad : Strings{"", "a/b", "a b", "n\n", std::string(254, 'x'), "caf\xc3\xa9"}) {
    auto calls = callsNaming(b, bad, seen);
    calls.emplace_back("forgetNode", errc(b.forgetNode(bad)));
    for (const auto& [what, kind] : calls) {
      EXPECT_EQ(kind, BackendErrc::kInvalidArgument) << what << " of " << cni::quoted(bad);
    }
  }
  EXPECT_TRUE(http.requests.empty());
}

TEST(EtcdBlockBackendFake, OptionsThatCannotWorkAreRefused) {
  EXPECT_TRUE(EtcdBlockBackend::validate(opts({"http://127.0.0.1:2379", "https://etcd.example:2379"})));
  for (const auto& bad : {"127.0.0.1:2379", "ftp://x", "http://", "http://x:2379/", "http://a b"}) {
    const auto v = EtcdBlockBackend::validate(opts({bad}));
    ASSERT_FALSE(v) << bad;
    EXPECT_EQ(v.error().kind, BackendErrc::kInvalidArgument);
    EXPECT_NE(v.error().message.find(bad), std::string::npos) << v.error().describe();
  }
  EXPECT_FALSE(EtcdBlockBackend::validate(opts({})));
  auto o = opts();
  o.prefix = "/ibcni";
  EXPECT_FALSE(EtcdBlockBackend::validate(o));
  o = opts();
  o.leaseTtl = 0s;
  EXPECT_FALSE(EtcdBlockBackend::validate(o));
  o = opts();
  o.timeout = 0ms;
  EXPECT_FALSE(EtcdBlockBackend::validate(o));
}

TEST(EtcdBlockBackendFake, AnotherPrefixMovesEveryKey) {
  ScriptedClient http;
  auto o = opts();
  o.prefix = "/site-a/ipam/";
  EtcdBlockBackend b(http, o);
  EXPECT_EQ(b.claimKey(ClaimKind::kBlock, "p0", "b1"), "/site-a/ipam/pools/p0/blocks/b1");
  EXPECT_EQ(b.claimKey(ClaimKind::kAddress, "p0", "fd00::5"), "/site-a/ipam/pools/p0/addresses/fd00::5");
  EXPECT_EQ(b.aliveKey("n1"), "/site-a/ipam/nodes/n1/alive");
  EXPECT_EQ(b.registeredKey("n1"), "/site-a/ipam/nodes/n1/registered");
  http.pushJson(txnAnswer(3, true));
  ASSERT_TRUE(b.claim(ClaimKind::kBlock, "p0", "b1", "n1", {}));
  EXPECT_EQ(txnText(http.body(0)).success,
            (Strings{"put /site-a/ipam/pools/p0/blocks/b1", "put /site-a/ipam/nodes/n1/registered"}));
}

}  // namespace
}  // namespace ibcni::ipam
