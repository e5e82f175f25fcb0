// SPDX-License-Identifier: Apache-2.0
// ibcni-ipam's cluster mode on a simulated cluster (tests/support/cluster_sim.h): the built
// ibcni-ipam exec'd as a runtime execs it, by many nodes at once, against a real 3-member etcd
// and a real kube-apiserver (tests/support/control_plane.h) behind the fault proxy (labels etcd and
// kubernetes; no root needed: the processes enter no namespace, CNI_NETNS is /proc/self/ns/net).
//
//  * ClusterSim.HundredNodesTwentyPodsEach: 100 nodes x 20 pods, the 2000 ADDs in random order,
//    8 at a time across and within nodes: every ADD succeeds, no address twice in the cluster,
//    every address in a block its node owns, no block with two holders, each node's blocks.json
//    equal to the backend's keys; then the 2000 DELs free everything. A node-local ibcni-ipam
//    (one that ignores ipam.cluster) fails here: each node hands out the same addresses.
//  * ClusterSim.HundredNodesTwentyPodsEachThroughTheKubernetesApi: the same storm against the
//    kubernetes backend (a Lease per block) through a real kube-apiserver: the ledgers compared
//    with the Leases, the API requests per ADD reported, every body the plugin sent taken as valid.
//  * ClusterSimFaults.EtcdMembersStoppedDuringAStorm: etcd's leader stopped during a storm of ADDs
//    (all succeed), then 2 of 3 members (ADDs in owned blocks and DELs succeed, ADDs needing a
//    block fail with error 11 within the timeout, nothing half-claimed), then both back.
//  * ClusterSimFaults.KubernetesApiFaultsDuringABlockClaim: 500s, slow answers, garbage JSON,
//    dropped connections and lost answers of the API while a node claims: clear errors within
//    the timeout, nothing held, lost answers adopted by the next ADD.
//  * ClusterSimFaults.KillDuringBlockClaim: 100 times, an ADD that must claim a new block is
//    SIGKILLed after 0-30 ms; the ADD run again succeeds, and then no block is lost (every block
//    the backend gives the node is in its blocks.json), none has two holders, no address twice.
//  * ClusterSimChecks.*: the checks themselves on hand-made state (blocks.json files written here,
//    keys put into etcd): they pass on a consistent cluster and name each kind of breakage.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <iostream>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "lib/http/curl_http_client.h"
#include "ibcni/os/text.h"
#include "support/cluster_sim.h"
#include "support/daemon_process.h"
#include "support/etcd_cluster.h"

namespace ibcni::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A private directory for the nodes' data dirs, removed with the test; on tmpfs (/dev/shm) as
// ibcni-ipam's default data dir (/run) is.
class TempRoot {
 public:
  TempRoot() {
    const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    std::string tmpl = (base / "ibcni-cluster-sim-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) {
      path_ = tmpl;
    }
  }
  ~TempRoot() {
    std::error_code ec;
    if (!path_.empty()) {
      fs::remove_all(path_, ec);
    }
  }
  TempRoot(const TempRoot&) = delete;
  TempRoot& operator=(const TempRoot&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(ClusterSim, HundredNodesTwentyPodsEach) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.start(3));
  TempRoot root;
  ASSERT_FALSE(root.path().empty());
  ClusterSimOptions o;
  o.plugin = IBCNI_IPAM_BINARY;
  o.root = root.path();
  o.nodes = 100;
  o.etcdEndpoints = etcd.endpoints();
  ClusterSim sim(o);

  const auto pods = ClusterSim::pods(100, 20, 18);
  const auto t0 = std::chrono::steady_clock::now();
  const auto adds = sim.callAll(CniVerb::kAdd, pods, 8);
  const double addSeconds = secondsSince(t0);
  std::cout << "2000 ADDs over 100 nodes, 8 at a time: " << addSeconds << " s\n";

  ASSERT_TRUE(sim.allSucceeded(adds));
  ASSERT_TRUE(sim.noAddressTwice(adds));
  EXPECT_TRUE(sim.addressesInOwnBlocks(adds));
  EXPECT_TRUE(sim.blocksConsistent());
  auto blocks = sim.backendBlocks();
  ASSERT_TRUE(blocks) << blocks.error();
  std::set<std::string> holders;
  for (const auto& b : *blocks) {
    holders.insert(b.node);
  }
  EXPECT_EQ(holders.size(), 100u) << "every node claimed blocks of its own";
  // 20 pods fit in one block of 32 (30 usable in the block holding the subnet's network and
  // gateway addresses): a node that claims only when its blocks are full needs one. Two per node
  // leaves room for a claim raced by a concurrent ADD of the same node, never more.
  EXPECT_LE(blocks->size(), 200u) << "blocks are claimed only when the owned ones are full";

  const auto t1 = std::chrono::steady_clock::now();
  const auto dels = sim.callAll(CniVerb::kDel, pods, 8);
  std::cout << "2000 DELs: " << secondsSince(t1) << " s\n";
  EXPECT_TRUE(sim.allSucceeded(dels));
  EXPECT_TRUE(sim.storesEmpty());
  // The emptied blocks stay the nodes' until `ibcni-ipam gc` gives them back after
  // releaseAfterSeconds: their records must still agree with the backend.
  EXPECT_TRUE(sim.blocksConsistent());
}

