// SPDX-License-Identifier: Apache-2.0
// The cost of sriov mode's cluster GUID pool on ADD, measured against the ADD a runtime runs.
//
// No VF exists here, so the ADD+DEL with a pool is measured in two parts, side by side in one run,
// every part's cycles interleaved with the others':
//   exec        the ADD a runtime runs, less what only a VF has: the built ibcni exec'd in sriov mode
//               on a veth end standing in for the VF (cni_bench's ibcni contender: a fresh pod netns
//               per cycle, the netdev moved in and back, ibcni-ipam in process, state on tmpfs). A
//               real VF adds the GUID set through the PF and the rebind, so this is a lower bound of
//               an ADD with a requested GUID, and the ratio below an upper bound;
//   pool        ibcni's ADD+DEL in process (plugin::dispatch) over the fakes of one node
//               (tests/support/vf_node_sim.h: one mlx5 PF, one VF of GUID zero), state and data on
//               tmpfs, with a cluster guidPool whose backend is the production etcd backend against
//               a real one-member etcd, every backend call counted (tests/support/counting_backend.h):
//               the VF gets a GUID of the node's owned block (claimed by the warm-up);
//   requested   the same configuration, the pod requests a GUID outside the pool's range (the VF gets
//               it, the pool does nothing);
//   floor       no guidPool at all, the same requested GUID: for context.
// The pool's cost is pool - requested: the same code in the same process but for the pool's work.
// The ADD with a pool then costs exec + (pool - requested), and the target is its ratio to exec:
// at most 1.05, with no backend call during the timed cycles. The in-process ratio pool/requested
// (ibcni's own work alone, without a process or a kernel operation) is printed beside it.
//
// Runs in network and mount namespaces of its own (unshared at start): root.
//   guid_pool_bench [--ibcni PATH] [--samples N] [--warmup N] [--no-targets]
// Exit status: 0, 1 when a check or the target failed, 2 on a usage or setup error.
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_stats.h"
#include "cni_bench.h"
#include "ipam/backends/production_backends.h"
#include "lib/http/curl_http_client.h"
#include "support/counting_backend.h"
#include "support/etcd_cluster.h"
#include "support/vf_node_sim.h"

namespace {

using nlohmann::json;
using ibcni::testing::VfNodeSim;

constexpr const char* kOutside = "c2:11:22:33:44:55:66:77";

struct Args {
  std::string ibcni = IBCNI_BINARY;
  int samples = 101;
  int warmup = 3;
  bool targets = true;
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--ibcni PATH] [--samples N] [--warmup N] [--no-targets]\n", argv0);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--no-targets") {
      a.targets = false;
    } else if (arg == "--ibcni" && i + 1 < argc) {
      a.ibcni = argv[++i];
    } else if ((arg == "--samples" || arg == "--warmup") && i + 1 < argc) {
      (arg == "--samples" ? a.samples : a.warmup) = std::atoi(argv[++i]);
    } else {
      usage(argv[0]);
    }
  }
  if (a.samples < 1 || a.warmup < 1) {
    usage(argv[0]);
  }
  return a;
}

// One ADD+DEL of the VF's pod: its time in ms, or a negative value when either failed (said on stderr).
double cycle(VfNodeSim& node, const json& conf) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto add = node.run("ADD", conf, 0);
  const auto del = node.run("DEL", conf, 0);
  const double took = ibcni::bench::ms(std::chrono::steady_clock::now() - t0);
  if (add.exitCode != 0 || del.exitCode != 0) {
    std::fprintf(stderr, "ADD exit %d: %s\nDEL exit %d: %s\n", add.exitCode, add.stdoutText.c_str(), del.exitCode,
                 del.stdoutText.c_str());
    return -1;
  }
  return took;
}

struct Configs {
  json pool;
  json requested;
  json floor;
};

Configs configs(const VfNodeSim& node, const std::vector<std::string>& endpoints) {
  const json cluster = {{"backend", "etcd"}, {"etcd", {{"endpoints", endpoints}}}, {"nodeName", node.name()}};
  const json guidPool = {{"range", "02:00:00:00:00:01:00:00-02:00:00:00:00:01:ff:ff"},
                         {"pool", "gbench"},
                         {"blockSize", 16},
                         {"cluster", cluster}};
  Configs c;
  c.pool = node.config(0, guidPool);
  c.requested = c.pool;
  c.requested["runtimeConfig"]["infinibandGUID"] = kOutside;
  c.floor = c.requested;
  c.floor.erase("guidPool");
  return c;
}

// One exec'd ADD+DEL of ibcni on the veth stand-in, in a fresh pod netns: its time in ms (fork to
// wait4 of each), or a negative value when either failed or the device is not back (said on stderr).
double execCycle(const ibcni::bench::Paths& p, int i) {
  using namespace ibcni::bench;
  auto ns = makeNetns("gpb-" + std::to_string(i));
  const std::string cid = "gpb-exec-" + std::to_string(i);
  const std::string conf = pluginConfig(Kind::kIbcni, p, "gpbexec", "10.11", kDevice).dump();
  const std::vector<std::string> argv = {p.ibcni};
  const ProgramRun add = ibcni::bench::run(argv, cniEnv("ADD", cid, ns.path(), kIfName, p), conf);
  const ProgramRun del = ibcni::bench::run(argv, cniEnv("DEL", cid, ns.path(), kIfName, p), conf);
  if (add.status != 0 || firstAddress(add.out).empty()) {
    printFailure("exec'd ibcni ADD", add);
    return -1;
  }
  if (del.status != 0 || !linkInHost(kDevice)) {
    printFailure("exec'd ibcni DEL (or the device is not back)", del);
    return -1;
  }
  return ms(add.elapsed()) + ms(del.elapsed());
}

