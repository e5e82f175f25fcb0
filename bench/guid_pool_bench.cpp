// SPDX-License-Identifier: Apache-2.0
// The cost of sriov mode's cluster GUID pool on ADD: ibcni's ADD+DEL in process (plugin::dispatch)
// over the fakes of one node (tests/support/vf_node_sim.h: one mlx5 PF, one VF of GUID zero), its
// state and data dirs on tmpfs, the GUID pool's backend the production etcd backend against a real
// one-member etcd, every backend call counted (tests/support/counting_backend.h). After a warm-up
// (the node's block claimed by the first ADD), three configurations, their cycles interleaved:
//   pool       guidPool with cluster: the VF gets a GUID of the node's owned block;
//   requested  the same configuration, the pod requests a GUID outside the pool's range (the VF
//              gets it, the pool does nothing): the baseline;
//   floor      no guidPool at all, the same requested GUID: for context.
// Prints each median (ms per ADD+DEL), pool/requested and the backend calls during the timed
// cycles. PASS when the ratio is at most 1.05 and no backend call was made.
//
//   guid_pool_bench [--samples N] [--warmup N] [--no-targets]
// Exit status: 0, 1 when a check or the target failed, 2 on a usage or setup error.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_stats.h"
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
  int samples = 101;
  int warmup = 3;
  bool targets = true;
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--samples N] [--warmup N] [--no-targets]\n", argv0);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--no-targets") {
      a.targets = false;
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

int run(const Args& args, const std::string& root, const std::vector<std::string>& endpoints) {
  std::atomic<int> calls{0};
  ibcni::http::CurlHttpClient client;
  VfNodeSim node(root + "/node", "bench-node", 1,
                 ibcni::ipam::testing::counting(ibcni::plugin::productionBackends(client), calls));
  if (!node.ok()) {
    std::fprintf(stderr, "fake sysfs: %s\n", node.error().c_str());
    return 2;
  }
  const Configs c = configs(node, endpoints);
  for (int i = 0; i < args.warmup; ++i) {
    if (cycle(node, c.pool) < 0 || cycle(node, c.requested) < 0 || cycle(node, c.floor) < 0) {
      return 1;
    }
  }
  const int warmCalls = calls.exchange(0);
  const std::vector<const json*> order = {&c.pool, &c.requested, &c.floor};
  std::vector<std::vector<double>> samples(order.size());
  for (int i = 0; i < args.samples; ++i) {
    for (std::size_t k = 0; k < order.size(); ++k) {
      const std::size_t which = (k + static_cast<std::size_t>(i)) % order.size();  // each first in turn
      const double took = cycle(node, *order[which]);
      if (took < 0) {
        return 1;
      }
      samples[which].push_back(took);
    }
  }
  const int timedCalls = calls.load();
  const auto pool = ibcni::bench::stats(samples[0]);
  const auto requested = ibcni::bench::stats(samples[1]);
  const auto floor = ibcni::bench::stats(samples[2]);
  const double ratio = pool.median / requested.median;
  std::printf("ADD+DEL in process over the fakes, %d samples each, interleaved (ms: median p95)\n", args.samples);
  std::printf("  guidPool, a GUID of the owned block   %.3f  %.3f\n", pool.median, pool.p95);
  std::printf("  guidPool, requested GUID outside it   %.3f  %.3f\n", requested.median, requested.p95);
  std::printf("  no guidPool (floor)                   %.3f  %.3f\n", floor.median, floor.p95);
  std::printf("  ratio pool / requested %.3f; backend calls: %d during the warm-up, %d during the timed cycles\n",
              ratio, warmCalls, timedCalls);
  const bool ok = ratio <= 1.05 && timedCalls == 0;
  std::printf("%s ADD with a GUID pool and owned blocks: ratio %.3f (target <= 1.05), %d backend calls (target 0)\n",
              ok ? "PASS" : (args.targets ? "FAIL" : "INFO"), ratio, timedCalls);
  return ok || (!args.targets && timedCalls == 0) ? 0 : 1;
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
  ::setenv("TMPDIR", root.c_str(), 1);  // the fake sysfs tree on tmpfs too
  int status = 2;
  ibcni::testing::EtcdCluster etcd;
  if (auto started = etcd.start(1); started) {
    status = run(args, root, etcd.endpoints());
  } else {
    std::fprintf(stderr, "starting etcd: %s\n", started.message());
  }
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  return status;
}
