// SPDX-License-Identifier: Apache-2.0
// Concurrency: ADD/DEL storms over shared VFs and one ibcni-ipam network, and the bounded waits on
// a device lock and on the IPAM network's lock held by someone else.
//
// Storm: 4 veth ends as VFs, 6 pods, 8 workers each running the release ibcni for random
// (pod, VF) pairs (ifname net<VF>), ADD or DEL, for ~20 s in rounds. After each round, with every
// worker paused, the node must be consistent: each VF in exactly one place (the host, or one pod
// under its ifname with ibcni's alias), no temporary link name, no address held twice, records ==
// attachments seen in the pods == ibcni-ipam's allocations, the store passes its own check, no lock
// held. Every invocation must return before the 30 s lock timeout (no deadlock) with an expected
// answer. At the end, DEL of every pair must leave the node as it was before the storm.
//
// Bounded wait: with the device lock file flock()ed by the test, ADD must answer 11 ("try again
// later") after the device lock timeout; with the IPAM network's lock held, ADD must answer 11
// after the IPAM lock timeout and roll the device back. Both timeouts are 30 s in code
// (plugin/cli/production_deps.cpp, ipam EmbeddedIpamOptions) with no configuration key; both waits run
// at once, so the test takes ~30 s.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "faults/fault_world.h"

