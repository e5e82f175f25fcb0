// SPDX-License-Identifier: Apache-2.0
// ibcni-ipam's cluster mode (backend etcd) against a real 3-member etcd on loopback, beside the
// node-local ibcni-ipam in the same run. Every ADD is the standalone ibcni-ipam exec'd as a
// runtime execs an IPAM plugin (tests/support/cluster_sim.h), with the nodes' data dirs on tmpfs.
// Prints:
//   - 2000 ADDs over 100 nodes, 8 at a time (the pods in random order): wall time, per-ADD p50 and
//     p99, a node's first ADD (the one that claims its block) apart, etcd requests and the bytes of
//     etcd's answers per ADD, the requests of the busiest second, and the CPU time each program
//     spent in it (the plugin runs, the agent, etcd's members, kube-apiserver: process_cpu.h), and
//     the plugin runs' own CPU time (each one's wait4), the nodes' first ADDs apart from the others;
//   - the same storm through the kubernetes backend (a real kube-apiserver over the same etcd);
//   - with --storm N, the same two storms over N nodes (target for 1000 nodes: wall within 1.5x of
//     node-local, per-ADD p99 under 50 ms);
//   - the steady-state ADD (the node's blocks owned, one free): cluster mode against node-local,
//     samples interleaved (target: ratio of the medians <= 1.2), and etcd requests per ADD+DEL;
//   - the cost of claiming a block: an ADD that must claim one (block size 4, the node's blocks
//     full) beside the ADDs that did not; the first ADD of a fresh node; one EtcdBlockBackend
//     claim() in process.
// The nodes' agent: ibcni-agent beside IBCNI_IPAM (or --agent PATH; --no-agent: none), started
// once with a relay socket of its own (--interval 0: no passes), which every simulated node's
// ibcni-ipam sends its requests through, as on a node where the DaemonSet runs; the first ADD of a
// fresh node is measured with it and without it (each run then starts `ibcni http-relay`).
// etcd requests are counted from the members' own /metrics: grpc_server_handled_total of the
// etcdserverpb services, summed over the 3 members, before and after (the JSON gateway the
// plugin talks to is a gRPC client of its member, so each gateway request is counted once), and
// the bytes from etcd_network_client_grpc_sent_bytes_total; the busiest second from the counts
// read once a second during the storm.
//
//   cluster_ipam_bench IBCNI_IPAM [--nodes N] [--pods N] [--workers N] [--samples N] [--storm N]
//                     [--agent PATH | --no-agent] [--no-targets]
// Exit status: 0, 1 when a check or a target failed, 2 on a usage or setup error.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "bench_stats.h"
#include "process_cpu.h"
#include "ipam/backends/etcd_block_backend.h"
#include "lib/http/curl_http_client.h"
#include "support/cluster_sim.h"
#include "support/daemon_process.h"
#include "support/etcd_cluster.h"
#include "support/control_plane.h"

namespace {

namespace fs = std::filesystem;
using ibcni::testing::ClusterSim;
using ibcni::testing::ClusterSimOptions;
using ibcni::testing::CniCall;
using ibcni::testing::CniVerb;
using ibcni::testing::PodRef;
using Counts = std::map<std::string, std::uint64_t>;

struct Args {
  std::string plugin;
  int nodes = 100;
  int pods = 20;
  int workers = 8;
  int samples = 101;
  int storm = 0;  ///< nodes of the second storm (0: none)
  std::string agent;  ///< ibcni-agent; empty: none
  bool targets = true;
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s IBCNI_IPAM [--nodes N] [--pods N] [--workers N] [--samples N] [--storm N]\n"
               "       [--agent PATH | --no-agent] [--no-targets]\n",
               argv0);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  bool agentGiven = false;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) {
        usage(argv[0]);
      }
      return std::atoi(argv[++i]);
    };
    if (s == "--nodes") {
      a.nodes = value();
    } else if (s == "--pods") {
      a.pods = value();
    } else if (s == "--workers") {
      a.workers = value();
    } else if (s == "--samples") {
      a.samples = value();
    } else if (s == "--storm") {
      a.storm = value();
    } else if (s == "--no-targets") {
      a.targets = false;
    } else if (s == "--agent" && i + 1 < argc) {
      a.agent = argv[++i];
      agentGiven = true;
    } else if (s == "--no-agent") {
      agentGiven = true;
    } else if (!s.empty() && s[0] != '-' && a.plugin.empty()) {
      a.plugin = s;
    } else {
      usage(argv[0]);
    }
  }
  if (a.plugin.empty() || a.nodes < 1 || a.pods < 1 || a.workers < 1 || a.samples < 1 || a.storm < 0) {
    usage(argv[0]);
  }
  if (!agentGiven) {
    const auto beside = fs::path(a.plugin).parent_path() / "ibcni-agent";
    a.agent = ::access(beside.c_str(), X_OK) == 0 ? beside.string() : "";
  }
  return a;
}

