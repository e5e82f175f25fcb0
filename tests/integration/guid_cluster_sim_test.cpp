// SPDX-License-Identifier: Apache-2.0
// sriov mode's cluster GUID pool on a simulated cluster, in process: 100 nodes (tests/support/
// vf_node_sim.h: each its own fakes with one mlx5 PF and 21 VFs of GUID zero, stateDir, dataDir and
// node name, and the embedded GUID pools over the production backends) sharing guidPool "gsim"
// (blocks of 16) through a real 3-member etcd, then through a real kube-apiserver.
// ibcni cannot be exec'd here: it would set the GUIDs of this machine's VFs.
//
//  * 2000 ADDs (20 pods per node, one per VF; nodes by 4 worker threads, one node's ADDs in
//    order): every ADD succeeds; the 2000 VFs carry distinct GUIDs (node GUID = port GUID), each
//    in the range and in a block its node owns by its ledger (blocks.json) and by the backend; no
//    block has two holders.
//  * A pod of node 1 (on its spare VF 20) asking for the GUID a pod of node 0 holds: 11 naming
//    node 0; node 1's VF, records, store and blocks are unchanged.
//  * 2000 DELs: every VF back to all ones (it came with zero), no GUID held in any node's store;
//    then one pass of the node agent (EmbeddedGuidPools::maintain, releaseAfterSeconds 0) on
//    every node, and no block of the pool is left in the backend.
// Nodes run one dispatch() at a time (support/vf_node_sim.h: dispatchLock): the plugin sets the
// process's logger per call. What runs in parallel is what surrounds it (reading the fakes).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "ipam/backends/production_backends.h"
#include "lib/http/curl_http_client.h"
#include "support/cluster_sim.h"
#include "support/etcd_cluster.h"
#include "support/vf_node_sim.h"

namespace ibcni::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr int kNodes = 100;
constexpr int kPods = 20;  // per node; VF kPods is each node's spare
constexpr std::uint64_t kFirst = 0x0200000000010000ULL;
constexpr std::uint64_t kLast = 0x020000000001ffffULL;  // 4096 blocks of 16
constexpr std::uint64_t kAllOnes = ~std::uint64_t{0};
constexpr const char* kPool = "gsim";

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A block key of the GUID space ("0200000000010010-4") and the GUIDs it spans.
struct KeySpan {
  std::uint64_t first = 0;
  std::uint64_t last = 0;
};
std::optional<KeySpan> spanOf(const std::string& key) {
  const auto dash = key.find('-');
  if (dash != 16) {
    return std::nullopt;
  }
  const std::uint64_t first = std::stoull(key.substr(0, 16), nullptr, 16);
  const int log2 = std::stoi(key.substr(17));
  return KeySpan{first, first + (std::uint64_t{1} << log2) - 1};
}

// The simulated cluster: nodes, the backend's `cluster` object, and a reader of the backend's
// state (ClusterSim's, pointed at the backend pool "guid_gsim").
class GuidCluster {
 public:
  GuidCluster(const std::string& root, json cluster, ClusterSimOptions reader)
      : cluster_(std::move(cluster)), reader_(std::move(reader)) {
    for (int n = 0; n < kNodes; ++n) {
      clients_.push_back(std::make_unique<http::CurlHttpClient>());
      nodes_.push_back(std::make_unique<VfNodeSim>(root + "/" + reader_.nodeName(n), reader_.nodeName(n), kPods + 1,
                                                   plugin::productionBackends(*clients_.back())));
    }
  }

  VfNodeSim& node(int n) { return *nodes_[static_cast<std::size_t>(n)]; }
  const ClusterSim& reader() const { return reader_; }

  json guidPool(int n) const {
    json c = cluster_;
    c["nodeName"] = reader_.nodeName(n);
    c["timeoutMs"] = 5000;
    c["releaseAfterSeconds"] = 0;
    return {{"range", net::Guid{kFirst}.toString() + "-" + net::Guid{kLast}.toString()},
            {"pool", kPool},
            {"blockSize", 16},
            {"cluster", c}};
  }
  json config(int n, int vf) const { return nodes_[static_cast<std::size_t>(n)]->config(vf, guidPool(n)); }