namespace ibcni::faults {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr auto kLockTimeout = std::chrono::seconds(30);

std::string ifNameOf(std::size_t vf) { return "net" + std::to_string(vf); }

// Every link of `ns` as `ip -j -d addr show` reports it.
json links(const os::Netns& ns) {
  auto text = testing::runIp(ns, {"-j", "-d", "addr", "show"});
  json j = text ? json::parse(*text, nullptr, false) : json::array();
  return j.is_array() ? j : json::array();
}

// The node's consistency at a quiet moment; returns the problems found.
std::vector<std::string> consistency(const FaultBench& b, World& w, const std::vector<TestNetns*>& pods,
                                     const std::vector<std::string>& vfs) {
  std::vector<std::string> problems;
  std::map<std::string, int> places;                          // VF -> how many places hold it
  std::set<std::pair<std::string, std::string>> attachments;  // (container, ifname) seen in pods
  std::map<std::string, std::string> addressHolder;
  for (const auto& l : links(w.host())) {
    const std::string name = l.value("ifname", "");
    if (std::find(vfs.begin(), vfs.end(), name) != vfs.end()) {
      ++places[name];
    }
  }
  for (std::size_t p = 0; p < pods.size(); ++p) {
    const std::string cid = "storm-c" + std::to_string(p);
    for (const auto& l : links(pods[p]->netns())) {
      const std::string name = l.value("ifname", "");
      if (name == "lo") {
        continue;
      }
      const std::string alias = l.value("ifalias", "");
      const std::string vf = alias.starts_with("ibcni:") ? alias.substr(6) : "";
      const auto it = std::find(vfs.begin(), vfs.end(), vf);
      if (it == vfs.end() || name != ifNameOf(static_cast<std::size_t>(it - vfs.begin()))) {
        problems.push_back("pod " + cid + " has " + name + " (alias \"" + alias + "\"), not an attachment");
        continue;
      }
      ++places[vf];
      attachments.insert({cid, name});
      for (const auto& a : l.value("addr_info", json::array())) {
        const std::string addr = a.value("local", "");
        if (auto [at, fresh] = addressHolder.emplace(addr, cid + "/" + name); !fresh) {
          problems.push_back("address " + addr + " held by " + at->second + " and " + cid + "/" + name);
        }
      }
      if (l.value("addr_info", json::array()).size() != 2) {
        problems.push_back(cid + "/" + name + " has " + l.value("addr_info", json::array()).dump() +
                           ", expected one IPv4 and one IPv6 address");
      }
    }
  }
  for (const auto& vf : vfs) {
    if (places[vf] != 1) {
      problems.push_back("VF " + vf + " is in " + std::to_string(places[vf]) + " places");
    }
  }
  for (const auto& t : b.temporaryLinkNames()) {
    problems.push_back("temporary link " + t);
  }
  std::set<std::pair<std::string, std::string>> recorded;
  for (const auto& r : w.records()) {
    recorded.insert({r.parent_path().filename().string(), r.stem().string()});
  }
  if (recorded != attachments) {
    problems.push_back("ibcni's records (" + std::to_string(recorded.size()) +
                       ") differ from the attachments in the pods (" + std::to_string(attachments.size()) + ")");
  }
  std::set<std::pair<std::string, std::string>> allocated;
  for (const auto& a : w.allocations()) {
    const auto colon = a.rfind(':');
    allocated.insert({a.substr(0, colon), a.substr(colon + 1)});
  }
  if (allocated != attachments) {
    problems.push_back("ibcni-ipam's allocations (" + std::to_string(allocated.size()) +
                       ") differ from the attachments in the pods (" + std::to_string(attachments.size()) + ")");
  }
  for (const auto& p : b.storeProblems()) {
    problems.push_back("store: " + p);
  }
  const std::string snap = b.snapshot();
  if (snap.find(" HELD") != std::string::npos) {
    problems.push_back("a lock is held at a quiet moment:\n" + snap);
  }
  return problems;
}

TEST(Storm, ConcurrentAddDelOnSharedVfsStaysConsistentAndEndsClean) {
  CONFORMANCE_WORLD(w);
  FaultBench b(w, IpamKind::kIbcniIpam);
  constexpr std::size_t kVfs = 4;
  constexpr std::size_t kPods = 6;
  constexpr std::size_t kWorkers = 8;
  constexpr int kRounds = 10;
  constexpr milliseconds kRound(2000);
  std::vector<std::string> vfs;
  std::vector<json> confs;
  for (std::size_t i = 0; i < kVfs; ++i) {
    vfs.push_back(b.vf());
    confs.push_back(b.conf(vfs.back()));
  }
  std::vector<TestNetns*> pods;
  for (std::size_t i = 0; i < kPods; ++i) {
    pods.push_back(&b.pod("storm" + std::to_string(i)));
  }
  const std::string& ibcni = conformance::ibcniBinary();
  // One ADD and DEL first, so that the store and the state directory exist as on a node in use.
  ASSERT_EQ(b.run(ibcni, "ADD", "warm", *pods[0], confs[0]).status, 0);
  ASSERT_EQ(b.run(ibcni, "DEL", "warm", *pods[0], confs[0]).status, 0);
  const std::string clean = b.snapshot();

  std::mutex mu;
  std::map<std::string, int> answers;  // "ADD 0", "ADD 101", ...
  std::vector<std::string> unexpected;
  milliseconds slowest{0};
  int invocations = 0;
  std::atomic<bool> stop{false};
  std::barrier roundEnd(static_cast<std::ptrdiff_t>(kWorkers + 1));
  std::barrier roundStart(static_cast<std::ptrdiff_t>(kWorkers + 1));

  auto worker = [&](unsigned id) {
    auto scope = testing::ScopedHostNetns::enter(w.host());
    std::mt19937 rng(id * 7919U + 17U);
    for (;;) {
      roundStart.arrive_and_wait();
      if (stop) {
        return;
      }
      const auto until = Clock::now() + kRound;
      while (scope && Clock::now() < until) {
        const std::size_t vf = rng() % kVfs;
        const std::size_t pod = rng() % kPods;
        const std::string verb = rng() % 2 == 0 ? "ADD" : "DEL";
        const auto start = Clock::now();
        CniEnv env = World::env(verb, "storm-c" + std::to_string(pod), *pods[pod], ifNameOf(vf));
        Exec run = conformance::execProgram(ibcni, env.toVector(), confs[vf].dump(), std::chrono::seconds(60));
        const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
        const unsigned code = run.status == 0 ? 0 : run.code();
        const bool expected =
            verb == "DEL" ? run.status == 0 : (run.status == 0 || code == 100 || code == 101 || code == 103);
        std::lock_guard g(mu);
        ++invocations;
        ++answers[verb + " " + (run.status == 0 ? "ok" : std::to_string(code))];
        slowest = std::max(slowest, took);
        if (!expected || took >= kLockTimeout) {
          unexpected.push_back(verb + " storm-c" + std::to_string(pod) + "/" + ifNameOf(vf) + " took " +
                               std::to_string(took.count()) + " ms: " + run.describe());
        }
      }
      roundEnd.arrive_and_wait();
    }
  };
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < kWorkers; ++i) {
    threads.emplace_back(worker, i);
  }
  std::vector<std::string> problems;
  const auto stormStart = Clock::now();
  for (int round = 0; round < kRounds; ++round) {
    roundStart.arrive_and_wait();
    roundEnd.arrive_and_wait();
    for (const auto& p : consistency(b, w, pods, vfs)) {
      problems.push_back("after round " + std::to_string(round + 1) + ": " + p);
    }
    if (!problems.empty()) {
      break;
    }
  }
  const auto stormTook = std::chrono::duration_cast<milliseconds>(Clock::now() - stormStart);
  stop = true;
  roundStart.arrive_and_wait();
  for (auto& t : threads) {
    t.join();
  }