Counts counts(const std::vector<std::string>& endpoints) {
  auto c = ibcni::testing::etcdRequestCounts(endpoints);
  if (!c) {
    std::fprintf(stderr, "reading etcd's /metrics: %s\n", c.error().c_str());
    std::exit(2);
  }
  return *c;
}

// "12.3 (Range 4.0, Txn 8.0, ...)": requests per `per`, by method.
std::string perOp(const Counts& d, double per) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(d.count("total") ? d.at("total") : 0) / per);
  std::string s = buf;
  std::string parts;
  for (const auto& [m, v] : d) {
    if (m == "total" || v == 0) {
      continue;
    }
    std::snprintf(buf, sizeof buf, "%s%s %.2f", parts.empty() ? "" : ", ", m.c_str(), static_cast<double>(v) / per);
    parts += buf;
  }
  return parts.empty() ? s : s + " (" + parts + ")";
}

std::vector<double> latencies(const std::vector<CniCall>& calls) {
  std::vector<double> v;
  for (const auto& c : calls) {
    v.push_back(c.ms);
  }
  return v;
}

std::uint64_t sentBytes(const std::vector<std::string>& endpoints) {
  auto b = ibcni::testing::etcdSentBytes(endpoints);
  if (!b) {
    std::fprintf(stderr, "reading etcd's /metrics: %s\n", b.error().c_str());
    std::exit(2);
  }
  return *b;
}

// etcd's requests in the busiest second while it runs: the counts read once a second.
class PeakSampler {
 public:
  explicit PeakSampler(const std::vector<std::string>& endpoints)
      : thread_([this, endpoints] {
          std::uint64_t last = total(endpoints);
          while (!stop_) {
            std::this_thread::sleep_for(std::chrono::seconds(1));
            const std::uint64_t now = total(endpoints);
            peak_ = std::max(peak_.load(), now - std::min(now, last));
            last = now;
          }
        }) {}
  PeakSampler(const PeakSampler&) = delete;
  PeakSampler& operator=(const PeakSampler&) = delete;
  ~PeakSampler() { (void)stop(); }
  /// Stops sampling at the end of the second under way. @return the peak.
  std::uint64_t stop() {
    stop_ = true;
    if (thread_.joinable()) {
      thread_.join();
    }
    return peak_;
  }

 private:
  static std::uint64_t total(const std::vector<std::string>& endpoints) {
    auto c = ibcni::testing::etcdRequestCounts(endpoints);
    return c && c->count("total") ? c->at("total") : 0;
  }
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> peak_{0};
  std::thread thread_;
};

