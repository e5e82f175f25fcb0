// SPDX-License-Identifier: Apache-2.0
// cni_bench's concurrent part: 100 pods at once on one IPAM network, 100 veth "VFs" in 4 groups
// of 25 (4 "PFs"), each ADD moving its own VF into its own netns, all released together through a
// gate; then 100 concurrent DELs, and every VF must be back.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

#include "cni_bench.h"

namespace ibcni::bench {

namespace {

int stdinPipe(const std::string& input) {
  int in[2];
  if (::pipe2(in, O_CLOEXEC) != 0) {
    fatal("pipe: " + std::string(std::strerror(errno)));
  }
  if (input.size() > 60000) {
    fatal("input larger than a pipe");
  }
  if (!input.empty() && ::write(in[1], input.data(), input.size()) != static_cast<ssize_t>(input.size())) {
    fatal("write to pipe");
  }
  ::close(in[1]);
  return in[0];
}

/// The IPv4 address (without prefix) of `ifName` inside `ns`; empty if none.
std::string addressInNetns(const TestNetns& ns, const std::string& ifName) {
  auto found = ns.run([&] {
    std::string address;
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) == 0) {
      for (auto* a = list; a != nullptr; a = a->ifa_next) {
        if (a->ifa_addr != nullptr && a->ifa_addr->sa_family == AF_INET && ifName == a->ifa_name &&
            (a->ifa_flags & IFF_UP) != 0) {
          char buf[INET_ADDRSTRLEN];
          ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
          address = buf;
        }
      }
      ::freeifaddrs(list);
    }
    return address;
  });
  return found ? *found : std::string();
}

struct Child {
  pid_t pid = -1;
  int out = -1;
  int err = -1;
  Clock::time_point t1;
  int status = -1;
};

int memfd() {
  const int fd = ::memfd_create("cni-bench", MFD_CLOEXEC);
  if (fd < 0) {
    fatal("memfd_create");
  }
  return fd;
}

std::string readMemfd(int fd) {
  ::lseek(fd, 0, SEEK_SET);
  return ibcni::testing::readToEnd(fd);
}

struct Wave {
  std::vector<double> latency;  // release -> each child's exit
  double wall = 0;              // release -> last exit
  std::vector<std::string> out;
  std::vector<std::string> err;
  std::vector<int> status;
};

/// Forks one child per job, each waiting on a gate before its execve; opens the gate, and reaps.
Wave wave(const std::vector<std::vector<std::string>>& argvs, const std::vector<std::vector<std::string>>& envs,
          const std::vector<std::string>& inputs) {
  int gate[2];
  if (::pipe2(gate, O_CLOEXEC) != 0) {
    fatal("pipe");
  }
  const std::size_t n = argvs.size();
  std::vector<Child> kids(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int in = stdinPipe(inputs[i]);
    kids[i].out = memfd();
    kids[i].err = memfd();
    auto a = cstrings(argvs[i]);
    auto e = cstrings(envs[i]);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(gate[1]);
      char c;
      while (::read(gate[0], &c, 1) < 0 && errno == EINTR) {
      }
      ::dup2(in, 0);
      ::dup2(kids[i].out, 1);
      ::dup2(kids[i].err, 2);
      ::execve(a[0], a.data(), e.data());
      ::_exit(127);
    }
    if (pid < 0) {
      fatal("fork");
    }
    ::close(in);
    kids[i].pid = pid;
  }
  const Clock::time_point release = Clock::now();
  ::close(gate[1]);
  std::map<pid_t, std::size_t> byPid;
  for (std::size_t i = 0; i < n; ++i) {
    byPid[kids[i].pid] = i;
  }
  for (std::size_t left = n; left > 0;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) {
        continue;
      }
      fatal("waitpid");
    }
    auto it = byPid.find(pid);
    if (it == byPid.end()) {
      continue;
    }
    kids[it->second].t1 = Clock::now();
    kids[it->second].status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    --left;
  }
  ::close(gate[0]);
  Wave w;
  for (auto& k : kids) {
    w.latency.push_back(ms(k.t1 - release));
    w.wall = std::max(w.wall, ms(k.t1 - release));
    w.out.push_back(readMemfd(k.out));
    w.err.push_back(readMemfd(k.err));
    w.status.push_back(k.status);
    ::close(k.out);
    ::close(k.err);
  }
  return w;
}

