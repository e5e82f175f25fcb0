// SPDX-License-Identifier: Apache-2.0
// The fixture of ibcni-ipam's cluster mode tests in process: EmbeddedIpam instances standing for
// nodes (each its own data directory and node name) over a real etcd 3.4 started by the test (and,
// for the kubernetes backend, a real kube-apiserver: tests/support/control_plane.h), or, with
// memory_ set before SetUp(), over the claim store in memory (support/memory_claim_store.h). The HTTP client is the real one,
// wrapped to count the calls and to lose an answer on purpose; the wall clock and the boot clock
// of every node are the fixture's, moved by advance().
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "ipam/cluster/block_ledger.h"
#include "ipam/backends/etcd_block_backend.h"
#include "fake_store.h"
#include "lib/http/curl_http_client.h"
#include "ibcni/os/text.h"
#include "ipam/backends/k8s_block_backend.h"
#include "store_test_util.h"
#include "support/control_plane.h"
#include "support/etcd_cluster.h"
#include "support/memory_claim_store.h"

namespace ibcni::ipam::testing {

using Time = std::chrono::system_clock::time_point;

// The real client, counting every request (and those reading a range of keys); `loseAnswers`
// requests whose body holds `loseIf` (and whose method is `loseMethod`, when set) are sent but their
// answer is replaced by a timeout (the write happened, the node never learns it).
class TapClient final : public http::HttpClient {
 public:
  http::HttpResult<http::Response> send(const http::Request& r) override {
    ++calls;
    if (r.body.find("\"range_end\"") != std::string::npos) {
      ++rangeReads;
    }
    auto res = inner_.send(r);
    const bool method = !loseMethod || *loseMethod == r.method;
    if (loseAnswers > 0 && method && (loseIf.empty() || r.body.find(loseIf) != std::string::npos ||
                                      r.url.find(loseIf) != std::string::npos)) {
      --loseAnswers;
      return std::unexpected(http::HttpError{http::ErrorKind::kTimeout, r.url, "answer lost on purpose", 28, 0});
    }
    return res;
  }
  std::atomic<int> calls{0};
  std::atomic<int> rangeReads{0};  ///< etcd requests reading a range of keys (a prefix: a list)
  std::atomic<int> loseAnswers{0};
  std::string loseIf;
  std::optional<http::Method> loseMethod;