// One storm: `nodes` x pods ADDs in random order, cluster mode then node-local.
struct Storm {
  int nodes = 0;
  int adds = 0;
  double clusterWall = 0;
  double localWall = 0;
  ibcni::bench::Stats cluster;
  ibcni::bench::Stats local;
  ibcni::bench::Stats firstCluster;  ///< each node's first ADD in the storm's order (it claims the block)
  ibcni::bench::Stats firstLocal;
  Counts calls;
  double bytesPerAdd = 0;  ///< etcd's answers
  std::uint64_t peak = 0;  ///< etcd requests in the busiest second
  double apiPerAdd = -1;   ///< kubernetes: the API server's requests (leases, nodes) per ADD
  std::string clusterCpu;  ///< the CPU time the cluster storm cost each program (process_cpu.h)
  std::string localCpu;    ///< the same, node-local
  /// The plugin runs' own CPU (wait4), in seconds: the nodes' first ADDs, then the others.
  double firstCpuC = 0, restCpuC = 0, firstCpuL = 0, restCpuL = 0;
  bool ok = false;
};

void printStorm(const Storm& s, const std::string& backend, int workers) {
  std::printf("| %d ADDs over %d nodes, %d at a time, %s: wall | %.0f ms | %.0f ms | %.2f |\n", s.adds, s.nodes,
              workers, backend.c_str(), s.clusterWall, s.localWall, s.clusterWall / s.localWall);
  std::printf("| same: per-ADD p50 / p99 | %.2f / %.2f ms | %.2f / %.2f ms | %.2f |\n", s.cluster.median,
              s.cluster.p99, s.local.median, s.local.p99, s.cluster.median / s.local.median);
  std::printf("| same: a node's first ADD (claims its block), p50 / p99 of %zu | %.2f / %.2f ms | %.2f / %.2f ms | "
              "%.2f |\n",
              s.firstCluster.n, s.firstCluster.median, s.firstCluster.p99, s.firstLocal.median, s.firstLocal.p99,
              s.firstCluster.median / s.firstLocal.median);
  std::printf("| same: etcd requests per ADD | %s | 0 | |\n", perOp(s.calls, s.adds).c_str());
  std::printf("| same: etcd answers' bytes per ADD; requests in the busiest second | %.0f B; %llu /s | | |\n",
              s.bytesPerAdd, static_cast<unsigned long long>(s.peak));
  if (s.apiPerAdd >= 0) {
    std::printf("| same: API requests (leases, nodes) per ADD | %.2f | | |\n", s.apiPerAdd);
  }
  std::printf("| same: CPU time spent, by program | %s | %s | |\n", s.clusterCpu.c_str(), s.localCpu.c_str());
  std::printf("| same: the plugin runs' CPU, the nodes' first ADDs / the others | %.2f / %.2f s | %.2f / %.2f s | "
              "%.2f / %.2f |\n",
              s.firstCpuC, s.restCpuC, s.firstCpuL, s.restCpuL, s.firstCpuC / s.firstCpuL, s.restCpuC / s.restCpuL);
}

