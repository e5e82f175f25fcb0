// SPDX-License-Identifier: Apache-2.0
// ibcni-ipam against Debian's host-local, side by side in one run, both executed as a runtime
// executes an IPAM plugin (fork, exec, config on stdin). Prints the figures of docs/benchmarks.md's table:
//   - median ADD on a /16 at 0% and at 99% full (the 99% pool is filled at random, so free
//     addresses are scattered, as after churn)
//   - median ADD+DEL on an empty pool
//   - 200 concurrent ADDs against one network: wall time, all succeeded, no duplicate
//   - peak RSS of one ADD
//   - ADD+DEL beyond the floor: each plugin's ADD+DEL less two execs of a bare static program
//     (bare_exec.cpp), the three run in turn sample by sample so that drift hits all alike
//   ipam_bench IBCNI_IPAM HOST_LOCAL BARE_EXEC [SAMPLES]
#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "bench_stats.h"
#include "ipam/embedded_ipam.h"
#include "ibcni/config/net_conf.h"
#include "plugin/invocation.h"
#include "support/exec_program.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

using ibcni::bench::ms;
using ibcni::testing::ProgramRun;

// fork + exec `bin` as a runtime execs an IPAM plugin: exactly `env`, `input` on stdin, stdout and
// stderr collected, the child's peak RSS (tests/support/exec_program.h).
ProgramRun execPlugin(const std::string& bin, const std::vector<std::string>& env, const std::string& input) {
  return ibcni::testing::runProgram(bin, env, input);
}

// Exits 1 after printing `what`, the plugin's stdout and its stderr.
[[noreturn]] void failed(const std::string& what, const ProgramRun& r) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), r.out.c_str());
  if (!r.err.empty()) {
    std::fprintf(stderr, "%s\n", r.err.c_str());
  }
  std::exit(1);
}

std::vector<std::string> envFor(const char* verb, const std::string& cid) {
  return {"PATH=/usr/bin:/bin",         std::string("CNI_COMMAND=") + verb, "CNI_CONTAINERID=" + cid,
          "CNI_NETNS=/proc/self/ns/net", "CNI_IFNAME=eth0",                   "CNI_PATH=/usr/lib/cni"};
}

std::string config(const std::string& type, const std::string& name, const std::string& subnet, const std::string& dir) {
  json range = json::object();
  range["subnet"] = subnet;
  json ipam = json::object();
  ipam["type"] = type;
  ipam["ranges"] = json::array({json::array({range})});
  ipam["dataDir"] = dir;
  json c = json::object();
  c["cniVersion"] = "1.0.0";
  c["name"] = name;
  c["type"] = "macvlan";
  c["ipam"] = ipam;
  return c.dump();
}

// The sample at index n/2, as this bench has always reported its medians (bench_stats.h).
double medianMs(const std::vector<double>& v) { return ibcni::bench::stats(v).upperMedian; }

std::string ip4(std::uint32_t host) {
  in_addr a{htonl(host)};
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

// 99% of 10.<x>.0.0/16's usable addresses, in random order (the gateway .0.1 is left out).
std::vector<std::uint32_t> fillSet(std::uint32_t base, double fraction, std::mt19937& rng) {
  std::vector<std::uint32_t> all;
  for (std::uint32_t h = 2; h < 65535; ++h) {
    all.push_back(base + h);
  }
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<std::size_t>(static_cast<double>(all.size()) * fraction));
  return all;
}

// host-local's on-disk format: one file per IP holding "containerID\r\nifname", plus the cursor.
void prefillHostLocal(const std::string& dir, const std::string& name, const std::vector<std::uint32_t>& ips) {
  fs::create_directories(dir + "/" + name);
  for (auto h : ips) {
    std::ofstream(dir + "/" + name + "/" + ip4(h)) << "fill-" << h << "\r\neth0";
  }
  std::ofstream(dir + "/" + name + "/last_reserved_ip.0") << ip4(ips[ips.size() / 2]);
}

// ibcni-ipam's store is filled through the library itself, asking for each address.
void prefillIbcni(const std::string& dir, const std::string& name, const std::string& subnet,
                  const std::vector<std::uint32_t>& ips) {
  ibcni::ipam::EmbeddedIpam ipam;
  json base = json::parse(config("ibcni-ipam", name, subnet, dir));
  for (auto h : ips) {
    base["runtimeConfig"] = {{"ips", {ip4(h)}}};
    auto conf = ibcni::config::parseNetConf(base.dump(), ibcni::cni::Command::kAdd, ibcni::config::Role::kIpamPlugin);
    ibcni::cni::CmdArgs args;
    args.containerId = "fill-" + std::to_string(h);
    args.ifName = "eth0";
    args.netns = "/proc/self/ns/net";
    const ibcni::cni::CniArgs cniArgs;
    if (!conf || !ipam.add(ibcni::plugin::ipamRequest(*conf, args, cniArgs))) {
      std::fprintf(stderr, "prefill of %s failed\n", ip4(h).c_str());
      std::exit(2);
    }
  }
}