// The same storm against the default backend: every block a coordination.k8s.io/v1 Lease created
// through a real kube-apiserver (the fixture's, behind the fault proxy), authenticated by a
// kubeconfig with the ServiceAccount's token, authorized by the chart's RBAC in a namespace of the
// test's own. The ledgers are compared with the Leases (holder = spec.holderIdentity, block =
// annotation ibcni.io/key), and the server must have taken every body the plugin sent as valid.
TEST(ClusterSim, HundredNodesTwentyPodsEachThroughTheKubernetesApi) {
  if (!ControlPlane::built()) {
    GTEST_SKIP() << ControlPlane::kNotBuilt;
  }
  ControlPlane cp;
  ApiProxy api;
  ASSERT_TRUE(startApi(cp, api));
  TempRoot root;
  ASSERT_FALSE(root.path().empty());
  ClusterSimOptions o;
  o.plugin = IBCNI_IPAM_BINARY;
  o.root = root.path();
  o.nodes = 100;
  ASSERT_TRUE(useKubernetes(api, root.path(), o));
  ClusterSim sim(o);
  api.clearStats();

  const auto pods = ClusterSim::pods(100, 20, 18);
  const auto t0 = std::chrono::steady_clock::now();
  const auto adds = sim.callAll(CniVerb::kAdd, pods, 8);
  const double addSeconds = secondsSince(t0);
  const auto stats = apiRequestCounts(api.url());
  ASSERT_TRUE(stats) << stats.error();
  std::cout << "2000 ADDs over 100 nodes through the Kubernetes API, 8 at a time: " << addSeconds << " s; "
            << stats->at("total") << " API requests (" << static_cast<double>(stats->at("total")) / 2000.0
            << " per ADD):";
  for (const auto& [k, v] : *stats) {
    if (k != "total") {
      std::cout << " " << k << "=" << v;
    }
  }
  std::cout << "\n";

  ASSERT_TRUE(sim.allSucceeded(adds));
  ASSERT_TRUE(sim.noAddressTwice(adds));
  EXPECT_TRUE(sim.addressesInOwnBlocks(adds));
  EXPECT_TRUE(sim.blocksConsistent());
  auto blocks = sim.backendBlocks();
  ASSERT_TRUE(blocks) << blocks.error();
  std::set<std::string> holders;
  for (const auto& b : *blocks) {
    holders.insert(b.node);
  }
  EXPECT_EQ(holders.size(), 100u) << "every node holds Leases of its own";
  EXPECT_LE(blocks->size(), 200u) << "blocks are claimed only when the owned ones are full";
  // The hot path makes no API call: the requests are a few per claimed block (today 6 for a node's
  // first: the pool definition's create and get, the list of every pool's definition (overlaps),
  // the node's own blocks (a ledger rebuilt), the create, and the definition read after it (a
  // claim stands only under the definition it was made under); a race lost to another node costs a
  // list more), none per ADD within an owned block.
  EXPECT_LE(stats->at("total"), 7 * blocks->size()) << "API requests beyond the block claims";

  const auto t1 = std::chrono::steady_clock::now();
  const auto dels = sim.callAll(CniVerb::kDel, pods, 8);
  std::cout << "2000 DELs: " << secondsSince(t1) << " s\n";
  EXPECT_TRUE(sim.allSucceeded(dels));
  EXPECT_TRUE(sim.storesEmpty());
  EXPECT_TRUE(sim.blocksConsistent());
  EXPECT_TRUE(api.allValid());
}

// Whether every block `node` owns is full: each address of an owned block (the subnet's
// network, broadcast and gateway addresses aside) is held by one of `held`. Only then must the
// next ADD claim a block. The block size is 4, so a block's addresses can be listed.
bool ownedBlocksFull(const ClusterSim& sim, int node, const std::set<std::string>& held) {
  auto blocks = sim.nodeBlocks(node);
  if (!blocks) {
    return true;  // no blocks.json yet: nothing owned
  }
  for (const auto& b : *blocks) {
    if (b.state != "owned") {
      continue;
    }
    // IPv4 only: a.b.c.d/30
    unsigned a = 0, bb = 0, c = 0, d = 0;
    if (std::sscanf(b.cidr.c_str(), "%u.%u.%u.%u/", &a, &bb, &c, &d) != 4) {
      return false;
    }
    for (unsigned i = 0; i < 4; ++i) {
      const unsigned last = d + i;
      const std::string addr = std::to_string(a) + "." + std::to_string(bb) + "." + std::to_string(c) + "." +
                               std::to_string(last);
      const bool reserved = (c == 0 && (last == 0 || last == 1)) || (c == 255 && last == 255);
      if (!reserved && held.count(addr) == 0) {
        return false;
      }
    }
  }
  return true;
}