std::size_t ownedBlocks(const ClusterSim& sim, int node) {
  auto b = sim.nodeBlocks(node);
  if (!b) {
    return 0;
  }
  return static_cast<std::size_t>(
      std::count_if(b->begin(), b->end(), [](const ibcni::testing::NodeBlock& x) { return x.state == "owned"; }));
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  bool ok = true;
  auto require = [&](bool cond, const std::string& what) {
    std::printf("%s %s\n", cond ? "PASS" : "FAIL", what.c_str());
    ok = ok && cond;
  };
  auto check = [&](const ::testing::AssertionResult& r, const std::string& what) {
    if (!r) {
      std::printf("FAIL %s: %s\n", what.c_str(), r.message());
      ok = false;
    }
    return static_cast<bool>(r);
  };

  ibcni::testing::EtcdCluster etcd;
  if (auto started = etcd.start(3); !started) {
    std::fprintf(stderr, "starting a 3-member etcd: %s\n", started.message());
    return 2;
  }
  char tmpl[] = "/dev/shm/ibcni-cluster-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 2;
  }
  const std::string root = tmpl;
  const auto endpoints = etcd.endpoints();

  // The nodes' agent and its relay socket (one process standing for every node's).
  std::optional<ibcni::testing::RelayAgent> agent;
  std::string relay;
  if (!args.agent.empty()) {
    agent.emplace(args.agent, root + "/agent");
    if (!agent->up()) {
      std::fprintf(stderr, "%s serves no relay socket (its log: %s/agent/agent.log)\n", args.agent.c_str(),
                   root.c_str());
      return 2;
    }
    relay = agent->socket();
  }

  // The kubernetes backend: Leases through a real kube-apiserver (built from its module) over the
  // same etcd, straight over TLS as a node reaches it; its requests counted by its own
  // apiserver_request_total.
  ibcni::testing::ControlPlane cp;
  ibcni::testing::ApiProxy api;  // the admin's set-up and the metrics only: ibcni-ipam talks to the server
  std::expected<std::string, std::string> token = std::unexpected("kube-apiserver is not built (scripts/build-upstream.sh)");
  if (ibcni::testing::ControlPlane::built()) {
    if (auto started = cp.start(etcd.endpointList()); !started) {
      token = std::unexpected(started.message());
    } else if (auto proxied = api.start(cp); !proxied) {
      token = std::unexpected(proxied.message());
    } else {
      token = api.serviceAccount("kube-system", "ibcni", ibcni::testing::leaseRules(), ibcni::testing::nodeRules());
    }
  }
  if (!token) {
    std::printf("FAIL kubernetes: %s\n", token.error().c_str());
    ok = false;
  } else {
    check(ibcni::testing::writeTokenKubeconfig(root + "/k8s.kubeconfig", cp.server(), *token, "", cp.ca()),
          "kubernetes: kubeconfig");
  }

  auto options = [&](const std::string& sub, bool cluster, const std::string& network) {
    ClusterSimOptions o;
    o.plugin = args.plugin;
    o.root = root + "/" + sub;
    o.nodes = args.nodes;
    o.network = network;
    o.clusterMode = cluster;
    o.etcdEndpoints = endpoints;
    // Each scenario a key space of its own: pools over the same ranges in one key space are
    // refused as overlapping (ipam/README.md "Cluster safety", I5).
    o.etcdPrefix = "/bench-" + sub + "/";
    o.relaySocket = relay;
    return o;
  };
  const int total = args.nodes * args.pods;

  // 1. N x M ADDs over the nodes, cluster mode (etcd, or kubernetes) then node-local.
  const auto runStorm = [&](int nodes, const std::string& tag, bool kubernetes) {
    Storm st;
    st.nodes = nodes;
    st.adds = nodes * args.pods;
    ClusterSimOptions co = options("cluster" + tag, true, "bench");
    ClusterSimOptions lo = options("local" + tag, false, "bench");
    co.nodes = lo.nodes = nodes;
    if (kubernetes) {
      co.backend = "kubernetes";
      co.kubeconfig = root + "/k8s.kubeconfig";
      co.k8sUrl = api.url();
      co.k8sToken = token.value_or("");
      co.k8sNamespace = "kube-system";
    }
    const ClusterSim cluster(co);
    const ClusterSim local(lo);
    const auto pods = ClusterSim::pods(nodes, args.pods, 18);
    const Counts c0 = counts(endpoints);
    const std::uint64_t b0 = sentBytes(endpoints);
    const long api0 = kubernetes ? ibcni::testing::apiServerRequestCount(api, {"leases", "nodes"}) : -1;
    PeakSampler sampler(endpoints);
    auto cpu0 = ibcni::bench::cpuByProgram();
    auto t0 = std::chrono::steady_clock::now();
    const auto clusterAdds = cluster.callAll(CniVerb::kAdd, pods, args.workers);
    st.clusterWall = ibcni::bench::ms(std::chrono::steady_clock::now() - t0);
    st.clusterCpu = ibcni::bench::cpuSpent(cpu0, ibcni::bench::cpuByProgram());
    st.peak = sampler.stop();
    st.calls = ibcni::testing::countDiff(c0, counts(endpoints));
    st.bytesPerAdd = static_cast<double>(sentBytes(endpoints) - b0) / static_cast<double>(st.adds);
    if (const long api1 = kubernetes ? ibcni::testing::apiServerRequestCount(api, {"leases", "nodes"}) : -1;
        api0 >= 0 && api1 >= api0) {
      st.apiPerAdd = static_cast<double>(api1 - api0) / static_cast<double>(st.adds);
    }
    cpu0 = ibcni::bench::cpuByProgram();
    t0 = std::chrono::steady_clock::now();
    const auto localAdds = local.callAll(CniVerb::kAdd, pods, args.workers);
    st.localWall = ibcni::bench::ms(std::chrono::steady_clock::now() - t0);
    st.localCpu = ibcni::bench::cpuSpent(cpu0, ibcni::bench::cpuByProgram());
    const std::string what = std::string(kubernetes ? "kubernetes" : "cluster") + " (" + std::to_string(nodes) +
                             " nodes)";
    st.ok = check(cluster.allSucceeded(clusterAdds), what + ": every ADD") &&
            check(cluster.noAddressTwice(clusterAdds), what + ": no address twice") &&
            check(cluster.blocksConsistent(), what + ": blocks");
    check(local.allSucceeded(localAdds), "node-local (" + std::to_string(nodes) + " nodes): every ADD");
    std::vector<bool> seen(static_cast<std::size_t>(nodes));
    std::vector<double> firstC;
    std::vector<double> firstL;
    for (std::size_t i = 0; i < pods.size(); ++i) {
      if (!seen[static_cast<std::size_t>(pods[i].node)]) {
        seen[static_cast<std::size_t>(pods[i].node)] = true;
        firstC.push_back(clusterAdds[i].ms);
        firstL.push_back(localAdds[i].ms);
        st.firstCpuC += clusterAdds[i].cpuMs / 1e3;
        st.firstCpuL += localAdds[i].cpuMs / 1e3;
      } else {
        st.restCpuC += clusterAdds[i].cpuMs / 1e3;
        st.restCpuL += localAdds[i].cpuMs / 1e3;
      }
    }
    st.cluster = ibcni::bench::stats(latencies(clusterAdds));
    st.local = ibcni::bench::stats(latencies(localAdds));
    st.firstCluster = ibcni::bench::stats(firstC);
    st.firstLocal = ibcni::bench::stats(firstL);
    return st;
  };
  const Storm storm = runStorm(args.nodes, "", false);
  const bool manyOk = storm.ok;
  // 1b. The same storm through the kubernetes backend.
  const Storm k8sStorm = token ? runStorm(args.nodes, "-k8s", true) : Storm{};

  // 2. Steady state: one node each, its blocks owned with room left (a block of 32, one pod in
  //    it); ADD then DEL of another pod, the two modes interleaved sample by sample.
  ClusterSim steadyC(options("steady-cluster", true, "steady"));
  ClusterSim steadyL(options("steady-local", false, "steady"));
  for (auto* s : {&steadyC, &steadyL}) {
    const CniCall warm = s->call(CniVerb::kAdd, {0, 0});
    if (!warm.ok()) {
      std::fprintf(stderr, "warm-up ADD failed: %s\n", warm.describe(s->nodeName(0)).c_str());
      return 1;
    }
  }
  const std::size_t steadyBlocks = ownedBlocks(steadyC, 0);
  std::vector<double> steadyAddC;
  std::vector<double> steadyAddL;
  bool steadyOk = true;
  const Counts c1 = counts(endpoints);
  for (int i = 0; i < args.samples; ++i) {
    const PodRef p{0, 1 + i % 2};
    for (auto* s : {&steadyC, &steadyL}) {
      const CniCall a = s->call(CniVerb::kAdd, p);
      const CniCall d = s->call(CniVerb::kDel, p);
      steadyOk = steadyOk && a.ok() && d.ok();
      (s == &steadyC ? steadyAddC : steadyAddL).push_back(a.ms);
    }
  }
  const Counts steadyCalls = ibcni::testing::countDiff(c1, counts(endpoints));
  require(steadyOk, "steady state: every ADD and DEL succeeded");
  require(steadyBlocks >= 1 && ownedBlocks(steadyC, 0) == steadyBlocks,
          "steady state: the node owns its block(s) and claimed none during the samples");
  const auto sc = ibcni::bench::stats(steadyAddC);
  const auto sl = ibcni::bench::stats(steadyAddL);

  // 3. Claiming a block: one node, blocks of 4, pods added one by one; an ADD that made the
  //    node's owned blocks grow claimed one.
  ClusterSimOptions claimOpts = options("claim", true, "claim");
  claimOpts.blockSize = 4;
  ClusterSim claim(claimOpts);
  std::vector<double> claiming;
  std::vector<double> inBlock;
  const Counts c2 = counts(endpoints);
  std::size_t owned = 0;
  for (int i = 0; i < 4 * args.samples / 2; ++i) {
    const CniCall a = claim.call(CniVerb::kAdd, {0, i});
    if (!a.ok()) {
      std::printf("FAIL claim: %s\n", a.describe(claim.nodeName(0)).c_str());
      ok = false;
      break;
    }
    const std::size_t now = ownedBlocks(claim, 0);
    (now > owned ? claiming : inBlock).push_back(a.ms);
    owned = now;
  }
  const Counts claimCalls = ibcni::testing::countDiff(c2, counts(endpoints));
  require(claiming.size() >= inBlock.size() / 4, "claim: a block of 4 claimed at least every 5 ADDs");
  // The first ADD of a fresh node (the node's lease, the pool's definition, its first block): with
  // the agent's relay, and without (the run starts `ibcni http-relay`, which loads libcurl).
  const auto firstAdds = [&](const std::string& sub, const std::string& socket) {
    std::vector<double> ms;
    ClusterSimOptions fo = options(sub, true, sub);
    fo.relaySocket = socket;
    ClusterSim fresh(fo);
    for (int n = 0; n < std::min(args.nodes, args.samples); ++n) {
      const CniCall a = fresh.call(CniVerb::kAdd, {n, 0});
      ok = ok && a.ok();
      ms.push_back(a.ms);
    }
    return ibcni::bench::stats(ms);
  };
  const auto fa = firstAdds("fresh", relay);
  const auto faExec = relay.empty() ? fa : firstAdds("fresh-exec", "");
  // EtcdBlockBackend::claim() alone, in this process.
  std::vector<double> backendClaim;
  {
    ibcni::http::CurlHttpClient http;
    ibcni::ipam::EtcdBlockBackend::Options bo;
    bo.endpoints = endpoints;
    ibcni::ipam::EtcdBlockBackend backend(http, bo);
    (void)backend.claim(ibcni::ipam::ClaimKind::kBlock, "direct", "warm-4", "bench-node", {});  // a warm connection
    for (int i = 0; i < args.samples; ++i) {
      const auto t = std::chrono::steady_clock::now();
      const auto r = backend.claim(ibcni::ipam::ClaimKind::kBlock, "direct",
                                   "10.77." + std::to_string(i / 64) + "." + std::to_string(i % 64 * 4) + "-30",
                                   "bench-node", {});
      backendClaim.push_back(ibcni::bench::ms(std::chrono::steady_clock::now() - t));
      if (!r || r->state != ibcni::ipam::ClaimState::kClaimed) {
        std::printf("FAIL backend claim %d: %s\n", i, r ? "not claimed" : r.error().describe().c_str());
        ok = false;
        break;
      }
    }
  }
  // 4. The storms over more nodes (--storm N).
  Storm big;
  Storm bigK8s;
  if (args.storm > 0) {
    big = runStorm(args.storm, "-" + std::to_string(args.storm), false);
    if (token) {
      bigK8s = runStorm(args.storm, "-k8s-" + std::to_string(args.storm), true);
    }
  }
  if (agent) {
    agent->stop(SIGTERM);
  }
  fs::remove_all(root);

  const auto cl = ibcni::bench::stats(claiming);
  const auto ib = ibcni::bench::stats(inBlock);
  const auto bc = ibcni::bench::stats(backendClaim);
  std::printf("\n| figure (ibcni-ipam exec'd; etcd 3 members on loopback; tmpfs) | cluster mode | node-local | ratio |\n");
  std::printf("|---|---|---|---|\n");
  const std::string relayNote = relay.empty() ? " (no agent: each run starts `ibcni http-relay`)"
                                              : " (through the agent's relay socket)";
  std::printf("| the storms below%s | | | |\n", relayNote.c_str());
  printStorm(storm, "etcd", args.workers);
  if (token) {
    printStorm(k8sStorm, "kubernetes (kube-apiserver over the same etcd)", args.workers);
  }
  std::printf("| steady-state ADD (blocks owned), p50 / p99 of %d | %.2f / %.2f ms | %.2f / %.2f ms | %.2f |\n",
              args.samples, sc.median, sc.p99, sl.median, sl.p99, sc.median / sl.median);
  std::printf("| steady state: etcd requests per ADD+DEL | %s | 0 | |\n", perOp(steadyCalls, args.samples).c_str());
  std::printf("| ADD claiming a block (size 4), p50 / p99 of %zu | %.2f / %.2f ms | | |\n", cl.n, cl.median, cl.p99);
  std::printf("| ADD inside an owned block (same run), p50 of %zu | %.2f ms | | |\n", ib.n, ib.median);
  std::printf("| one-block claim, added to an ADD (p50 difference) | %.2f ms | | |\n", cl.median - ib.median);
  std::printf("| same run: etcd requests per ADD (1 claim per %.1f ADDs) | %s | | |\n",
              cl.n ? static_cast<double>(cl.n + ib.n) / static_cast<double>(cl.n) : 0.0,
              perOp(claimCalls, static_cast<double>(cl.n + ib.n)).c_str());
  std::printf("| first ADD of a fresh node%s, p50 / p99 of %zu | %.2f / %.2f ms | | |\n", relayNote.c_str(), fa.n,
              fa.median, fa.p99);
  if (!relay.empty()) {
    std::printf("| same, no agent (each run starts `ibcni http-relay`), p50 / p99 of %zu | %.2f / %.2f ms | | |\n",
                faExec.n, faExec.median, faExec.p99);
  }
  std::printf("| EtcdBlockBackend::claim() in process, p50 / p99 of %zu | %.2f / %.2f ms | | |\n", bc.n, bc.median,
              bc.p99);

  if (args.storm > 0) {
    printStorm(big, "etcd", args.workers);
    if (token) {
      printStorm(bigK8s, "kubernetes", args.workers);
    }
  }

  require(manyOk, "cluster: " + std::to_string(total) + " ADDs succeeded, all distinct, blocks consistent");
  if (token) {
    require(k8sStorm.ok, "kubernetes: " + std::to_string(total) + " ADDs succeeded, all distinct, blocks consistent");
  }
  if (args.storm > 0) {
    require(big.ok, "cluster: " + std::to_string(big.adds) + " ADDs over " + std::to_string(big.nodes) +
                        " nodes succeeded, all distinct, blocks consistent");
    if (token) {
      require(bigK8s.ok, "kubernetes: " + std::to_string(bigK8s.adds) + " ADDs over " +
                             std::to_string(bigK8s.nodes) + " nodes succeeded, all distinct, blocks consistent");
    }
  }
  if (args.targets) {
    require(sc.median <= 1.2 * sl.median, "steady-state ADD in cluster mode within 1.2x of node-local (medians)");
    if (args.storm >= 1000) {
      for (const auto& [st, name] : {std::pair<const Storm*, const char*>{&big, "etcd"}, std::pair<const Storm*, const char*>{&bigK8s, "kubernetes"}}) {
        if (st->nodes > 0) {
          require(st->clusterWall <= 1.5 * st->localWall && st->cluster.p99 < 50,
                  "the storm over " + std::to_string(st->nodes) + " nodes in cluster mode (" + name +
                      ") within 1.5x of node-local's wall, per-ADD p99 under 50 ms");
        }
      }
    }
  }
  return ok ? 0 : 1;
}
