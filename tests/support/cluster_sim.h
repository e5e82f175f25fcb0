// SPDX-License-Identifier: Apache-2.0
// A simulated cluster for ibcni-ipam's cluster mode: N nodes (each its own dataDir and nodeName)
// sharing one pool through a real etcd, M pods per node. Every ADD and DEL is the standalone
// ibcni-ipam exec'd as a runtime execs an IPAM plugin (posix_spawn, exactly the CNI environment,
// the network configuration on a stdin pipe), many at once from a bounded pool of worker threads,
// within and across nodes. The processes do not enter any namespace: CNI_NETNS is a path that
// exists (/proc/self/ns/net by default, as bench/ipam_bench.cpp uses).
//
// Then it checks the cluster's real state: every ADD succeeded, no address is held twice in the
// whole cluster, every address lies in a block its node owns, no block has two holders (each
// node's <dataDir>/.cluster/<pool>/blocks.json compared with the other nodes' and with the
// backend's keys <prefix>pools/<pool>/blocks/ read through etcd's JSON gateway), and after the
// DELs nothing is left in any node's store nor among the backend's address claims.
//
//   ClusterSimOptions o;  o.plugin = IBCNI_IPAM_BINARY;  o.root = tmp;  o.nodes = 100;
//   o.etcdEndpoints = etcd.endpoints();
//   ClusterSim sim(o);
//   auto adds = sim.callAll(CniVerb::kAdd, ClusterSim::pods(100, 20, /*shuffle seed*/ 1), 8);
//   EXPECT_TRUE(ClusterSim::allSucceeded(adds));
//   EXPECT_TRUE(ClusterSim::noAddressTwice(adds));
//   EXPECT_TRUE(sim.blocksConsistent());
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/etcd_cluster.h"
#include "support/exec_program.h"
#include "support/control_plane.h"

namespace ibcni::testing {

/// The smallest key above every key starting with `prefix` (etcd's range_end for a prefix).
[[nodiscard]] std::string etcdPrefixEnd(std::string prefix);

struct ClusterSimOptions {
  std::string plugin;              ///< the ibcni-ipam executable
  std::string root;                ///< node data dirs are <root>/<nodeName>; created on demand
  int nodes = 100;
  std::string network = "simnet";  ///< the network name (the pool's name when `pool` is empty)
  std::string pool;                ///< ipam.cluster.pool; empty: not set (defaults to the network name)
  std::string subnet = "10.56.0.0/16";
  int blockSize = 32;
  int timeoutMs = 5000;
  /// ipam.cluster.backend: "etcd" (etcdEndpoints, etcdPrefix) or "kubernetes" (kubeconfig,
  /// k8sNamespace; the checks read the Leases at k8sUrl with k8sToken).
  std::string backend = "etcd";
  std::vector<std::string> etcdEndpoints;
  std::string etcdPrefix = "/ibcni/";
  std::string kubeconfig;            ///< a file (writeTokenKubeconfig)
  std::string k8sNamespace = "kube-system";
  std::string k8sUrl;                ///< the API server (the fault proxy) the checks read
  std::string k8sToken;              ///< their bearer token
  /// "logLevel" of the network configuration ("debug" for timestamps); empty: not set.
  std::string logLevel;
  /// false: no "cluster" key at all, the node-local ibcni-ipam (a baseline for the bench).
  bool clusterMode = true;
  std::string netns = "/proc/self/ns/net";
  std::chrono::milliseconds execTimeout{60000};
  /// The node agent's relay socket the plugin is told of (IBCNI_HTTP_RELAY_SOCKET): empty, a path
  /// under `root` where nothing listens, so that the plugin sends its requests itself and never
  /// through an agent this machine runs.
  std::string relaySocket;
};

enum class CniVerb { kAdd, kDel };

struct PodRef {
  int node = 0;
  int pod = 0;
  auto operator<=>(const PodRef&) const = default;
};

/// One exec'd ADD or DEL and what came of it.
struct CniCall {
  PodRef pod;
  CniVerb verb = CniVerb::kAdd;
  int status = -1;                     ///< exit status; 128 + signal when killed
  std::vector<std::string> addresses;  ///< ADD: ips[].address without the prefix length
  std::string out;
  std::string err;
  double ms = 0;                       ///< spawn -> reaped
  double cpuMs = 0;                    ///< the process's user + system CPU time