 private:
  http::CurlHttpClient inner_;
};

/// What a test network's configuration says (conf()).
struct NetSpec {
  std::string network = "ibnet";
  std::string pool;  ///< ipam.cluster.pool; empty: the network's name
  std::string ranges = R"([[{"subnet": "10.56.0.0/24"}]])";
  int blockSize = 16;
  std::string extraCluster;  ///< more members of ipam.cluster (", \"releaseAfterSeconds\": 0")
  std::string extraIpam;     ///< more members of ipam (", \"reservations\": {...}")
  std::string kubeconfig;    ///< non-empty: the kubernetes backend with this kubeconfig
  std::string k8sNamespace;  ///< its ipam.cluster.kubernetes.namespace (empty: the default)
};

class ClusterFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (memory_) {
      world_->clock = [this] { return now_.load(); };
      return;
    }
    ASSERT_TRUE(etcd_.start(1));
  }

  // One simulated node: its own data directory and name, the shared backend config.
  EmbeddedIpam& node(const std::string& name) {
    auto& slot = nodes_[name];
    if (!slot) {
      slot = std::make_unique<EmbeddedIpam>(nodeOptions(name));
    }
    return *slot;
  }
  /// Node `name` (before its first use), its backends built by `factory`.
  EmbeddedIpam& nodeWith(const std::string& name, BackendFactory factory) {
    EmbeddedIpamOptions o = nodeOptions(name);
    o.backends = std::move(factory);
    nodes_[name] = std::make_unique<EmbeddedIpam>(std::move(o));
    return *nodes_[name];
  }
  /// The options of node `name`: its data directory, the fixture's clocks and backends.
  EmbeddedIpamOptions nodeOptions(const std::string& name) {
    EmbeddedIpamOptions o;
    o.defaultDataDir = tmp_.path() + "/" + name;
    o.netnsChecker = checker_;
    o.clock = [this] { return now_.load(); };
    o.bootClock = [this] { return bootNow(); };
    o.nodeNameFile = "";
    o.backends = backends();
    return o;
  }

  /// The backends of every node: the configured one over the counting client.
  BackendFactory backends() {
    return [this](const config::ClusterConf& c,
                  const BackendContext& ctx) -> cni::Result<std::unique_ptr<BlockBackend>> {
      if (memory_) {
        return ::ibcni::testing::memoryBackend(world_);
      }
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
  }

  /// The nodes' boot clock: the fixture's wall clock since the epoch, on one boot.
  os::BootStamp bootNow() const {
    return os::BootStamp{"fixture-boot", std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             now_.load().time_since_epoch()).count()};
  }
  /// Time passes for every node (not for etcd, whose leases run on its own clock).
  void advance(std::chrono::seconds d) { now_ = now_.load() + d; }

  // The network config of node `n`.
  std::string conf(const std::string& n, const NetSpec& s = {}) const {
    std::string backend = s.kubeconfig.empty()
                              ? R"("backend": "etcd", "etcd": {"endpoints": [")" + endpoints() + R"("]})"
                              : R"("backend": "kubernetes", "kubernetes": {"kubeconfig": ")" + s.kubeconfig + "\"" +
                                    (s.k8sNamespace.empty() ? "" : R"(, "namespace": ")" + s.k8sNamespace + "\"") + "}";
    return R"({"cniVersion": "1.1.0", "name": ")" + s.network + R"(", "type": "ibcni", "ipam": {"type": "ibcni-ipam",
        "dataDir": ")" + tmp_.path() + "/" + n + R"(", "ranges": )" + s.ranges + s.extraIpam +
           R"(, "cluster": {)" + backend + R"(, "blockSize": )" + std::to_string(s.blockSize) +
           R"(, "nodeName": ")" + n + R"(", "timeoutMs": 2000)" + (s.pool.empty() ? "" : R"(, "pool": ")" + s.pool + "\"") +
           s.extraCluster + "}}}";
  }
  std::string conf(const std::string& n, const std::string& extraCluster) const {
    NetSpec s;
    s.extraCluster = extraCluster;
    return conf(n, s);
  }

  /// etcd's endpoints; with the store in memory, one that is never dialled (the factory ignores it).
  std::string endpoints() const { return memory_ ? "http://127.0.0.1:9" : etcd_.endpointList(); }

  std::string netns(const std::string& n, const std::string& cid) const { return "/run/netns/" + n + "-" + cid; }

  cni::Result<cni::AddResult> add(const std::string& n, const std::string& cid, const std::string& c = "",
                                  const std::string& cniArgs = "") {
    checker_->state[netns(n, cid)] = os::NetnsLiveness::kAlive;
    return node(n).add(makeRequest(c.empty() ? conf(n) : c, cid, netns(n, cid), cniArgs));
  }
  cni::Result<void> del(const std::string& n, const std::string& cid, const std::string& c = "") {
    return node(n).del(makeRequest(c.empty() ? conf(n) : c, cid, netns(n, cid), "", "net1", cni::Command::kDel));
  }
  /// The pod's network namespace is gone (it died without a DEL).
  void kill(const std::string& n, const std::string& cid) { checker_->state[netns(n, cid)] = os::NetnsLiveness::kGone; }
  /// CNI GC of network `c` on node `n`, every attachment in `valid` (container IDs) kept.
  cni::Result<void> gc(const std::string& n, const std::string& c, const std::vector<std::string>& valid) {
    nlohmann::json j = nlohmann::json::parse(c);
    j["cni.dev/valid-attachments"] = nlohmann::json::array();
    for (const auto& cid : valid) {
      j["cni.dev/valid-attachments"].push_back({{"containerID", cid}, {"ifname", "net1"}});
    }
    return node(n).gc(makeRequest(j.dump(), "", "", "", "net1", cni::Command::kGc));
  }
  /// The node agent's pass over the pool of `c` on node `n`.
  cni::Result<ReclaimOutcome> pass(const std::string& n, const std::string& c = "") {
    return node(n).reclaimPool(makeRequest(c.empty() ? conf(n) : c, "", ""), false);
  }

  std::string ledgerDir(const std::string& n, const std::string& pool = "ibnet") const {
    return tmp_.path() + "/" + n + "/.cluster/" + pool;
  }
  Ledger ledger(const std::string& n, const std::string& pool = "ibnet") {
    auto l = readLedger(ledgerDir(n, pool));
    EXPECT_TRUE(l && *l) << ledgerDir(n, pool);
    return l && *l ? **l : Ledger{};
  }
  std::vector<std::string> owned(const std::string& n, const std::string& pool = "ibnet") {
    std::vector<std::string> out;
    for (const auto& e : ledger(n, pool).blocks) {
      if (e.state == LedgerEntry::State::kOwned) {
        out.push_back(e.name);
      }
    }
    return out;
  }

  EtcdBlockBackend etcdBackend() {
    EtcdBlockBackend::Options o;
    o.endpoints = etcd_.endpoints();
    return EtcdBlockBackend(http_, o);
  }
  /// The store itself (etcd, or the one in memory), as a node's backend reaches it.
  std::unique_ptr<BlockBackend> store() {
    if (memory_) {
      return ::ibcni::testing::memoryBackend(world_);
    }
    return std::make_unique<EtcdBlockBackend>(etcdBackend());
  }
  // The claims the store (etcd, or the one in memory) holds for the pool: name -> node.
  std::map<std::string, std::string> etcdClaims(ClaimKind kind, const std::string& pool = "ibnet") {
    auto list = store()->list(kind, pool, std::nullopt);
    EXPECT_TRUE(list) << list.error().describe();
    std::map<std::string, std::string> out;
    for (const auto& c : list ? *list : std::vector<Claim>{}) {
      out[c.name] = c.holder.node;
    }
    return out;
  }
  std::map<std::string, std::string> etcdBlocks(const std::string& pool = "ibnet") {
    return etcdClaims(ClaimKind::kBlock, pool);
  }
  /// The requests sent to the store: etcd's HTTP requests, or the calls of the store in memory.
  int backendCalls() const { return memory_ ? world_->calls : http_.calls.load(); }
  /// The lists the store served: etcd's range reads of a prefix, the memory store's list calls.
  int rangeReads() const { return memory_ ? world_->lists : http_.rangeReads.load(); }
  /// The store stops answering (etcd: its member stopped).
  ::testing::AssertionResult stopBackend() {
    if (memory_) {
      world_->down = true;
      return ::testing::AssertionSuccess();
    }
    return etcd_.stopMember(0);
  }
  /// The store answers again.
  ::testing::AssertionResult startBackend() {
    if (memory_) {
      world_->down = false;
      return ::testing::AssertionSuccess();
    }
    if (auto s = etcd_.startMember(0); !s) {
      return s;
    }
    return etcd_.waitHealthy();
  }
  /// Where the store is, as an error names it.
  std::string backendEndpoint() const { return memory_ ? "memory" : etcd_.endpoint(0); }

  /// POST of `body` to etcd's gateway `path`; the answer's JSON.
  nlohmann::json etcdPost(const std::string& path, const nlohmann::json& body) {
    http::Request r;
    r.method = http::Method::kPost;
    r.url = etcd_.endpoint(0) + path;
    r.body = body.dump();
    auto a = http_.send(r);
    EXPECT_TRUE(a && a->status == 200) << path << ": " << (a ? a->body : a.error().describe());
    return a ? nlohmann::json::parse(a->body, nullptr, false) : nlohmann::json();
  }
  /// Node `n`'s etcd lease expires (what a stopped agent leads to): revoked.
  void lapse(const std::string& n, const std::string& pool = "ibnet") {
    const auto lease = ledger(n, pool).etcdLease;
    ASSERT_NE(lease, 0) << n << " has no lease yet";
    etcdPost("/v3/lease/revoke", {{"ID", std::to_string(lease)}});
  }
  /// Deletes an etcd key (an etcd restore, a hand).
  void etcdDelete(const std::string& key) {
    etcdPost("/v3/kv/deleterange", {{"key", os::base64Encode(key)}});
  }

  bool memory_ = false;  ///< the store in memory instead of etcd (set before SetUp)
  std::shared_ptr<::ibcni::testing::MemoryWorld> world_ = std::make_shared<::ibcni::testing::MemoryWorld>();
  ::ibcni::testing::EtcdCluster etcd_;
  TempDir tmp_;
  TapClient http_;
  std::shared_ptr<FakeNetnsChecker> checker_ = std::make_shared<FakeNetnsChecker>();
  std::atomic<Time> now_{Time(std::chrono::seconds(1900000000))};
  std::map<std::string, std::unique_ptr<EmbeddedIpam>> nodes_;
};

