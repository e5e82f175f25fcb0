// SPDX-License-Identifier: Apache-2.0
// ibcni against Debian's host-device + host-local, side by side in one run, on the same veth end
// standing in for a VF. Five parts (docs/benchmarks.md):
//
//   exec        ADD then DEL, each plugin exec'd as a runtime execs it (fresh environment, CNI_*
//               variables, the configuration on stdin, stdout read to the end, then wait4), a fresh
//               pod netns per cycle: ibcni (sriov mode, `device` = the veth end, ibcni-ipam in
//               process), host-device delegating to host-local (same device, same subnet, same
//               route), and ibcni delegating to host-local (the cost of the extra exec). The
//               contenders take turns within each cycle, in an order rotated per cycle. Medians
//               and p99, peak RSS of each exec (wait4's ru_maxrss: the process and the children it
//               waited for), binary sizes.
//   libcni      the same through libcni (AddNetworkList/DelNetworkList on a one-plugin conflist) in
//               one long-lived process, as a runtime is: bench/libcni_driver, built against
//               Debian's libcni, timing each call with Go's monotonic clock.
//   concurrent  100 pods at once on one IPAM network: 100 veth "VFs" in 4 groups of 25 (4 "PFs"),
//               each ADD moving its own VF into its own netns, all released together through a
//               gate; wall time and per-ADD latency; all must succeed with distinct addresses, which
//               are checked inside each pod; then 100 concurrent DELs, and every VF must be back.
//   breakdown   where the time of one ibcni ADD goes, from its own timing line at logLevel debug
//               (lib/log/timing.h), against bench/netdev_floor, the same kernel operations over
//               raw rtnetlink and nothing else, exec'd and timed the same way.
//   events      the call event's cost (<stateDir>/events): ibcni's exec'd ADD+DEL against
//               ibcni_no_events (the same program with the append compiled out), interleaved, a
//               fresh pod netns per cycle; the ratio of the medians against 1.02; and the floor,
//               the append alone in process.
//
// The whole bench runs in its own network and mount namespaces (unshared at start): the "host" of
// the plugins is a fresh netns, the pod netns are bind mounts that vanish with the bench, nothing
// of the machine's own network is touched. Each plugin keeps its state where its defaults put it on
// a node: host-local's dataDir on disk (a temporary directory under /var/tmp, the file system of its
// /var/lib/cni/networks), ibcni's stateDir and ibcni-ipam's dataDir on tmpfs (/dev/shm, as their
// defaults /run/ibcni and /run/ibcni-ipam are).
//
//   cni_bench --ibcni PATH [--ref DIR] [--disk DIR] [--cycles N] [--warmup N] [--pods N] [--groups N]
//             [--rounds N] [--breakdown N] [--only exec,libcni,concurrent,breakdown,events] [--no-targets]
//             [--target-ratio R] [--reuse-netns]
//
//   --ref DIR        Debian's plugins (host-device, host-local); default /usr/lib/cni
//   --disk DIR       where host-local's dataDir (and the libcni cache) go; default /var/tmp (the
//                    file system of /var/lib/cni); /dev/shm shows what host-local's disk writes cost
//   --cycles N       ADD+DEL cycles per contender in exec and libcni (default 200)
//   --pods N         concurrent pods (default 100), --groups N "PFs" (default 4)
//   --rounds N       concurrent rounds per contender (default 3)
//   --breakdown N    cycles of the breakdown (default 101)
//   --no-targets     no PASS/FAIL lines for timings and RSS (the smoke test); correctness still fails
//   --reuse-netns    one pod netns per contender for all cycles instead of a fresh one per cycle
//
// netdev_floor, libcni_driver and ibcni_no_events are looked up next to this executable; without
// libcni_driver the libcni part is skipped with a note, without ibcni_no_events the events part. Exit status: 0, 1 when a target or a check failed, 2
// on a usage or setup error, 77 when Debian's plugins are missing (skipped).
//
// This file holds the options and the set-up; each part is in cni_bench_<part>.cpp, what they
// share in cni_bench_common.cpp (cni_bench.h).
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <sstream>
#include <string>

#include "cni_bench.h"