  /// `verb` for every pod, nodes by `workers` threads, each node's pods in order: the outcomes by
  /// node and VF.
  std::vector<std::vector<plugin::Outcome>> runAll(const std::string& verb, int workers) {
    std::vector<std::vector<plugin::Outcome>> out(kNodes, std::vector<plugin::Outcome>(kPods));
    std::atomic<int> next{0};
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) {
      threads.emplace_back([&] {
        for (int n = next++; n < kNodes; n = next++) {
          for (int vf = 0; vf < kPods; ++vf) {
            out[static_cast<std::size_t>(n)][static_cast<std::size_t>(vf)] = node(n).run(verb, config(n, vf), vf);
          }
        }
      });
    }
    for (auto& t : threads) {
      t.join();
    }
    return out;
  }

  /// The blocks node `n`'s ledger lists as owned.
  std::set<std::string> ownedBlocks(int n) {
    std::ifstream in(node(n).storeDir(kPool) + "/blocks.json");
    const json j = json::parse(in, nullptr, false);
    std::set<std::string> out;
    if (j.is_object() && j.contains("blocks")) {
      for (const auto& b : j["blocks"]) {
        if (b.value("state", "") == "owned") {
          out.insert(b.value("name", ""));
        }
      }
    }
    return out;
  }

 private:
  json cluster_;
  ClusterSim reader_;
  std::vector<std::unique_ptr<http::CurlHttpClient>> clients_;
  std::vector<std::unique_ptr<VfNodeSim>> nodes_;
};