struct Figures {
  double add0 = 0;
  double add99 = 0;
  double addDel = 0;
  double concurrentMs = 0;
  int concurrentOk = 0;
  int concurrentUnique = 0;
  long rssKiB = 0;
};

Figures measure(const std::string& label, const std::string& bin, const std::string& type, const std::string& root,
                int samples, std::uint32_t net99, const std::vector<std::uint32_t>& fill) {
  Figures f;
  const std::string dir = root + "/" + label;
  fs::create_directories(dir);
  // ADD+DEL and ADD on an empty /16.
  const std::string empty = config(type, "empty", "10.1.0.0/16", dir);
  std::vector<double> addDel;
  std::vector<double> add0;
  for (int i = 0; i < samples; ++i) {
    std::string cid = "c" + std::to_string(i);
    auto t0 = Clock::now();
    auto a = execPlugin(bin, envFor("ADD", cid), empty);
    auto t1 = Clock::now();
    auto d = execPlugin(bin, envFor("DEL", cid), empty);
    auto t2 = Clock::now();
    if (a.status != 0 || d.status != 0) {
      failed(label + ": ADD/DEL failed", a);
    }
    add0.push_back(ms(t1 - t0));
    addDel.push_back(ms(t2 - t0));
    f.rssKiB = std::max(f.rssKiB, a.maxRssKiB);
  }
  f.add0 = medianMs(add0);
  f.addDel = medianMs(addDel);

  // ADD at 99% full: each sample is ADD then DEL, so the fill stays at 99%.
  const std::string name99 = "full" + std::to_string(net99 >> 16 & 0xff);
  const std::string subnet99 = ip4(net99) + "/16";
  if (type == "host-local") {
    prefillHostLocal(dir, name99, fill);
  } else {
    prefillIbcni(dir, name99, subnet99, fill);
  }
  const std::string full = config(type, name99, subnet99, dir);
  std::vector<double> add99;
  for (int i = 0; i < samples; ++i) {
    std::string cid = "f" + std::to_string(i);
    auto t0 = Clock::now();
    auto a = execPlugin(bin, envFor("ADD", cid), full);
    add99.push_back(ms(Clock::now() - t0));
    if (a.status != 0) {
      failed(label + ": ADD at 99% failed", a);
    }
    (void)execPlugin(bin, envFor("DEL", cid), full);
  }
  f.add99 = medianMs(add99);

  // 200 concurrent ADDs against one network.
  const std::string many = config(type, "many", "10.2.0.0/16", dir);
  auto t0 = Clock::now();
  std::vector<pid_t> kids;
  std::string outDir = dir + "/concurrent";
  fs::create_directories(outDir);
  for (int i = 0; i < 200; ++i) {
    pid_t pid = ::fork();
    if (pid == 0) {
      auto r = execPlugin(bin, envFor("ADD", "p" + std::to_string(i)), many);
      std::ofstream(outDir + "/" + std::to_string(i)) << r.out;
      ::_exit(r.status);
    }
    kids.push_back(pid);
  }
  for (auto pid : kids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    f.concurrentOk += (WIFEXITED(status) && WEXITSTATUS(status) == 0) ? 1 : 0;
  }
  f.concurrentMs = ms(Clock::now() - t0);
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    std::ifstream in(outDir + "/" + std::to_string(i));
    json r = json::parse(in, nullptr, false);
    if (!r.is_discarded() && r.contains("ips")) {
      seen.insert(r["ips"][0]["address"].get<std::string>());
    }
  }
  f.concurrentUnique = static_cast<int>(seen.size());
  return f;
}

// Median ADD+DEL of each plugin and of the floor (two execs of `bare`), run in turn sample by
// sample on an empty pool of each plugin's own.
struct BeyondFloor {
  double floor = 0;
  double ours = 0;
  double hostLocal = 0;
};