// Every part's cycles, interleaved: sample i runs the four parts, each first in turn.
bool sample(VfNodeSim& node, const Configs& c, const ibcni::bench::Paths& p, int i,
            std::vector<std::vector<double>>& out) {
  const std::vector<const json*> inProcess = {&c.pool, &c.requested, &c.floor};
  const std::size_t parts = inProcess.size() + 1;
  for (std::size_t k = 0; k < parts; ++k) {
    const std::size_t which = (k + static_cast<std::size_t>(i)) % parts;
    const double took = which < inProcess.size() ? cycle(node, *inProcess[which]) : execCycle(p, i);
    if (took < 0) {
      return false;
    }
    out[which].push_back(took);
  }
  return true;
}

int run(const Args& args, const ibcni::bench::Paths& p, const std::vector<std::string>& endpoints) {
  std::atomic<int> calls{0};
  ibcni::http::CurlHttpClient client;
  VfNodeSim node(p.tmpfs + "/node", "bench-node", 1,
                 ibcni::ipam::testing::counting(ibcni::plugin::productionBackends(client), calls));
  if (!node.ok()) {
    std::fprintf(stderr, "fake sysfs: %s\n", node.error().c_str());
    return 2;
  }
  const Configs c = configs(node, endpoints);
  std::vector<std::vector<double>> warm(4);
  for (int i = 0; i < args.warmup; ++i) {
    if (!sample(node, c, p, -1 - i, warm)) {
      return 1;
    }
  }
  const int warmCalls = calls.exchange(0);
  std::vector<std::vector<double>> samples(4);
  for (int i = 0; i < args.samples; ++i) {
    if (!sample(node, c, p, i, samples)) {
      return 1;
    }
  }
  const int timedCalls = calls.load();
  const auto pool = ibcni::bench::stats(samples[0]);
  const auto requested = ibcni::bench::stats(samples[1]);
  const auto floor = ibcni::bench::stats(samples[2]);
  const auto exec = ibcni::bench::stats(samples[3]);
  const double extra = pool.median - requested.median;
  const double ratio = (exec.median + extra) / exec.median;
  std::printf("ADD+DEL, %d samples of each part, interleaved (ms: median p95)\n", args.samples);
  std::printf("  exec'd ibcni, sriov mode on a veth stand-in      %7.3f  %7.3f\n", exec.median, exec.p95);
  std::printf("  in process: guidPool, a GUID of the owned block %7.3f  %7.3f\n", pool.median, pool.p95);
  std::printf("  in process: guidPool, requested GUID outside it %7.3f  %7.3f\n", requested.median, requested.p95);
  std::printf("  in process: no guidPool (floor)                 %7.3f  %7.3f\n", floor.median, floor.p95);
  std::printf("  the pool's own work (pool - requested) %.3f ms; in process alone pool / requested %.3f\n", extra,
              pool.median / requested.median);
  std::printf("  ADD+DEL with the pool against one with a requested GUID: (%.3f + %.3f) / %.3f = %.4f\n",
              exec.median, extra, exec.median, ratio);
  std::printf("  backend calls: %d during the warm-up, %d during the timed cycles\n", warmCalls, timedCalls);
  const bool ok = ratio <= 1.05 && timedCalls == 0;
  std::printf("%s ADD with a GUID pool and owned blocks: ratio %.4f (target <= 1.05), %d backend calls (target 0)\n",
              ok ? "PASS" : (args.targets ? "FAIL" : "INFO"), ratio, timedCalls);
  return ok || (!args.targets && timedCalls == 0) ? 0 : 1;
}

// Network and mount namespaces of the bench's own, the veth stand-in in them, the pod netns and
// every file on tmpfs under `root`.
ibcni::bench::Paths isolate(const Args& args, const std::string& root) {
  using namespace ibcni::bench;
  if (::geteuid() != 0) {
    fatal("needs root (network namespaces)");
  }
  if (::access(args.ibcni.c_str(), X_OK) != 0) {
    fatal("no ibcni at " + args.ibcni);
  }
  if (::unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) {
    fatal(std::string("unshare: ") + std::strerror(errno));
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    fatal(std::string("make / private: ") + std::strerror(errno));
  }
  Paths p;
  p.ibcni = args.ibcni;
  p.disk = p.tmpfs = root;
  std::filesystem::create_directories(root + "/netns");
  ::setenv("TMPDIR", (root + "/netns").c_str(), 1);  // the pod netns and the fake sysfs tree
  sh("ip link set lo up && ip link add " + std::string(kDevice) + " type veth peer name " + kDevice + "p");
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  char tmpl[] = "/dev/shm/ibcni-guid-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 2;
  }
  const std::string root = tmpl;
  const ibcni::bench::Paths paths = isolate(args, root);
  int status = 2;
  {
    ibcni::testing::EtcdCluster etcd;  // on the bench's own loopback
    if (auto started = etcd.start(1); started) {
      status = run(args, paths, etcd.endpoints());
    } else {
      std::fprintf(stderr, "starting etcd: %s\n", started.message());
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  return status;
}