struct RoundResult {
  double addWall = 0;
  double delWall = 0;
  std::vector<double> addLatency;
  std::vector<double> delLatency;
  int addOk = 0;
  int distinct = 0;
  int verified = 0;
  int delOk = 0;
  int back = 0;
  std::string firstError;
};

std::string vfName(int pod, int groups) {
  return "bpf" + std::to_string(pod % groups) + "v" + std::to_string(pod / groups);
}

RoundResult concurrentRound(const Paths& p, const Options& o, Kind kind, int round) {
  const int n = o.pods;
  std::vector<TestNetns> netns;
  std::vector<std::vector<std::string>> argvs;
  std::vector<std::vector<std::string>> addEnvs;
  std::vector<std::vector<std::string>> delEnvs;
  std::vector<std::string> inputs;
  for (int i = 0; i < n; ++i) {
    netns.push_back(makeNetns("pod-" + std::to_string(round) + "-" + std::to_string(i)));
    const std::string cid =
        "pod-" + std::to_string(static_cast<int>(kind)) + "-" + std::to_string(round) + "-" + std::to_string(i);
    argvs.push_back({binaryFor(kind, p)});
    addEnvs.push_back(cniEnv("ADD", cid, netns.back().path(), kIfName, p));
    delEnvs.push_back(cniEnv("DEL", cid, netns.back().path(), kIfName, p));
    inputs.push_back(pluginConfig(kind, p, "benchpods", "10.30", vfName(i, o.groups)).dump());
  }
  RoundResult r;
  Wave add = wave(argvs, addEnvs, inputs);
  r.addWall = add.wall;
  r.addLatency = add.latency;
  std::set<std::string> seen;
  for (int i = 0; i < n; ++i) {
    const auto idx = static_cast<std::size_t>(i);
    const std::string a = add.status[idx] == 0 ? firstAddress(add.out[idx]) : "";
    if (add.status[idx] != 0 || a.empty()) {
      if (r.firstError.empty()) {
        r.firstError = "ADD " + vfName(i, o.groups) + ": exit " + std::to_string(add.status[idx]) + " " + add.out[idx] +
                       " " + add.err[idx].substr(0, 500);
      }
      continue;
    }
    ++r.addOk;
    seen.insert(a);
    if (addressInNetns(netns[idx], kIfName) == a && !linkInHost(vfName(i, o.groups))) {
      ++r.verified;
    }
  }
  r.distinct = static_cast<int>(seen.size());
  Wave del = wave(argvs, delEnvs, inputs);
  r.delWall = del.wall;
  r.delLatency = del.latency;
  for (int i = 0; i < n; ++i) {
    const auto idx = static_cast<std::size_t>(i);
    r.delOk += del.status[idx] == 0 ? 1 : 0;
    r.back += linkInHost(vfName(i, o.groups)) ? 1 : 0;
    if (del.status[idx] != 0 && r.firstError.empty()) {
      r.firstError = "DEL " + vfName(i, o.groups) + ": exit " + std::to_string(del.status[idx]) + " " + del.out[idx] +
                     " " + del.err[idx].substr(0, 500);
    }
  }
  netns.clear();
  return r;
}

}  // namespace