  [[nodiscard]] bool ok() const { return status == 0; }
  /// "ADD node-03/pod-7: exit 11: <stdout> <stderr>" (trimmed).
  [[nodiscard]] std::string describe(const std::string& nodeName) const;
};

/// A running ibcni-ipam started with posix_spawn: its stdin already written and closed, stdout
/// and stderr on pipes. wait() collects them; kill9() ends it at once.
class PluginProcess {
 public:
  /// @return the process, or the reason it could not be started.
  [[nodiscard]] static std::expected<PluginProcess, std::string> spawn(const std::string& path,
                                                                       const std::vector<std::string>& env,
                                                                       const std::string& input);
  PluginProcess(PluginProcess&& other) noexcept;
  PluginProcess& operator=(PluginProcess&&) = delete;
  PluginProcess(const PluginProcess&) = delete;
  PluginProcess& operator=(const PluginProcess&) = delete;
  /// Kills (SIGKILL) and reaps a process nobody waited for.
  ~PluginProcess();

  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  void kill9();
  /// Reads stdout and stderr to their end and reaps; SIGKILL after `timeout`.
  ProgramRun wait(std::chrono::milliseconds timeout);

 private:
  PluginProcess() = default;
  pid_t pid_ = -1;
  int in_ = -1;
  int out_ = -1;
  int err_ = -1;
  std::string input_;
  ProgramRun::Clock::time_point started_;
};

/// A block as one node's blocks.json lists it.
struct NodeBlock {
  std::string key;    ///< "10.56.0.32-27" (blocks.json's "name")
  std::string cidr;   ///< "10.56.0.32/27" (from the key)
  std::string state;  ///< "owned" | "intent"
};

/// A key under <prefix>pools/<pool>/blocks/ or .../addresses/ in etcd, or a Lease of the pool
/// (kubernetes backend: name = annotation ibcni.io/key, node = spec.holderIdentity).
struct BackendEntry {
  std::string name;  ///< block key or address
  std::string node;
  std::string owner;  ///< addresses only
};

class ClusterSim {
 public:
  explicit ClusterSim(ClusterSimOptions options);

  [[nodiscard]] const ClusterSimOptions& options() const noexcept { return o_; }
  /// "node-00", "node-01", ... (two digits at least).
  [[nodiscard]] std::string nodeName(int node) const;
  [[nodiscard]] std::string dataDir(int node) const;
  /// The pool's name: options().pool, else the network's name.
  [[nodiscard]] std::string pool() const;
  [[nodiscard]] std::string containerId(PodRef pod) const;
  /// The network configuration node `node` is given on stdin.
  [[nodiscard]] std::string config(int node) const;
  [[nodiscard]] std::vector<std::string> env(CniVerb verb, PodRef pod) const;

  /// Every pod of `nodes` x `podsPerNode`; shuffled with `seed` unless it is 0 (then node-major).
  [[nodiscard]] static std::vector<PodRef> pods(int nodes, int podsPerNode, unsigned seed = 0);

  /// One ADD or DEL, exec'd and waited for.
  [[nodiscard]] CniCall call(CniVerb verb, PodRef pod) const;
  /// Starts one without waiting (for the kill -9 tests).
  [[nodiscard]] std::expected<PluginProcess, std::string> start(CniVerb verb, PodRef pod) const;
  /// `pods` in this order, `workers` at a time; the results in the same order.
  [[nodiscard]] std::vector<CniCall> callAll(CniVerb verb, const std::vector<PodRef>& pods, int workers) const;

  // --- Checks. Each names every offender (up to a few dozen) in its failure message. ---