#ifdef IBCNI_AGENT_BINARY
// The node agent's relay socket carries ibcni-ipam's cluster requests: an ibcni-ipam installed with
// no ibcni beside it (so that no `ibcni http-relay` can be started) claims its nodes' blocks while
// ibcni-agent serves the socket, and a fresh node's first ADD fails naming the missing relay once the
// agent is stopped (its socket removed).
TEST(ClusterSim, ThroughTheAgentsRelaySocket) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.start(1));
  TempRoot root;
  ASSERT_FALSE(root.path().empty());
  const std::string bin = root.path() + "/bin";
  fs::create_directories(bin);
  fs::copy_file(IBCNI_IPAM_BINARY, bin + "/ibcni-ipam");
  std::optional<RelayAgent> agent;
  agent.emplace(IBCNI_AGENT_BINARY, root.path() + "/agent");
  ASSERT_TRUE(agent->up()) << "the agent serves no relay socket";
  const std::string socket = agent->socket();

  ClusterSimOptions o;
  o.plugin = bin + "/ibcni-ipam";
  o.root = root.path() + "/nodes";
  o.nodes = 4;
  o.etcdEndpoints = etcd.endpoints();
  o.relaySocket = socket;
  ClusterSim sim(o);
  const auto adds = sim.callAll(CniVerb::kAdd, ClusterSim::pods(3, 2, 5), 3);
  ASSERT_TRUE(sim.allSucceeded(adds));
  EXPECT_TRUE(sim.noAddressTwice(adds));
  EXPECT_TRUE(sim.blocksConsistent());

  EXPECT_EQ(agent->stop(SIGTERM), 0) << "the agent did not exit 0 on SIGTERM";
  agent.reset();
  EXPECT_FALSE(fs::exists(socket)) << "the stopped agent left its socket";
  const CniCall fresh = sim.call(CniVerb::kAdd, PodRef{3, 0});
  EXPECT_FALSE(fresh.ok()) << fresh.describe("node-3");
  EXPECT_NE(fresh.out.find("could not be started"), std::string::npos) << fresh.describe("node-3");
}
#endif

TEST(ClusterSimFaults, KillDuringBlockClaim) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.start(3));
  TempRoot root;
  ASSERT_FALSE(root.path().empty());
  ClusterSimOptions o;
  o.plugin = IBCNI_IPAM_BINARY;
  o.root = root.path();
  o.nodes = 25;
  o.blockSize = 4;  // a few ADDs fill a node's blocks, so that the next one must claim
  o.etcdEndpoints = etcd.endpoints();
  ClusterSim sim(o);

  std::mt19937 rng(1812);
  std::uniform_int_distribution<int> delayUs(0, 30000);
  std::vector<int> nextPod(o.nodes, 0);
  std::map<PodRef, CniCall> live;  // every pod's last successful ADD
  int killedBeforeExit = 0;
  int claimed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) {
    const int node = i % o.nodes;
    std::set<std::string> held;
    for (const auto& [pod, add] : live) {
      if (pod.node == node) {
        held.insert(add.addresses.begin(), add.addresses.end());
      }
    }
    // Fill the node's owned blocks, so that the ADD to be killed must claim a new one.
    for (int guard = 0; !ownedBlocksFull(sim, node, held); ++guard) {
      ASSERT_LT(guard, 8) << "filling " << sim.nodeName(node) << "'s blocks did not end";
      const PodRef pod{node, nextPod[node]++};
      const CniCall add = sim.call(CniVerb::kAdd, pod);
      ASSERT_TRUE(add.ok() && !add.addresses.empty()) << add.describe(sim.nodeName(node));
      held.insert(add.addresses.begin(), add.addresses.end());
      live[pod] = add;
    }
    const auto before = sim.nodeBlocks(node);
    const std::size_t ownedBefore =
        before ? static_cast<std::size_t>(std::count_if(before->begin(), before->end(),
                                                        [](const NodeBlock& b) { return b.state == "owned"; }))
               : 0;

    const PodRef victim{node, nextPod[node]++};
    std::error_code ec;
    fs::create_directories(sim.dataDir(node), ec);
    auto proc = sim.start(CniVerb::kAdd, victim);
    ASSERT_TRUE(proc) << proc.error();
    std::this_thread::sleep_for(std::chrono::microseconds(delayUs(rng)));
    proc->kill9();
    const auto run = proc->wait(10s);
    killedBeforeExit += run.status == 128 + SIGKILL ? 1 : 0;

    // The runtime tries again: the same ADD succeeds (adopting whatever the killed one left).
    const CniCall again = sim.call(CniVerb::kAdd, victim);
    ASSERT_TRUE(again.ok() && !again.addresses.empty())
        << "iteration " << i << ": ADD after kill -9: " << again.describe(sim.nodeName(node));
    live[victim] = again;
    auto after = sim.nodeBlocks(node);
    ASSERT_TRUE(after) << after.error();
    const auto ownedAfter = static_cast<std::size_t>(
        std::count_if(after->begin(), after->end(), [](const NodeBlock& b) { return b.state == "owned"; }));
    claimed += ownedAfter > ownedBefore ? 1 : 0;
    // No block lost: every block the backend gives this node is in its blocks.json.
    ASSERT_TRUE(sim.nodeBlocksMatchBackend(node)) << "iteration " << i << ", killed after " << run.elapsed().count()
                                                  << " ns";
    // A further ADD on the node works too.
    const PodRef next{node, nextPod[node]++};
    const CniCall more = sim.call(CniVerb::kAdd, next);
    ASSERT_TRUE(more.ok()) << more.describe(sim.nodeName(node));
    live[next] = more;
  }
  std::cout << "100 kills (" << killedBeforeExit << " before the ADD finished), " << claimed
            << " ADDs claimed a block, " << live.size() << " pods, " << secondsSince(t0) << " s\n";
  EXPECT_EQ(claimed, 100) << "every killed ADD's retry had to claim a new block";
  EXPECT_GE(killedBeforeExit, 10) << "kills at 0-30 ms must land inside ADDs, or the claim window is not exercised";

  std::vector<CniCall> adds;
  for (const auto& [pod, add] : live) {
    adds.push_back(add);
  }
  EXPECT_TRUE(sim.noAddressTwice(adds));
  EXPECT_TRUE(sim.addressesInOwnBlocks(adds));
  EXPECT_TRUE(sim.blocksConsistent());
  EXPECT_EQ([&] {
    std::size_t n = 0;
    for (int node = 0; node < o.nodes; ++node) {
      n += sim.storedEntries(node, "attachments");
    }
    return n;
  }(), live.size()) << "one attachment record per live pod: the killed ADDs left nothing extra";

  std::vector<PodRef> all;
  for (const auto& [pod, add] : live) {
    all.push_back(pod);
  }
  EXPECT_TRUE(sim.allSucceeded(sim.callAll(CniVerb::kDel, all, 4)));
  EXPECT_TRUE(sim.storesEmpty());
}

