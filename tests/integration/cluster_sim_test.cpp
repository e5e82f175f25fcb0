// SPDX-License-Identifier: Apache-2.0
// ibcni-ipam's cluster mode on a simulated cluster (tests/support/cluster_sim.h): the built
// ibcni-ipam exec'd as a runtime execs it, by many nodes at once, against a real 3-member etcd
// (label etcd; no root needed: the processes enter no namespace, CNI_NETNS is /proc/self/ns/net).
//
//  * ClusterSim.HundredNodesTwentyPodsEach: 100 nodes x 20 pods, the 2000 ADDs in random order,
//    8 at a time across and within nodes: every ADD succeeds, no address twice in the cluster,
//    every address in a block its node owns, no block with two holders, each node's blocks.json
//    equal to the backend's keys; then the 2000 DELs free everything. A node-local ibcni-ipam
//    (one that ignores ipam.cluster) fails here: each node hands out the same addresses.
//  * ClusterSimFaults.KillDuringBlockClaim: 100 times, an ADD that must claim a new block is
//    SIGKILLed after 0-30 ms; the ADD run again succeeds, and then no block is lost (every block
//    the backend gives the node is in its blocks.json), none has two holders, no address twice.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <random>
#include <set>
#include <thread>

#include "support/cluster_sim.h"
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
  // 20 pods fit in one block of 32 (two for the node whose first block holds the gateway and
  // the network address); a node never needs more than 20/32 rounded up plus one.
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

}  // namespace
}  // namespace ibcni::testing