  /// Every call exited 0 (and every ADD printed at least one address).
  [[nodiscard]] ::testing::AssertionResult allSucceeded(const std::vector<CniCall>& calls) const;
  /// No address appears in two successful ADDs of different pods.
  [[nodiscard]] ::testing::AssertionResult noAddressTwice(const std::vector<CniCall>& adds) const;
  /// Each successful ADD's addresses lie in a block its node's blocks.json lists as owned.
  [[nodiscard]] ::testing::AssertionResult addressesInOwnBlocks(const std::vector<CniCall>& adds) const;
  /// No block is owned by two nodes' blocks.json, every owned block is the backend's key held by
  /// that node, and every backend block held by one of nodes 0..nodes-1 is in that node's
  /// blocks.json (as owned, or as intent when `allowIntent`).
  [[nodiscard]] ::testing::AssertionResult blocksConsistent(bool allowIntent = false) const;
  /// blocksConsistent for node `node` alone against the backend (no block lost or unknown).
  [[nodiscard]] ::testing::AssertionResult nodeBlocksMatchBackend(int node, bool allowIntent = false) const;
  /// No attachment record nor address claim left in any node's data dir, and no address claim
  /// of the pool left in the backend.
  [[nodiscard]] ::testing::AssertionResult storesEmpty() const;

  // --- State readers. ---

  /// <dataDir>/.cluster/<pool>/blocks.json of `node`'s "blocks".
  [[nodiscard]] std::expected<std::vector<NodeBlock>, std::string> nodeBlocks(int node) const;
  /// Files in every attachments/ (or ips/) directory under `node`'s data dir.
  [[nodiscard]] std::size_t storedEntries(int node, const std::string& dirName) const;
  /// The backend's block keys of the pool (etcd: JSON gateway range over <prefix>pools/<pool>/blocks/;
  /// kubernetes: the Leases labelled ibcni.io/pool=<pool>,ibcni.io/kind=block).
  [[nodiscard]] std::expected<std::vector<BackendEntry>, std::string> backendBlocks() const;
  /// The backend's address claims of the pool.
  [[nodiscard]] std::expected<std::vector<BackendEntry>, std::string> backendAddresses() const;

 private:
  [[nodiscard]] std::expected<std::vector<BackendEntry>, std::string> backendRange(const std::string& what) const;
  [[nodiscard]] std::expected<std::vector<BackendEntry>, std::string> backendLeases(const std::string& kind) const;
  ClusterSimOptions o_;
};

/// etcd's count of client requests, summed over `endpoints`' /metrics: grpc_server_handled_total
/// of the etcdserverpb services by method ("Range", "Txn", "LeaseGrant", ...; "total" is the sum).
/// JSON gateway requests are counted there too: the gateway is a gRPC client of its own member.
/// Streams (LeaseKeepAlive) count once, when they end.
[[nodiscard]] std::expected<std::map<std::string, std::uint64_t>, std::string> etcdRequestCounts(
    const std::vector<std::string>& endpoints);

/// The bytes etcd sent its clients (etcd_network_client_grpc_sent_bytes_total, summed over
/// `endpoints`): the size of its answers, JSON gateway requests included (as gRPC messages).
[[nodiscard]] std::expected<std::uint64_t, std::string> etcdSentBytes(const std::vector<std::string>& endpoints);

/// Sets `o` up to use the kubernetes backend through `api` (a real kube-apiserver behind the fault
/// proxy): a namespace of its own, ServiceAccount "ibcni" in it with the chart's rights (Leases of
/// that namespace; Nodes get), its token in a kubeconfig written in `dir`, and the URL and token
/// the checks read with.
[[nodiscard]] ::testing::AssertionResult useKubernetes(const ApiProxy& api, const std::string& dir,
                                                       ClusterSimOptions& o);

/// One HTTP request (no proxy, 5 s timeout) with `headers` ("Name: value"): the body of any
/// status when `anyStatus`, else of a 2xx only.
[[nodiscard]] std::expected<std::string, std::string> httpCall(const std::string& method, const std::string& url,
                                                               const std::string& body = {},
                                                               const std::vector<std::string>& headers = {},
                                                               bool anyStatus = false);

/// The API requests the fault proxy passed on (GET <url>/_proxy/stats): "<verb> <resource>" ->
/// total, and "total" the sum (the admin's set-up requests are not counted).
[[nodiscard]] std::expected<std::map<std::string, std::uint64_t>, std::string> apiRequestCounts(
    const std::string& url);

/// `after` - `before` per method (methods absent from `before` count from 0).
[[nodiscard]] std::map<std::string, std::uint64_t> countDiff(const std::map<std::string, std::uint64_t>& before,
                                                             const std::map<std::string, std::uint64_t>& after);

}  // namespace ibcni::testing