BeyondFloor beyondFloor(const std::string& ours, const std::string& hostLocal, const std::string& bare,
                        const std::string& root, int samples) {
  const std::string ourConf = config("ibcni-ipam", "turn", "10.5.0.0/16", root + "/turn-ibcni-ipam");
  const std::string theirConf = config("host-local", "turn", "10.5.0.0/16", root + "/turn-host-local");
  auto addDel = [](const std::string& bin, const std::string& conf, const std::string& cid) {
    auto t0 = Clock::now();
    auto a = execPlugin(bin, envFor("ADD", cid), conf);
    auto d = execPlugin(bin, envFor("DEL", cid), conf);
    if (a.status != 0 || d.status != 0) {
      failed(bin + ": ADD/DEL failed", a.status != 0 ? a : d);
    }
    return ms(Clock::now() - t0);
  };
  std::vector<double> floor;
  std::vector<double> o;
  std::vector<double> h;
  for (int i = 0; i < samples; ++i) {
    const std::string cid = "t" + std::to_string(i);
    floor.push_back(addDel(bare, ourConf, cid));
    o.push_back(addDel(ours, ourConf, cid));
    h.push_back(addDel(hostLocal, theirConf, cid));
  }
  return {medianMs(floor), medianMs(o), medianMs(h)};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s IBCNI_IPAM HOST_LOCAL BARE_EXEC [SAMPLES]\n", argv[0]);
    return 2;
  }
  const std::string ours = argv[1];
  const std::string hostLocal = argv[2];
  const std::string bare = argv[3];
  const int samples = argc > 4 ? std::atoi(argv[4]) : 101;
  // tmpfs for both, as ibcni-ipam's default (/run) is: the comparison is of the plugins, not disks.
  char tmpl[] = "/dev/shm/ibcni-ipam-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 2;
  }
  const std::string root = tmpl;
  std::mt19937 rng(42);
  const std::uint32_t net99 = (10u << 24) | (3u << 16);
  auto fill = fillSet(net99, 0.99, rng);

  auto h = measure("host-local", hostLocal, "host-local", root, samples, net99, fill);
  auto o = measure("ibcni-ipam", ours, "ibcni-ipam", root, samples, net99, fill);
  const auto b = beyondFloor(ours, hostLocal, bare, root, samples);
  fs::remove_all(root);
  const double oursBeyond = b.ours - b.floor;
  const double theirsBeyond = b.hostLocal - b.floor;

  std::printf("| figure (medians of %d samples, /16 pools on tmpfs) | ibcni-ipam | host-local | ratio |\n", samples);
  std::printf("|---|---|---|---|\n");
  std::printf("| ADD, pool 0%% full | %.2f ms | %.2f ms | %.1fx |\n", o.add0, h.add0, h.add0 / o.add0);
  std::printf("| ADD, pool 99%% full (random fill) | %.2f ms | %.2f ms | %.1fx |\n", o.add99, h.add99, h.add99 / o.add99);
  std::printf("| ADD at 99%% / ADD at 0%% | %.2f | %.2f | |\n", o.add99 / o.add0, h.add99 / h.add0);
  std::printf("| ADD+DEL | %.2f ms | %.2f ms | %.1fx |\n", o.addDel, h.addDel, h.addDel / o.addDel);
  std::printf("| 200 concurrent ADDs, wall | %.0f ms (%d ok, %d distinct) | %.0f ms (%d ok, %d distinct) | %.1fx |\n",
              o.concurrentMs, o.concurrentOk, o.concurrentUnique, h.concurrentMs, h.concurrentOk, h.concurrentUnique,
              h.concurrentMs / o.concurrentMs);
  std::printf("| ADD+DEL, run in turn with the floor | %.2f ms | %.2f ms | %.1fx |\n", b.ours, b.hostLocal,
              b.hostLocal / b.ours);
  std::printf("| floor: two execs of a bare static program | %.2f ms | %.2f ms | |\n", b.floor, b.floor);
  std::printf("| ADD+DEL beyond the floor | %.2f ms | %.2f ms | %.1fx |\n", oursBeyond, theirsBeyond,
              theirsBeyond / oursBeyond);
  std::printf("| peak RSS of one ADD | %.1f MiB | %.1f MiB | |\n", static_cast<double>(o.rssKiB) / 1024.0,
              static_cast<double>(h.rssKiB) / 1024.0);

  bool ok = true;
  auto require = [&](bool cond, const char* what) {
    std::printf("%s %s\n", cond ? "PASS" : "FAIL", what);
    ok = ok && cond;
  };
  require(o.add99 <= 2.0 * o.add0, "ibcni-ipam: median ADD at 99% full within 2x of 0% full");
  // A figure at or under the floor is noise, not speed: it fails rather than passes.
  require(oursBeyond > 0 && theirsBeyond >= 4.0 * oursBeyond,
          "ibcni-ipam ADD+DEL beyond two bare execs at least 4x less than host-local's");
  require(o.concurrentOk == 200 && o.concurrentUnique == 200, "ibcni-ipam: 200 concurrent ADDs, all distinct");
  require(o.rssKiB < 8 * 1024, "ibcni-ipam: peak RSS of one ADD under 8 MiB");
  return ok ? 0 : 1;
}