// The index of etcd's leader among `etcd`'s members (maintenance status through the JSON
// gateway), or -1.
int etcdLeader(const EtcdCluster& etcd) {
  for (int i = 0; i < etcd.size(); ++i) {
    if (!etcd.running(i)) {
      continue;
    }
    auto body = httpCall("POST", etcd.endpoint(i) + "/v3/maintenance/status", "{}");
    if (!body) {
      continue;
    }
    const auto j = nlohmann::json::parse(*body, nullptr, false);
    if (j.is_object() && j.contains("header") && j["header"].value("member_id", "") == j.value("leader", "?")) {
      return i;
    }
  }
  return -1;
}

std::size_t ownedCount(const ClusterSim& sim, int node) {
  auto b = sim.nodeBlocks(node);
  return b ? static_cast<std::size_t>(
                 std::count_if(b->begin(), b->end(), [](const NodeBlock& x) { return x.state == "owned"; }))
           : 0;
}

// The addresses `node`'s live pods hold.
std::set<std::string> heldBy(const std::map<PodRef, CniCall>& live, int node) {
  std::set<std::string> held;
  for (const auto& [pod, add] : live) {
    if (pod.node == node) {
      held.insert(add.addresses.begin(), add.addresses.end());
    }
  }
  return held;
}

// The control plane (a 3-member etcd) losing members while nodes ADD.
//  (a) the leader stopped in the middle of a storm of ADDs across 10 nodes, many of which claim
//      blocks (blockSize 4), and more claims while it is down: every ADD succeeds;
//  (b) a second member stopped (no quorum): an ADD that fits in an owned block succeeds, a DEL
//      succeeds, an ADD that needs a block fails within cluster.timeoutMs (+ slack) with CNI
//      error 11 naming an endpoint and the pool, and leaves no attachment record;
//  (c) the members back: the ADDs that failed succeed, and then every node's ledger matches
//      etcd exactly (no intent left, no block lost), no address twice, the DELs free everything.
TEST(ClusterSimFaults, EtcdMembersStoppedDuringAStorm) {
  EtcdCluster etcd;
  ASSERT_TRUE(etcd.start(3));
  TempRoot root;
  ASSERT_FALSE(root.path().empty());
  ClusterSimOptions o;
  o.plugin = IBCNI_IPAM_BINARY;
  o.root = root.path();
  o.nodes = 10;
  o.blockSize = 4;
  o.timeoutMs = 3000;
  o.etcdEndpoints = etcd.endpoints();
  ClusterSim sim(o);
  std::map<PodRef, CniCall> live;
  std::vector<int> nextPod(o.nodes, 0);
  auto keep = [&](const std::vector<CniCall>& calls) {
    for (const auto& c : calls) {
      if (c.ok()) {
        live[c.pod] = c;
      }
    }
  };
  auto batch = [&](int perNode) {
    std::vector<PodRef> pods;
    for (int p = 0; p < perNode; ++p) {
      for (int n = 0; n < o.nodes; ++n) {
        pods.push_back({n, nextPod[n]++});
      }
    }
    return pods;
  };

  // (a) 10 nodes x 8 pods (each node claims 3 blocks of 4), 4 at a time; the leader stopped
  // 150 ms in; then 10 x 4 more ADDs (more claims) with the leader still down.
  const int leader = etcdLeader(etcd);
  ASSERT_GE(leader, 0) << "no etcd member says it leads";
  std::vector<CniCall> storm;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread stormThread([&] { storm = sim.callAll(CniVerb::kAdd, batch(8), 4); });
  std::this_thread::sleep_for(150ms);
  const bool stopped = etcd.stopMember(leader);
  stormThread.join();
  ASSERT_TRUE(stopped) << "stopping member " << leader;
  std::vector<std::size_t> blocksBefore(o.nodes);
  for (int n = 0; n < o.nodes; ++n) {
    blocksBefore[n] = ownedCount(sim, n);
  }
  const auto during = sim.callAll(CniVerb::kAdd, batch(4), 4);
  std::size_t claimsWhileDown = 0;
  for (int n = 0; n < o.nodes; ++n) {
    claimsWhileDown += ownedCount(sim, n) - blocksBefore[n];
  }
  std::cout << "(a) leader (member " << leader << ") stopped 150 ms into 80 ADDs, then 40 ADDs claiming "
            << claimsWhileDown << " blocks without it: " << secondsSince(t0) << " s\n";
  EXPECT_TRUE(sim.allSucceeded(storm));
  EXPECT_TRUE(sim.allSucceeded(during));
  EXPECT_GE(claimsWhileDown, 5u) << "the ADDs with one member down must include claims";
  keep(storm);
  keep(during);
  EXPECT_TRUE(sim.blocksConsistent());

  // (b) Nodes 0-4 get room in their owned blocks (an ADD that claims a block of 4 leaves 3 free);
  // nodes 5-9 are filled to the brim. Then a second member stops: no quorum.
  for (int n = 0; n < o.nodes; ++n) {
    for (int guard = 0;; ++guard) {
      ASSERT_LT(guard, 8);
      const bool full = ownedBlocksFull(sim, n, heldBy(live, n));
      if (n < 5 ? !full : full) {
        break;
      }
      const CniCall c = sim.call(CniVerb::kAdd, {n, nextPod[n]++});
      ASSERT_TRUE(c.ok()) << c.describe(sim.nodeName(n));
      live[c.pod] = c;
    }
  }
  const int second = (leader + 1) % 3;
  ASSERT_TRUE(etcd.stopMember(second));
  std::vector<std::size_t> records(o.nodes);
  for (int n = 0; n < o.nodes; ++n) {
    records[n] = sim.storedEntries(n, "attachments");
  }
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<PodRef> failing;
  std::vector<PodRef> fitting;
  for (int n = 0; n < o.nodes; ++n) {
    (n < 5 ? fitting : failing).push_back({n, nextPod[n]++});
  }
  const auto fit = sim.callAll(CniVerb::kAdd, fitting, 5);
  const auto fail = sim.callAll(CniVerb::kAdd, failing, 5);
  // DEL never needs the control plane.
  const PodRef gone = live.begin()->first;
  const CniCall del = sim.call(CniVerb::kDel, gone);
  std::cout << "(b) 2 of 3 members stopped: 5 ADDs in owned blocks, 5 ADDs needing a block, 1 DEL: "
            << secondsSince(t1) << " s\n";
  EXPECT_TRUE(sim.allSucceeded(fit)) << "ADDs that fit in owned blocks need no control plane";
  keep(fit);
  EXPECT_TRUE(del.ok()) << del.describe(sim.nodeName(gone.node));
  if (del.ok()) {
    live.erase(gone);
  }
  double slowest = 0;
  for (const auto& c : fail) {
    const std::string what = c.describe(sim.nodeName(c.pod.node));
    slowest = std::max(slowest, c.ms);
    EXPECT_NE(c.status, 0) << what;
    EXPECT_LE(c.ms, o.timeoutMs + 1500.0) << what;
    const auto j = nlohmann::json::parse(c.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << what;
    EXPECT_EQ(j.value("code", 0), 11) << what;
    const std::string msg = j.value("msg", "") + " " + j.value("details", "");
    EXPECT_THAT(msg, ::testing::HasSubstr("\"" + sim.pool() + "\"")) << what;
    EXPECT_THAT(msg, ::testing::ContainsRegex("http://127\\.0\\.0\\.1:[0-9]+")) << what << ": no endpoint named";
    EXPECT_EQ(sim.storedEntries(c.pod.node, "attachments"), records[c.pod.node]) << what << " left a record";
  }
  std::cout << "    the ADDs needing a block failed after at most " << slowest << " ms (timeoutMs " << o.timeoutMs
            << ")\n";

  // (c) Both members back: the failed ADDs (as the runtime retries them) succeed, each claiming.
  ASSERT_TRUE(etcd.startMember(leader));
  ASSERT_TRUE(etcd.startMember(second));
  ASSERT_TRUE(etcd.waitHealthy());
  const auto t2 = std::chrono::steady_clock::now();
  const auto retried = sim.callAll(CniVerb::kAdd, failing, 5);
  std::cout << "(c) members back: 5 ADDs retried: " << secondsSince(t2) << " s\n";
  EXPECT_TRUE(sim.allSucceeded(retried));
  keep(retried);
  for (int n = 0; n < o.nodes; ++n) {
    EXPECT_TRUE(sim.nodeBlocksMatchBackend(n)) << "no intent unresolved, no block lost";
  }
  std::vector<CniCall> adds;
  std::vector<PodRef> all;
  for (const auto& [pod, add] : live) {
    adds.push_back(add);
    all.push_back(pod);
  }
  EXPECT_TRUE(sim.noAddressTwice(adds));
  EXPECT_TRUE(sim.addressesInOwnBlocks(adds));
  EXPECT_TRUE(sim.blocksConsistent());
  EXPECT_TRUE(sim.allSucceeded(sim.callAll(CniVerb::kDel, all, 4)));
  EXPECT_TRUE(sim.storesEmpty());
}

// The Kubernetes API failing while a node needs a block, one fault of the proxy per node
// (tests/support/control-plane/api_proxy.js): 500s, answers slower than cluster.timeoutMs, garbage
// JSON, dropped connections, each on every request or on the claim (POST) alone, and a claim
// whose write is done but whose answer is lost ("after": true) or comes after the plugin gave up
// (POST delayed). Each time: the ADD fails with CNI error 11 naming the endpoint, the pool and what
// the backend said, within timeoutMs (+ slack); it leaves no attachment record nor address in
// the node's store; once the API is well, the runtime's retry of that ADD succeeds having claimed
// exactly one block (a lost answer's Lease adopted, not leaked), and the node's ledger equals its
// Leases. At the end no address twice, every body valid, the DELs free everything.
TEST(ClusterSimFaults, KubernetesApiFaultsDuringABlockClaim) {
  if (!ControlPlane::built()) {
    GTEST_SKIP() << ControlPlane::kNotBuilt;
  }
  TempRoot root;
  ASSERT_FALSE(root.path().empty());
  ClusterSimOptions o;
  o.plugin = IBCNI_IPAM_BINARY;
  o.root = root.path();
  o.blockSize = 4;
  o.timeoutMs = 1500;
  ControlPlane cp;
  ApiProxy api;
  ASSERT_TRUE(startApi(cp, api));
  ASSERT_TRUE(useKubernetes(api, root.path(), o));
  const std::string endpoint = api.url();
  const int slow = o.timeoutMs + 700;
  struct Case {
    nlohmann::json fault;
    std::vector<std::string> said;  // what the backend said, as the message must carry it
  };
  const std::vector<Case> cases = {
      {{{"status", 500}}, {"500", "injected fault"}},
      {{{"status", 500}, {"methods", {"POST"}}}, {"500", "injected fault"}},
      {{{"status", 503}, {"message", "etcd unavailable"}}, {"503", "etcd unavailable"}},
      {{{"delayMs", slow}}, {"timeout"}},
      {{{"garbage", true}}, {"JSON"}},
      {{{"garbage", true}, {"methods", {"POST"}}}, {"JSON"}},
      {{{"drop", true}}, {}},
      {{{"status", 500}, {"after", true}, {"methods", {"POST"}}}, {"500"}},
      {{{"garbage", true}, {"after", true}, {"methods", {"POST"}}}, {"JSON"}},
      {{{"drop", true}, {"after", true}, {"methods", {"POST"}}}, {}},
      {{{"delayMs", slow}, {"methods", {"POST"}}}, {"timeout"}},
  };
  o.nodes = static_cast<int>(cases.size());
  ClusterSim sim(o);
  std::map<PodRef, CniCall> live;
  const auto t0 = std::chrono::steady_clock::now();
  for (int n = 0; n < o.nodes; ++n) {
    const Case& c = cases[static_cast<std::size_t>(n)];
    SCOPED_TRACE("fault " + c.fault.dump() + " on " + sim.nodeName(n));
    // Fill the node's blocks while the API is well (the first ADD defines the pool and claims
    // one): its next ADD must claim a block and nothing else.
    int pod = 0;
    for (int guard = 0; ownedCount(sim, n) == 0 || !ownedBlocksFull(sim, n, heldBy(live, n)); ++guard) {
      ASSERT_LT(guard, 8);
      const CniCall add = sim.call(CniVerb::kAdd, {n, pod++});
      ASSERT_TRUE(add.ok()) << add.describe(sim.nodeName(n));
      live[add.pod] = add;
    }
    const std::size_t owned = ownedCount(sim, n);
    const std::size_t records = sim.storedEntries(n, "attachments");
    const std::size_t addresses = sim.storedEntries(n, "ips");

    ASSERT_TRUE(api.fault(c.fault));
    const PodRef victim{n, pod++};
    const CniCall failed = sim.call(CniVerb::kAdd, victim);
    ASSERT_TRUE(api.clearFault());
    const std::string what = failed.describe(sim.nodeName(n));
    std::cout << "  " << c.fault.dump() << ": failed after " << failed.ms << " ms: " << failed.out.substr(0, 300)
              << "\n";
    EXPECT_NE(failed.status, 0) << what;
    EXPECT_LE(failed.ms, o.timeoutMs + 1000.0) << what;
    const auto j = nlohmann::json::parse(failed.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << what;
    EXPECT_EQ(j.value("code", 0), 11) << what;
    const std::string msg = j.value("msg", "") + " " + j.value("details", "");
    EXPECT_THAT(msg, ::testing::HasSubstr(endpoint)) << "the endpoint is named";
    EXPECT_THAT(msg, ::testing::HasSubstr("\"" + sim.pool() + "\"")) << "the pool is named";
    for (const auto& said : c.said) {
      EXPECT_THAT(msg, ::testing::HasSubstr(said)) << "what the backend said";
    }
    EXPECT_EQ(sim.storedEntries(n, "attachments"), records) << "the failed ADD left an attachment record";
    EXPECT_EQ(sim.storedEntries(n, "ips"), addresses) << "the failed ADD left an address in the node's store";
    if (c.fault.contains("delayMs")) {
      // The delayed request is still served after the plugin gave up (a late write): wait until
      // the proxy has passed it on and answered, however long a loaded machine takes, before the retry lists
      // the node's blocks (a fixed sleep let the late claim land after that list).
      ASSERT_TRUE(api.idle(30)) << "a delayed request still being served after 30 s";
    }

    // The runtime retries: the ADD succeeds, with one block more than before (a Lease whose
    // answer was lost is adopted, not leaked beside a second claim); the ledger equals the Leases.
    const CniCall again = sim.call(CniVerb::kAdd, victim);
    ASSERT_TRUE(again.ok()) << again.describe(sim.nodeName(n));
    live[victim] = again;
    EXPECT_EQ(ownedCount(sim, n), owned + 1) << "blocks owned after the retry";
    EXPECT_TRUE(sim.nodeBlocksMatchBackend(n)) << "a Lease held by the node that its ledger does not know";
  }
  std::cout << cases.size() << " faults: " << secondsSince(t0) << " s\n";
  std::vector<CniCall> adds;
  std::vector<PodRef> all;
  for (const auto& [pod, add] : live) {
    adds.push_back(add);
    all.push_back(pod);
  }
  EXPECT_TRUE(sim.noAddressTwice(adds));
  EXPECT_TRUE(sim.addressesInOwnBlocks(adds));
  EXPECT_TRUE(sim.blocksConsistent());
  EXPECT_TRUE(sim.allSucceeded(sim.callAll(CniVerb::kDel, all, 4)));
  EXPECT_TRUE(sim.storesEmpty());
  EXPECT_TRUE(api.allValid());
}

// --- The checks on hand-made state ---

class ClusterSimChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(etcd_.start(1));
    ASSERT_FALSE(root_.path().empty());
    o_.plugin = "/nonexistent";
    o_.root = root_.path();
    o_.nodes = 3;
    o_.etcdEndpoints = etcd_.endpoints();
  }
  // <dataDir>/.cluster/<pool>/blocks.json of `node`: `owned` blocks owned, `intent` as intent.
  void writeBlocks(const ClusterSim& sim, int node, const std::vector<std::string>& owned,
                   const std::vector<std::string>& intent = {}) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const auto* list : {&owned, &intent}) {
      for (const auto& cidr : *list) {
        std::string key = cidr;
        key[key.find('/')] = '-';
        blocks.push_back({{"set", 0}, {"name", key}, {"state", list == &owned ? "owned" : "intent"}, {"version", "1"}});
      }
    }
    const std::string dir = sim.dataDir(node) + "/.cluster/" + sim.pool();
    fs::create_directories(dir);
    std::ofstream(dir + "/blocks.json")
        << nlohmann::json{{"pool", sim.pool()}, {"node", sim.nodeName(node)}, {"fingerprint", "f"}, {"blocks", blocks},
                          {"addresses", nlohmann::json::array()}}
               .dump();
  }
  void put(const std::string& key, const nlohmann::json& value) {
    http::Request r;
    r.method = http::Method::kPost;
    r.url = etcd_.endpoint(0) + "/v3/kv/put";
    r.body = nlohmann::json{{"key", os::base64Encode(key)}, {"value", os::base64Encode(value.dump())}}.dump();
    const auto answer = http_.send(r);
    ASSERT_TRUE(answer && answer->status == 200) << (answer ? answer->body : answer.error().describe());
  }
  void putBlock(const ClusterSim& sim, const std::string& key, int node) {
    put("/ibcni/pools/" + sim.pool() + "/blocks/" + key, {{"node", sim.nodeName(node)}, {"claimedAt", "x"}});
  }
  static CniCall add(int node, int pod, const std::string& address) {
    CniCall c;
    c.pod = {node, pod};
    c.status = 0;
    c.addresses = {address};
    return c;
  }

  EtcdCluster etcd_;
  TempRoot root_;
  ClusterSimOptions o_;
  http::CurlHttpClient http_;
};