::testing::AssertionResult allSucceeded(const std::vector<std::vector<plugin::Outcome>>& outs, GuidCluster& c) {
  std::ostringstream msg;
  int bad = 0;
  for (int n = 0; n < kNodes; ++n) {
    for (int vf = 0; vf < kPods; ++vf) {
      const auto& o = outs[static_cast<std::size_t>(n)][static_cast<std::size_t>(vf)];
      if (o.exitCode != 0 && bad++ < 10) {
        msg << "\n  " << c.node(n).containerId(vf) << ": exit " << o.exitCode << ": " << o.stdoutText;
      }
    }
  }
  if (bad == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << bad << " calls failed:" << msg.str();
}

// Every pod's VF carries a GUID of its own (node = port), in the range, in a block its node owns
// by its ledger and by the backend; no block is owned by two ledgers.
::testing::AssertionResult guidsDistinctInOwnBlocks(GuidCluster& c) {
  auto backend = c.reader().backendBlocks();
  if (!backend) {
    return ::testing::AssertionFailure() << backend.error();
  }
  std::map<std::string, std::string> holder;  // backend: key -> node
  std::ostringstream msg;
  std::ostringstream twice;  // GUIDs on two VFs, listed first
  int bad = 0;
  int doubled = 0;
  auto fail = [&](const std::string& what) {
    if (bad++ < 10) {
      msg << "\n  " << what;
    }
  };
  for (const auto& e : *backend) {
    if (!holder.emplace(e.name, e.node).second) {
      fail("block " + e.name + " listed twice by the backend (" + holder[e.name] + ", " + e.node + ")");
    }
  }
  std::map<std::string, std::string> ledgerOwner;  // key -> node, from the ledgers
  std::map<std::uint64_t, std::string> seen;       // GUID -> pod
  for (int n = 0; n < kNodes; ++n) {
    const std::string name = c.node(n).name();
    const auto owned = c.ownedBlocks(n);
    for (const auto& k : owned) {
      if (auto [it, fresh] = ledgerOwner.emplace(k, name); !fresh) {
        fail("block " + k + " owned by the ledgers of " + it->second + " and " + name);
      }
      if (holder[k] != name) {
        fail(name + "'s ledger owns block " + k + ", the backend says " + holder[k]);
      }
    }
    for (int vf = 0; vf < kPods; ++vf) {
      const std::string pod = c.node(n).containerId(vf);
      const auto [nodeGuid, portGuid] = c.node(n).vfGuids(vf);
      const std::string g = net::Guid{portGuid}.toString();
      if (nodeGuid != portGuid || portGuid < kFirst || portGuid > kLast) {
        fail(pod + ": node GUID " + net::Guid{nodeGuid}.toString() + ", port GUID " + g + " (not one GUID of the range)");
        continue;
      }
      if (auto [it, fresh] = seen.emplace(portGuid, pod); !fresh && doubled++ < 10) {
        twice << "\n  GUID " << g << " on " << it->second << " and " << pod;
      }
      const bool inOwn = std::any_of(owned.begin(), owned.end(), [&](const std::string& k) {
        auto s = spanOf(k);
        return s && s->first <= portGuid && portGuid <= s->last;
      });
      if (!inOwn) {
        fail(pod + ": GUID " + g + " in no block " + name + " owns");
      }
    }
  }
  if (seen.size() != static_cast<std::size_t>(kNodes * kPods)) {
    fail(std::to_string(seen.size()) + " distinct GUIDs, not " + std::to_string(kNodes * kPods));
  }
  if (bad == 0 && doubled == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << doubled << " GUIDs on two VFs:" << twice.str() << "\n" << bad
                                       << " other problems:" << msg.str();
}

// Node 1's spare VF asks for the GUID of node 0's pod 0: 11 naming node 0, nothing changed on node 1.
void requestHeldElsewhereIs11(GuidCluster& c) {
  const std::uint64_t held = c.node(0).vfGuids(0).second;
  VfNodeSim& b = c.node(1);
  const auto blocksBefore = c.ownedBlocks(1);
  const std::size_t recordsBefore = b.records();
  json conf = c.config(1, kPods);
  conf["runtimeConfig"]["infinibandGUID"] = net::Guid{held}.toString();
  const auto out = b.run("ADD", conf, kPods);
  EXPECT_EQ(out.exitCode, 1) << out.stdoutText;
  const json error = json::parse(out.stdoutText, nullptr, false);
  ASSERT_TRUE(error.is_object()) << out.stdoutText;
  EXPECT_EQ(error.value("code", 0), 11) << out.stdoutText;
  const std::string msg = error.value("msg", "");
  EXPECT_NE(msg.find(c.node(0).name()), std::string::npos) << msg;
  EXPECT_NE(msg.find(net::Guid{held}.toString()), std::string::npos) << msg;
  EXPECT_EQ(b.vfGuids(kPods), (std::pair<std::uint64_t, std::uint64_t>{0, 0})) << "the spare VF keeps its GUID";
  EXPECT_EQ(b.records(), recordsBefore);
  auto kept = b.guids().held(b.storeDir(kPool), {b.containerId(kPods), "net1"});
  ASSERT_TRUE(kept) << kept.error().msg;
  EXPECT_FALSE(*kept) << "node 1 holds nothing for the refused pod";
  EXPECT_EQ(c.ownedBlocks(1), blocksBefore);
}

// After the DELs: every pod's VF without a GUID (all ones), no GUID held in any store.
::testing::AssertionResult nothingHeld(GuidCluster& c) {
  std::ostringstream msg;
  int bad = 0;
  for (int n = 0; n < kNodes; ++n) {
    VfNodeSim& node = c.node(n);
    for (int vf = 0; vf < kPods; ++vf) {
      const auto guids = node.vfGuids(vf);
      auto held = node.guids().held(node.storeDir(kPool), {node.containerId(vf), "net1"});
      const bool leftHeld = !held || held->has_value();
      if ((guids.first != kAllOnes || guids.second != kAllOnes || leftHeld) && bad++ < 20) {
        msg << "\n  " << node.containerId(vf) << ": VF GUIDs " << net::Guid{guids.first}.toString() << "/"
            << net::Guid{guids.second}.toString() << (leftHeld ? ", still held in the store" : "");
      }
    }
    if (node.records() != 0 && bad++ < 20) {
      msg << "\n  " << node.name() << ": " << node.records() << " attachment records left";
    }
  }
  if (bad == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << bad << " problems:" << msg.str();
}

void runCluster(GuidCluster& c, const std::string& label, std::chrono::steady_clock::time_point setUp) {
  for (int n = 0; n < kNodes; ++n) {
    ASSERT_TRUE(c.node(n).ok()) << c.node(n).error();
  }
  std::cout << label << ": set-up (etcd, " << kNodes << " nodes' fakes) " << secondsSince(setUp) << " s\n";
  auto t0 = std::chrono::steady_clock::now();
  const auto adds = c.runAll("ADD", 4);
  std::cout << label << ": 2000 ADDs over 100 nodes x 20 VFs: " << secondsSince(t0) << " s\n";
  ASSERT_TRUE(allSucceeded(adds, c));
  EXPECT_TRUE(guidsDistinctInOwnBlocks(c));
  auto blocks = c.reader().backendBlocks();
  ASSERT_TRUE(blocks) << blocks.error();
  std::set<std::string> holders;
  for (const auto& b : *blocks) {
    holders.insert(b.node);
  }
  EXPECT_EQ(holders.size(), static_cast<std::size_t>(kNodes)) << "every node claimed blocks of its own";
  EXPECT_LE(blocks->size(), 2u * kNodes) << "20 GUIDs take 2 blocks of 16";

  requestHeldElsewhereIs11(c);

  t0 = std::chrono::steady_clock::now();
  const auto dels = c.runAll("DEL", 4);
  std::cout << label << ": 2000 DELs: " << secondsSince(t0) << " s\n";
  EXPECT_TRUE(allSucceeded(dels, c));
  EXPECT_TRUE(nothingHeld(c));

  // The node agent's pass on every node: emptied blocks go back (releaseAfterSeconds 0).
  for (int n = 0; n < kNodes; ++n) {
    auto pass = c.node(n).guids().maintain(c.node(n).storeDir(kPool), false,
                                           [](const std::string&, const cni::AttachmentKey&) { return true; });
    ASSERT_TRUE(pass) << c.node(n).name() << ": " << pass.error().msg;
    EXPECT_TRUE(pass->released.empty()) << c.node(n).name();
  }
  blocks = c.reader().backendBlocks();
  ASSERT_TRUE(blocks) << blocks.error();
  EXPECT_TRUE(blocks->empty()) << blocks->size() << " blocks still held, the first "
                               << (blocks->empty() ? "" : blocks->front().name + " by " + blocks->front().node);
  std::cout << label << ": total " << secondsSince(t0) << " s since the DELs began\n";
}

// A private root on tmpfs (/dev/shm), as the GUID pools' default data dir (/run) is.
std::string makeRoot() {
  std::string tmpl = (fs::is_directory("/dev/shm") ? std::string("/dev/shm") : fs::temp_directory_path().string()) +
                     "/ibcni-guid-sim-XXXXXX";
  return ::mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
}

// A 3-member etcd and a private root for the nodes; reader_ reads the backend pool "guid_gsim".
class GuidClusterSim : public ::testing::Test {
 protected:
  void SetUp() override {
    started_ = std::chrono::steady_clock::now();
    ASSERT_TRUE(etcd_.start(3));
    root_ = makeRoot();
    ASSERT_FALSE(root_.empty());
    reader_.root = root_;
    // The nodes' fake sysfs trees (FakeSysfsTree: under $TMPDIR) on tmpfs too, removed with the root.
    if (const char* t = std::getenv("TMPDIR"); t != nullptr) {
      tmpdir_ = t;
    }
    ::setenv("TMPDIR", root_.c_str(), 1);
    reader_.pool = std::string("guid_") + kPool;
    reader_.etcdEndpoints = etcd_.endpoints();
  }
  void TearDown() override {
    if (tmpdir_) {
      ::setenv("TMPDIR", tmpdir_->c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
    std::error_code ec;
    if (!root_.empty()) {
      fs::remove_all(root_, ec);
    }
  }

  std::chrono::steady_clock::time_point started_;
  EtcdCluster etcd_;
  std::string root_;
  std::optional<std::string> tmpdir_;
  ClusterSimOptions reader_;
};

TEST_F(GuidClusterSim, HundredNodesTwentyVfsEachOverEtcd) {
  GuidCluster c(root_, {{"backend", "etcd"}, {"etcd", {{"endpoints", etcd_.endpoints()}}}}, reader_);
  runCluster(c, "etcd", started_);
}

TEST_F(GuidClusterSim, HundredNodesTwentyVfsEachThroughTheKubernetesApi) {
  if (!ControlPlane::built()) {
    GTEST_SKIP() << ControlPlane::kNotBuilt;
  }
  ControlPlane cp;
  ApiProxy api;
  ASSERT_TRUE(startApi(cp, api));
  ASSERT_TRUE(useKubernetes(api, root_, reader_));
  GuidCluster c(root_,
                {{"backend", "kubernetes"},
                 {"kubernetes", {{"kubeconfig", reader_.kubeconfig}, {"namespace", reader_.k8sNamespace}}}},
                reader_);
  runCluster(c, "kubernetes", started_);
}

}  // namespace
}  // namespace ibcni::testing