bool concurrentPart(const Paths& p, const Options& o) {
  std::printf(
      "\n## %d concurrent ADDs, then %d concurrent DELs (%d VFs in %d groups, one IPAM network, %d rounds "
      "each, interleaved)\n\n",
      o.pods, o.pods, o.pods, o.groups, o.rounds);
  std::string batch;
  for (int i = 0; i < o.pods; ++i) {
    batch += "link add " + vfName(i, o.groups) + " type veth peer name " + vfName(i, o.groups) + "p\n";
  }
  const std::string batchFile = p.disk + "/veths.batch";
  std::ofstream(batchFile) << batch;
  sh("ip -batch " + batchFile);
  std::vector<std::vector<RoundResult>> results(kContenders.size());
  for (int r = 0; r < o.rounds; ++r) {
    for (std::size_t k = 0; k < kContenders.size(); ++k) {
      const std::size_t c = (k + static_cast<std::size_t>(r)) % kContenders.size();
      results[c].push_back(concurrentRound(p, o, kContenders[c].kind, r));
    }
  }
  printContenderHeader(std::to_string(o.pods) + " pods at once");
  std::vector<Stats> addWall;
  std::vector<Stats> delWall;
  std::vector<Stats> addLat;
  std::vector<Stats> delLat;
  std::vector<RoundResult> worst(kContenders.size());
  for (std::size_t c = 0; c < kContenders.size(); ++c) {
    std::vector<double> aw;
    std::vector<double> dw;
    std::vector<double> al;
    std::vector<double> dl;
    worst[c].addOk = worst[c].distinct = worst[c].verified = worst[c].delOk = worst[c].back = o.pods;
    for (const auto& r : results[c]) {
      aw.push_back(r.addWall);
      dw.push_back(r.delWall);
      al.insert(al.end(), r.addLatency.begin(), r.addLatency.end());
      dl.insert(dl.end(), r.delLatency.begin(), r.delLatency.end());
      worst[c].addOk = std::min(worst[c].addOk, r.addOk);
      worst[c].distinct = std::min(worst[c].distinct, r.distinct);
      worst[c].verified = std::min(worst[c].verified, r.verified);
      worst[c].delOk = std::min(worst[c].delOk, r.delOk);
      worst[c].back = std::min(worst[c].back, r.back);
      if (worst[c].firstError.empty()) {
        worst[c].firstError = r.firstError;
      }
    }
    addWall.push_back(stats(aw));
    delWall.push_back(stats(dw));
    addLat.push_back(stats(al));
    delLat.push_back(stats(dl));
  }
  printContenderRow("ADD wall (median of rounds)", addWall, &Stats::median);
  printContenderRow("ADD wall (worst round)", addWall, &Stats::max);
  std::printf("| ADD wall / %d pods (median round) | %s | %s | %s | |\n", o.pods,
              fmtMs(addWall[0].median / o.pods).c_str(), fmtMs(addWall[1].median / o.pods).c_str(),
              fmtMs(addWall[2].median / o.pods).c_str());
  printContenderRow("per-ADD latency median", addLat, &Stats::median);
  printContenderRow("per-ADD latency p99", addLat, &Stats::p99);
  printContenderRow("DEL wall (median of rounds)", delWall, &Stats::median);
  printContenderRow("per-DEL latency p99", delLat, &Stats::p99);
  std::printf("| ADD ok / distinct / checked in the pod (worst round) |");
  for (const auto& w : worst) {
    std::printf(" %d / %d / %d |", w.addOk, w.distinct, w.verified);
  }
  std::printf(" |\n| DEL ok / VF back in the host (worst round) |");
  for (const auto& w : worst) {
    std::printf(" %d / %d |", w.delOk, w.back);
  }
  std::printf(" |\n");
  for (std::size_t c = 0; c < kContenders.size(); ++c) {
    if (!worst[c].firstError.empty()) {
      std::printf("\n%s, first failure: %s\n", kContenders[c].label.c_str(), worst[c].firstError.c_str());
    }
  }
  const auto& w = worst[0];
  verdict(w.addOk == o.pods && w.distinct == o.pods && w.verified == o.pods && w.delOk == o.pods && w.back == o.pods,
          "concurrent: ibcni, " + std::to_string(o.pods) +
              " ADDs at once all succeed with distinct addresses (checked in each pod), all DELs succeed and every "
              "VF is back");
  return true;
}

}  // namespace ibcni::bench