namespace {

namespace fs = std::filesystem;
using ibcni::bench::breakdownPart;
using ibcni::bench::concurrentPart;
using ibcni::bench::execPart;
using ibcni::bench::fatal;
using ibcni::bench::kDevice;
using ibcni::bench::libcniPart;
using ibcni::bench::sh;
using ibcni::bench::verdict;

std::string selfDir() {
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

std::string absolute(const std::string& path) {
  std::error_code ec;
  auto a = fs::absolute(path, ec);
  return ec ? path : a.lexically_normal().string();
}

int usage() {
  std::fprintf(
      stderr,
      "usage: cni_bench --ibcni PATH [--ref DIR] [--disk DIR] [--cycles N] [--warmup N] [--pods N] [--groups N] "
      "[--rounds N]\n                 [--breakdown N] [--only PARTS] [--no-targets] [--target-ratio R] "
      "[--reuse-netns]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  ibcni::bench::Options o;
  ibcni::bench::Paths p;
  std::string diskParent = "/var/tmp";
  p.ref = "/usr/lib/cni";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-targets") {
      o.targets = false;
      continue;
    }
    if (a == "--reuse-netns") {
      o.reuseNetns = true;
      continue;
    }
    if (i + 1 >= argc) {
      return usage();
    }
    const std::string v = argv[++i];
    if (a == "--ibcni") {
      p.ibcni = absolute(v);
    } else if (a == "--disk") {
      diskParent = v;
    } else if (a == "--ref") {
      p.ref = absolute(v);
    } else if (a == "--cycles") {
      o.cycles = std::atoi(v.c_str());
    } else if (a == "--warmup") {
      o.warmup = std::atoi(v.c_str());
    } else if (a == "--pods") {
      o.pods = std::atoi(v.c_str());
    } else if (a == "--groups") {
      o.groups = std::max(1, std::atoi(v.c_str()));
    } else if (a == "--rounds") {
      o.rounds = std::atoi(v.c_str());
    } else if (a == "--breakdown") {
      o.breakdown = std::atoi(v.c_str());
    } else if (a == "--target-ratio") {
      o.targetRatio = std::atof(v.c_str());
    } else if (a == "--only") {
      std::stringstream ss(v);
      for (std::string part; std::getline(ss, part, ',');) {
        o.only.insert(part);
      }
    } else {
      return usage();
    }
  }
  if (p.ibcni.empty() || o.cycles < 1 || o.pods < 1 || o.rounds < 1 || o.breakdown < 1) {
    return usage();
  }
  if (::access(p.ibcni.c_str(), X_OK) != 0) {
    fatal("no ibcni at " + p.ibcni);
  }
  if (::access((p.ref + "/host-device").c_str(), X_OK) != 0 || ::access((p.ref + "/host-local").c_str(), X_OK) != 0) {
    std::printf("SKIP: no host-device/host-local in %s (apt-get install containernetworking-plugins)\n", p.ref.c_str());
    return 77;
  }
  p.floor = selfDir() + "/netdev_floor";
  p.noEvents = selfDir() + "/ibcni_no_events";
  p.driver = selfDir() + "/libcni_driver";
  if (::access(p.driver.c_str(), X_OK) != 0) {
    p.driver.clear();
  }
  if (::geteuid() != 0) {
    fatal("needs root (network namespaces)");
  }
  ::signal(SIGPIPE, SIG_IGN);

  // Our own network and mount namespaces: the plugins' "host" is a fresh netns.
  if (::unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) {
    fatal(std::string("unshare: ") + std::strerror(errno));
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    fatal(std::string("make / private: ") + std::strerror(errno));
  }
  std::string diskTmpl = diskParent + "/cni-bench-XXXXXX";
  char shmTmpl[] = "/dev/shm/cni-bench-XXXXXX";
  if (::mkdtemp(diskTmpl.data()) == nullptr || ::mkdtemp(shmTmpl) == nullptr) {
    fatal("set-up: " + diskTmpl);
  }
  p.disk = diskTmpl;
  p.tmpfs = shmTmpl;
  // The pod netns (TestNetns makes them under $TMPDIR) on the same tmpfs. The plugins are run with
  // an environment of their own: TMPDIR reaches only TestNetns and `ip`.
  const std::string nsDir = p.tmpfs + "/netns";
  fs::create_directories(nsDir);
  ::setenv("TMPDIR", nsDir.c_str(), 1);
  sh("ip link set lo up && ip link add " + std::string(kDevice) + " type veth peer name " + kDevice + "p");

  utsname u{};
  ::uname(&u);
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::printf("# ibcni against host-device + host-local: %ld CPUs, kernel %s, %s\n", ::sysconf(_SC_NPROCESSORS_ONLN),
              u.release, date);
  std::printf(
      "\nibcni: %s; Debian's plugins: %s. host-local's dataDir in %s; "
      "ibcni's stateDir and ibcni-ipam's dataDir on tmpfs (/dev/shm), as their defaults are.\n",
      p.ibcni.c_str(), p.ref.c_str(), p.disk.c_str());
  std::fflush(stdout);

  bool ok = true;
  if (o.wants("exec")) {
    ok = execPart(p, o) && ok;
    std::fflush(stdout);
  }
  if (o.wants("libcni")) {
    ok = libcniPart(p, o) && ok;
    std::fflush(stdout);
  }
  if (o.wants("concurrent")) {
    ok = concurrentPart(p, o) && ok;
    std::fflush(stdout);
  }
  if (o.wants("breakdown")) {
    ok = breakdownPart(p, o) && ok;
    std::fflush(stdout);
  }
  if (o.wants("events") && ::access(p.noEvents.c_str(), X_OK) != 0) {
    std::printf("\n## The call event: skipped, no %s\n", p.noEvents.c_str());
  } else if (o.wants("events")) {
    ok = eventsPart(p, o) && ok;
    std::fflush(stdout);
  }
  std::error_code ec;
  fs::remove_all(p.disk, ec);
  fs::remove_all(p.tmpfs, ec);
  if (!ok) {
    verdict(false, "a part could not complete (see above)");
  }
  std::printf("\n");
  for (const auto& v : ibcni::bench::verdicts()) {
    std::printf("%s\n", v.c_str());
  }
  return ibcni::bench::allPassed() ? 0 : 1;
}