/// Where the claims are: a real etcd, or the claim store in memory (the claim protocol's third
/// adapter).
enum class Store { kEtcd, kMemory };
inline void PrintTo(Store s, std::ostream* os) { *os << (s == Store::kEtcd ? "etcd" : "memory"); }
inline std::string storeName(const ::testing::TestParamInfo<Store>& i) {
  return i.param == Store::kEtcd ? "etcd" : "memory";
}

/// ClusterFixture over the store its parameter names.
class ClusterStoreFixture : public ClusterFixture, public ::testing::WithParamInterface<Store> {
 protected:
  void SetUp() override {
    memory_ = GetParam() == Store::kMemory;
    ClusterFixture::SetUp();
  }
};

inline std::string address(const cni::Result<cni::AddResult>& r) {
  return r && !r->ips.empty() ? r->ips[0].address.address.toString() : "(failed: " + (r ? "" : r.error().msg) + ")";
}

/// Whether `ip` lies in block `key` ("10.56.0.32-28").
inline bool inBlock(const std::string& ip, const std::string& key) {
  auto span = spanOfKey(key);
  auto a = net::IpAddress::parse(ip);
  return span && a && span->contains(*a);
}

/// A real kube-apiserver (the fixture's, tests/support/control_plane.h) behind the fault proxy, a
/// namespace of the test's own, the chart's rights for ServiceAccount "ibcni" in it, a kubeconfig
/// with its token, and the Nodes the test creates (removed at the end).
struct K8sWorld {
  ::ibcni::testing::ControlPlane cp;
  ::ibcni::testing::ApiProxy api;
  std::string ns;
  std::string token;
  std::string kubeconfig;
  http::CurlHttpClient http;
  std::set<std::string> nodes{"node-a", "node-b", "node-c"};