  for (std::size_t p = 0; p < kPods; ++p) {
    for (std::size_t vf = 0; vf < kVfs; ++vf) {
      Exec del = b.run(ibcni, "DEL", "storm-c" + std::to_string(p), *pods[p], confs[vf], {}, ifNameOf(vf));
      EXPECT_EQ(del.status, 0) << del.describe();
    }
  }
  EXPECT_EQ(lineDiff(clean, b.snapshot()), "") << "after DEL of every pair (- before the storm, + now)";

  std::cout << "storm: " << invocations << " invocations by " << kWorkers << " workers in " << stormTook.count()
            << " ms (" << kRounds << " rounds, checked between rounds); slowest " << slowest.count() << " ms;";
  for (const auto& [what, n] : answers) {
    std::cout << " " << what << " x" << n << ";";
  }
  std::cout << "\n";
  EXPECT_EQ(problems, std::vector<std::string>{});
  EXPECT_EQ(unexpected, std::vector<std::string>{});
  EXPECT_GT(answers["ADD ok"], 20) << "the storm must actually attach devices";
}

// Holds an flock on `path` (created when missing) until destroyed, as another invocation would.
class HeldLock {
 public:
  explicit HeldLock(const fs::path& path) {
    fs::create_directories(path.parent_path());
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    EXPECT_GE(fd_, 0) << path;
    EXPECT_EQ(::flock(fd_, LOCK_EX | LOCK_NB), 0) << path;
  }
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;
  ~HeldLock() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }

 private:
  int fd_ = -1;
};

TEST(BoundedWait, AHeldDeviceLockOrIpamLockIsError11AfterTheTimeoutAndChangesNothing) {
  CONFORMANCE_WORLD(w);
  FaultBench b(w, IpamKind::kIbcniIpam);
  TestNetns& podA = b.pod("lockA");
  TestNetns& podB = b.pod("lockB");
  const std::string vfA = b.vf();
  const std::string vfB = b.vf();
  const std::string& ibcni = conformance::ibcniBinary();
  // One ADD and DEL first, so that the store and the lock files exist as on a node in use.
  ASSERT_EQ(b.run(ibcni, "ADD", "warm", podA, b.conf(vfB)).status, 0);
  ASSERT_EQ(b.run(ibcni, "DEL", "warm", podA, b.conf(vfB)).status, 0);
  const std::string clean = b.snapshot();

  struct Timed {
    Exec run;
    milliseconds took{0};
  };
  Timed byDevice;
  Timed byIpam;
  {
    HeldLock device(w.stateDir() / "locks" / ("netdev-" + vfA + ".lock"));
    HeldLock network(b.storeDir() / "lock");
    std::vector<std::thread> threads;
    threads.emplace_back([&] {
      auto scope = testing::ScopedHostNetns::enter(w.host());
      const auto start = Clock::now();
      byDevice.run = b.run(ibcni, "ADD", "held-dev", podA, b.conf(vfA));
      byDevice.took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    });
    threads.emplace_back([&] {
      auto scope = testing::ScopedHostNetns::enter(w.host());
      const auto start = Clock::now();
      byIpam.run = b.run(ibcni, "ADD", "held-ipam", podB, b.conf(vfB));
      byIpam.took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    });
    for (auto& t : threads) {
      t.join();
    }
  }
  std::cout << "device lock held: ADD answered " << byDevice.run.code() << " after " << byDevice.took.count()
            << " ms; IPAM lock held: ADD answered " << byIpam.run.code() << " after " << byIpam.took.count() << " ms\n";
  for (const Timed* t : {&byDevice, &byIpam}) {
    EXPECT_EQ(t->run.status, 1) << t->run.describe();
    EXPECT_EQ(t->run.code(), 11u) << t->run.describe();
    EXPECT_GE(t->took, kLockTimeout - milliseconds(100));
    EXPECT_LT(t->took, kLockTimeout + std::chrono::seconds(5)) << "the wait is bounded by the lock timeout";
  }
  EXPECT_NE(byDevice.run.msg().find("try again later"), std::string::npos) << byDevice.run.describe();
  // Both ADDs gave up without changing anything (the IPAM one after moving the VF: rolled back).
  EXPECT_EQ(lineDiff(clean, b.snapshot()), "") << "(- before, + after the refused ADDs)";
}

}  // namespace
}  // namespace ibcni::faults
