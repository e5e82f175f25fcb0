// SPDX-License-Identifier: Apache-2.0
// SIGKILL at random moments: the release ibcni is killed during ADD or during DEL (the delay drawn
// uniformly between 0 and the typical duration of that verb, measured first on this machine), then
// the runtime's DEL runs twice. Nothing may be left behind: each run's node is compared with its
// snapshot before the killed verb, and ibcni-ipam's store must pass its own consistency check.
// Each run gets a fresh VF and pod (removed afterwards) so that runs are independent; the leftovers
// seen are grouped (random names normalised) and printed with their counts.
//
// IBCNI_FAULT_SEED=n repeats a sequence of delays; IBCNI_FAULT_KILLS=n changes the number of runs
// per IPAM kind (default 100: 60 during ADD, 40 during DEL).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "faults/fault_world.h"

namespace ibcni::faults {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;

struct KillRun {
  bool killed = false;  ///< false: the plugin had finished before the signal
  int status = -1;
  microseconds took{0};
};

// Runs `binary` as a runtime does (env, config on stdin, output discarded) and sends it SIGKILL
// after `delay` (never when `delay` is nullopt). The child inherits the calling thread's netns.
KillRun runAndKill(const std::string& binary, const std::vector<std::string>& env, const std::string& input,
                   std::optional<microseconds> delay) {
  KillRun out;
  int in[2];
  if (::pipe2(in, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << std::strerror(errno);
    return out;
  }
  // The config fits in the pipe's buffer: written before the child starts.
  if (::write(in[1], input.data(), input.size()) != static_cast<ssize_t>(input.size())) {
    ADD_FAILURE() << "cannot write the config into the pipe";
  }
  ::close(in[1]);
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  std::vector<char*> argv{const_cast<char*>(binary.c_str()), nullptr};
  std::vector<char*> envp;
  for (const auto& e : env) {
    envp.push_back(const_cast<char*>(e.c_str()));
  }
  envp.push_back(nullptr);
  const auto start = Clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::dup2(in[0], STDIN_FILENO) < 0 || ::dup2(devnull, STDOUT_FILENO) < 0 || ::dup2(devnull, STDERR_FILENO) < 0) {
      ::_exit(126);
    }
    ::execve(binary.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(devnull);
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return out;
  }
  if (delay) {
    std::this_thread::sleep_until(start + *delay);
    ::kill(pid, SIGKILL);  // a child that already exited is a zombie until waited for: harmless
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out.took = std::chrono::duration_cast<microseconds>(Clock::now() - start);
  out.killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

// A leftover with its random parts (temporary names, veth names, container IDs, indexes) replaced,
// so that the same kind of leftover from different runs is counted once.
std::string normalise(std::string diff) {
  static const std::vector<std::pair<std::regex, std::string>> rules = {
      {std::regex("ibc[0-9a-f]{8}"), "ibcXXXXXXXX"},    {std::regex("vf[0-9a-f]{6,}"), "VF"},
      {std::regex("pr[0-9a-f]{6,}"), "PEER"},           {std::regex("k-[0-9]+"), "CID"},
      {std::regex("index=[0-9]+"), "index=N"},          {std::regex("10\\.7[79]\\.0\\.[0-9]+"), "10.7x.0.N"},
      {std::regex("fd00:77::[0-9a-f]+"), "fd00:77::N"}, {std::regex("\"createdAt\":\"[^\"]*\""), "\"createdAt\":T"},
  };
  for (const auto& [re, with] : rules) {
    diff = std::regex_replace(diff, re, with);
  }
  return diff;
}

unsigned envOr(const char* name, unsigned fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : fallback;
}

class Sigkill : public ::testing::TestWithParam<IpamKind> {};

TEST_P(Sigkill, DuringAddAndDelThenDelTwiceLeavesNothing) {
  CONFORMANCE_WORLD(w);
  FaultBench b(w, GetParam());
  const std::string& ibcni = conformance::ibcniBinary();
  const unsigned runs = envOr("IBCNI_FAULT_KILLS", 100);
  const unsigned addRuns = runs * 3 / 5;
  const unsigned seed = envOr("IBCNI_FAULT_SEED", std::random_device{}());
  std::mt19937 rng(seed);

  auto envFor = [&](const std::string& command, const std::string& cid, const TestNetns& pod) {
    return World::env(command, cid, pod).toVector();
  };
  auto removeVf = [&](const std::string& vf) {
    // Deleting the peer, which never leaves the host, deletes the VF wherever it is.
    (void)testing::runIp(w.host(), {"link", "del", w.peerOf(vf)});
  };

  // The typical ADD and DEL on this machine, now.
  std::vector<microseconds> adds;
  std::vector<microseconds> dels;
  for (int i = 0; i < 7; ++i) {
    auto pod = b.ownPod("m" + std::to_string(i));
    const std::string vf = b.vf();
    const json conf = b.conf(vf);
    KillRun a = runAndKill(ibcni, envFor("ADD", "m", *pod), conf.dump(), std::nullopt);
    KillRun d = runAndKill(ibcni, envFor("DEL", "m", *pod), conf.dump(), std::nullopt);
    ASSERT_EQ(a.status, 0);
    ASSERT_EQ(d.status, 0);
    adds.push_back(a.took);
    dels.push_back(d.took);
    b.forget(*pod);
    removeVf(vf);
  }
  std::sort(adds.begin(), adds.end());
  std::sort(dels.begin(), dels.end());
  const microseconds typicalAdd = adds[adds.size() / 2];
  const microseconds typicalDel = dels[dels.size() / 2];

  std::map<std::string, int> leftovers;
  std::map<std::string, int> firstRun;
  int killedAdd = 0;
  int killedDel = 0;
  int finished = 0;
  int delFailures = 0;
  for (unsigned i = 0; i < runs; ++i) {
    const bool duringAdd = i < addRuns;
    auto pod = b.ownPod("k" + std::to_string(i));
    const std::string vf = b.vf();
    const json conf = b.conf(vf);
    const std::string cid = "k-" + std::to_string(i);
    const std::string clean = b.snapshot();
    if (!duringAdd) {
      Exec add = b.run(ibcni, "ADD", cid, *pod, conf);
      ASSERT_EQ(add.status, 0) << add.describe();
    }
    const microseconds typical = duringAdd ? typicalAdd : typicalDel;
    const microseconds delay(std::uniform_int_distribution<long>(0, typical.count())(rng));
    KillRun k = runAndKill(ibcni, envFor(duringAdd ? "ADD" : "DEL", cid, *pod), conf.dump(), delay);
    if (k.killed) {
      ++(duringAdd ? killedAdd : killedDel);
    } else {
      ++finished;
    }
    Exec del1 = b.run(ibcni, "DEL", cid, *pod, conf);
    Exec del2 = b.run(ibcni, "DEL", cid, *pod, conf);
    if (del1.status != 0 || del2.status != 0) {
      ++delFailures;
      ADD_FAILURE() << "run " << i << " (" << (duringAdd ? "ADD" : "DEL") << " killed after " << delay.count()
                    << " us): the runtime's DELs must succeed\n"
                    << del1.describe() << "\n"
                    << del2.describe();
    }
    const std::string diff = lineDiff(clean, b.snapshot());
    if (!diff.empty()) {
      const std::string key = std::string(duringAdd ? "ADD" : "DEL") + " killed, then DEL, DEL:\n" + normalise(diff);
      if (leftovers[key]++ == 0) {
        firstRun[key] = static_cast<int>(i);
      }
    }
    EXPECT_EQ(b.storeProblems(), std::vector<std::string>{}) << "run " << i;
    b.forget(*pod);
    removeVf(vf);
  }

  // The store still works: a full cycle on a fresh VF.
  {
    auto pod = b.ownPod("final");
    const std::string vf = b.vf();
    const json conf = b.conf(vf);
    const std::string clean = b.snapshot();
    EXPECT_EQ(b.run(ibcni, "ADD", "final", *pod, conf).status, 0);
    EXPECT_EQ(b.run(ibcni, "DEL", "final", *pod, conf).status, 0);
    EXPECT_EQ(lineDiff(clean, b.snapshot()), "");
    EXPECT_EQ(b.storeProblems(), std::vector<std::string>{});
    b.forget(*pod);
    removeVf(vf);
  }

  std::cout << toString(GetParam()) << ": seed " << seed << ", typical ADD " << typicalAdd.count() << " us, DEL "
            << typicalDel.count() << " us; " << runs << " runs: " << killedAdd << " killed during ADD, " << killedDel
            << " during DEL, " << finished << " finished before the signal; " << delFailures << " with a failing DEL\n";
  int dirty = 0;
  for (const auto& [what, n] : leftovers) {
    dirty += n;
    std::cout << "LEFTOVER x" << n << " (first in run " << firstRun[what] << ") " << what;
  }
  EXPECT_EQ(dirty, 0) << dirty << " of " << runs << " runs left something behind (LEFTOVER lines above)";
}

INSTANTIATE_TEST_SUITE_P(Sriov, Sigkill, ::testing::Values(IpamKind::kIbcniIpam, IpamKind::kHostLocal),
                         [](const auto& p) { return p.param == IpamKind::kIbcniIpam ? "IbcniIpam" : "HostLocal"; });

}  // namespace
}  // namespace ibcni::faults