  ~K8sWorld() {
    if (!api.url().empty()) {
      for (const auto& n : nodes) {
        (void)api.deleteNode(n);
      }
    }
  }

  /// False (with why) when the components are not built: the test skips.
  static bool available() { return ::ibcni::testing::ControlPlane::built(); }

  ::testing::AssertionResult start(const std::string& dir) {
    if (auto s = ::ibcni::testing::startApi(cp, api); !s) {
      return s;
    }
    auto n = api.freshNamespace("cluster-pool");
    if (!n) {
      return ::testing::AssertionFailure() << n.error();
    }
    ns = *n;
    auto t = api.serviceAccount(ns, "ibcni", ::ibcni::testing::leaseRules(), ::ibcni::testing::nodeRules());
    if (!t) {
      return ::testing::AssertionFailure() << t.error();
    }
    token = *t;
    for (const auto& node : nodes) {
      if (auto d = api.deleteNode(node); !d) {
        return d;
      }
    }
    api.clearStats();
    kubeconfig = dir + "/kubeconfig";
    return ::ibcni::testing::writeTokenKubeconfig(kubeconfig, api.url(), token);
  }
  /// The NetSpec fields of this world: its kubeconfig and namespace.
  void into(NetSpec& s) const {
    s.kubeconfig = kubeconfig;
    s.k8sNamespace = ns;
  }
  /// An API call with the token; the answer (any status).
  http::HttpResult<http::Response> call(http::Method m, const std::string& path, const std::string& body = "") {
    http::Request r;
    r.method = m;
    r.url = api.url() + path;
    r.body = body;
    r.headers.push_back({"Authorization", "Bearer " + token});
    if (!body.empty()) {
      r.headers.push_back({"Content-Type", "application/json"});
    }
    return http.send(r);
  }
  void addNode(const std::string& n) {
    nodes.insert(n);
    EXPECT_TRUE(api.createNode(n));
  }
  void deleteNode(const std::string& n) { EXPECT_TRUE(api.deleteNode(n)); }
  /// The Leases of the namespace whose name starts with `prefix`: name -> holderIdentity.
  std::map<std::string, std::string> leases(const std::string& prefix) {
    auto a = call(http::Method::kGet, "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases");
    std::map<std::string, std::string> out;
    const auto doc = a ? nlohmann::json::parse(a->body, nullptr, false) : nlohmann::json();
    for (const auto& item : doc.is_object() && doc.contains("items") ? doc["items"] : nlohmann::json::array()) {
      const std::string name = item["metadata"]["name"];
      if (name.starts_with(prefix)) {
        out[name] = item["spec"].value("holderIdentity", "");
      }
    }
    return out;
  }
  /// Makes the Lease `name` look unrenewed for an hour (what a stopped agent leads to).
  ::testing::AssertionResult age(const std::string& name) {
    const std::string path = "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases/" + name;
    auto a = call(http::Method::kGet, path);
    if (!a || a->status != 200) {
      return ::testing::AssertionFailure() << "GET " << name << ": " << (a ? a->body : a.error().describe());
    }
    auto doc = nlohmann::json::parse(a->body);
    const auto old = std::chrono::system_clock::now() - std::chrono::hours(1);
    const auto secs = std::chrono::system_clock::to_time_t(old);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[40];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S.000000Z", &tm);
    doc["spec"]["renewTime"] = buf;
    doc["spec"]["acquireTime"] = buf;
    auto put = call(http::Method::kPut, path, doc.dump());
    if (!put || put->status != 200) {
      return ::testing::AssertionFailure() << "PUT " << name << ": " << (put ? put->body : put.error().describe());
    }
    return ::testing::AssertionSuccess();
  }
  /// Every body ibcni-ipam sent was taken as valid by the server.
  ::testing::AssertionResult allValid() const { return api.allValid(); }
};

}  // namespace ibcni::ipam::testing