TEST_F(ClusterSimChecks, PassOnAConsistentClusterAndNameEachBreakage) {
  ClusterSim sim(o_);
  writeBlocks(sim, 0, {"10.56.0.0/27"});
  writeBlocks(sim, 1, {"10.56.0.32/27", "10.56.0.64/27"});
  putBlock(sim, "10.56.0.0-27", 0);
  putBlock(sim, "10.56.0.32-27", 1);
  putBlock(sim, "10.56.0.64-27", 1);
  const std::vector<CniCall> adds = {add(0, 0, "10.56.0.2"), add(1, 0, "10.56.0.33"), add(1, 1, "10.56.0.70")};
  EXPECT_TRUE(sim.allSucceeded(adds));
  EXPECT_TRUE(sim.noAddressTwice(adds));
  EXPECT_TRUE(sim.addressesInOwnBlocks(adds));
  EXPECT_TRUE(sim.blocksConsistent());
  EXPECT_TRUE(sim.nodeBlocksMatchBackend(1));
  EXPECT_TRUE(sim.storesEmpty());

  // An address twice; an address outside its node's blocks; a failed ADD.
  auto twice = adds;
  twice.push_back(add(2, 0, "10.56.0.33"));
  auto r = sim.noAddressTwice(twice);
  EXPECT_FALSE(r);
  EXPECT_THAT(r.message(), ::testing::HasSubstr("10.56.0.33 held by 2 pods on 2 nodes: node-01/pod-0 node-02/pod-0"));
  r = sim.addressesInOwnBlocks({add(0, 1, "10.56.0.40")});
  EXPECT_FALSE(r);
  EXPECT_THAT(r.message(), ::testing::HasSubstr("10.56.0.40 of node-00/pod-1 is in no block"));
  auto failed = add(0, 3, "10.56.0.3");
  failed.status = 11;
  failed.out = R"({"code":11,"msg":"etcd unreachable"})";
  r = sim.allSucceeded({failed});
  EXPECT_FALSE(r);
  EXPECT_THAT(r.message(), ::testing::HasSubstr("ADD node-00/pod-3: exit 11"));

  // Two nodes own one block; the backend gives a node's block to another; a block the backend
  // gives a node is missing from its file (lost); an intent is not ownership.
  writeBlocks(sim, 2, {"10.56.0.0/27"});
  r = sim.blocksConsistent();
  EXPECT_FALSE(r);
  EXPECT_THAT(r.message(), ::testing::HasSubstr("block 10.56.0.0-27 is owned by 2 nodes: node-00 node-02"));
  EXPECT_THAT(r.message(), ::testing::HasSubstr("node-02 owns block 10.56.0.0-27 which the backend gives to node-00"));
  writeBlocks(sim, 2, {}, {"10.56.0.96/27"});
  putBlock(sim, "10.56.0.96-27", 2);
  putBlock(sim, "10.56.0.128-27", 2);
  r = sim.blocksConsistent();
  EXPECT_FALSE(r);
  EXPECT_THAT(r.message(), ::testing::HasSubstr("block 10.56.0.128-27 is held by node-02 in the backend but missing"));
  EXPECT_THAT(r.message(), ::testing::HasSubstr("block 10.56.0.96-27 is held by node-02 in the backend but is \"intent\""));
  EXPECT_FALSE(sim.nodeBlocksMatchBackend(2, /*allowIntent=*/true));  // 128 is still lost
  writeBlocks(sim, 2, {"10.56.0.128/27"}, {"10.56.0.96/27"});
  EXPECT_TRUE(sim.nodeBlocksMatchBackend(2, /*allowIntent=*/true));
  EXPECT_FALSE(sim.nodeBlocksMatchBackend(2));
  // A node file's block the backend does not list.
  writeBlocks(sim, 0, {"10.56.0.0/27", "10.56.1.0/27"});
  r = sim.nodeBlocksMatchBackend(0);
  EXPECT_FALSE(r);
  EXPECT_THAT(r.message(), ::testing::HasSubstr("node-00 owns block 10.56.1.0-27 which the backend does not list"));

  // Leftovers after the DELs: a record in a node's store, an address claim in the backend.
  fs::create_directories(sim.dataDir(1) + "/.cluster/" + sim.pool() + "/attachments");
  std::ofstream(sim.dataDir(1) + "/.cluster/" + sim.pool() + "/attachments/c1:eth0") << "x";
  r = sim.storesEmpty();
  EXPECT_FALSE(r);
  EXPECT_THAT(r.message(), ::testing::HasSubstr("node-01 still has 1 attachment record(s) and 0 address claim(s)"));
  fs::remove(sim.dataDir(1) + "/.cluster/" + sim.pool() + "/attachments/c1:eth0");
  EXPECT_TRUE(sim.storesEmpty());
  put("/ibcni/pools/" + sim.pool() + "/addresses/10.56.0.9", {{"node", "node-00"}, {"owner", "c9:eth0"}});
  r = sim.storesEmpty();
  EXPECT_FALSE(r);
  EXPECT_THAT(r.message(), ::testing::HasSubstr("the backend still lists 1 address claim(s), first 10.56.0.9 of node-00"));
}

TEST_F(ClusterSimChecks, CountsEtcdRequests) {
  ClusterSim sim(o_);
  const auto before = etcdRequestCounts(o_.etcdEndpoints);
  ASSERT_TRUE(before) << before.error();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(sim.backendBlocks());
  }
  const auto after = etcdRequestCounts(o_.etcdEndpoints);
  ASSERT_TRUE(after) << after.error();
  const auto d = countDiff(*before, *after);
  EXPECT_EQ(d.at("Range"), 5u) << "each gateway range is one Range";
  EXPECT_EQ(d.at("total"), 5u) << "reading /metrics is not counted";
}

}  // namespace
}  // namespace ibcni::testing
