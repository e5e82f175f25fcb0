// SPDX-License-Identifier: Apache-2.0
// ibcni against Debian's host-device + host-local, side by side in one run, on the same veth end
// standing in for a VF. Four parts (README, "Benchmarks"):
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
//               (plugin/log/timing.h), against bench/netdev_floor, the same kernel operations over
//               raw rtnetlink and nothing else, exec'd and timed the same way.
//
// The whole bench runs in its own network and mount namespaces (unshared at start): the "host" of
// the plugins is a fresh netns, the pod netns are bind mounts that vanish with the bench, nothing
// of the machine's own network is touched. Each plugin keeps its state where its defaults put it on
// a node: host-local's dataDir on disk (a temporary directory under /var/tmp, the file system of its
// /var/lib/cni/networks), ibcni's stateDir and ibcni-ipam's dataDir on tmpfs (/dev/shm, as their
// defaults /run/ibcni and /run/ibcni-ipam are).
//
//   cni_bench --ibcni PATH [--ref DIR] [--disk DIR] [--cycles N] [--warmup N] [--pods N] [--groups N]
//             [--rounds N] [--breakdown N] [--only exec,libcni,concurrent,breakdown] [--no-targets]
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
// netdev_floor and libcni_driver are looked up next to this executable; without libcni_driver
// the libcni part is skipped with a note. Exit status: 0, 1 when a target or a check failed, 2
// on a usage or setup error, 77 when Debian's plugins are missing (skipped).
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
std::int64_t monoNs(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

struct Stats {
  double median = 0;
  double p99 = 0;
  double max = 0;
  std::size_t n = 0;
};

Stats stats(std::vector<double> v) {
  Stats s;
  s.n = v.size();
  if (v.empty()) {
    return s;
  }
  std::sort(v.begin(), v.end());
  s.median = v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  s.p99 = v[static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(v.size()))) - 1];
  s.max = v.back();
  return s;
}

[[noreturn]] void fatal(const std::string& what) {
  std::fprintf(stderr, "cni_bench: %s\n", what.c_str());
  std::exit(2);
}

// ---------------------------------------------------------------------------------------------
// Processes

struct Exec {
  int status = -1;
  std::string out;
  std::string err;
  long maxRssKiB = 0;
  Clock::time_point t0;  // just before fork
  Clock::time_point t1;  // wait4 returned
  double ms() const { return ::ms(t1 - t0); }
};

std::vector<char*> cstrings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const auto& s : v) {
    out.push_back(const_cast<char*>(s.c_str()));
  }
  out.push_back(nullptr);
  return out;
}

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

std::string drain(int fd) {
  std::string s;
  char buf[8192];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) {
    s.append(buf, static_cast<std::size_t>(n));
  }
  return s;
}

/// fork + execve as a runtime does: the input on stdin (a pipe), stdout and stderr read to the end,
/// then wait4. The clock runs from just before fork to wait4's return.
Exec run(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& input) {
  const int in = stdinPipe(input);
  int out[2];
  int err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    fatal("pipe");
  }
  auto a = cstrings(argv);
  auto e = cstrings(env);
  Exec r;
  r.t0 = Clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execve(a[0], a.data(), e.data());
    ::_exit(127);
  }
  ::close(in);
  ::close(out[1]);
  ::close(err[1]);
  // Both pipes at once would need poll; stderr is small unless at debug level, where it stays far
  // below a pipe's 64 KiB: stdout first, then stderr.
  r.out = drain(out[0]);
  r.err = drain(err[0]);
  int status = 0;
  rusage ru{};
  ::wait4(pid, &status, 0, &ru);
  r.t1 = Clock::now();
  ::close(out[0]);
  ::close(err[0]);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.maxRssKiB = ru.ru_maxrss;
  return r;
}

// ---------------------------------------------------------------------------------------------
// Namespaces and links

std::string g_nsDir;
int g_hostNs = -1;

/// A fresh network namespace bind-mounted at a path, as `ip netns add` makes one.
std::string makeNetns(const std::string& name) {
  const std::string path = g_nsDir + "/" + name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
  if (fd < 0) {
    fatal("create " + path + ": " + std::strerror(errno));
  }
  ::close(fd);
  if (::unshare(CLONE_NEWNET) != 0) {
    fatal(std::string("unshare: ") + std::strerror(errno));
  }
  const int rc = ::mount("/proc/thread-self/ns/net", path.c_str(), nullptr, MS_BIND, nullptr);
  const int saved = errno;
  if (::setns(g_hostNs, CLONE_NEWNET) != 0) {
    fatal("setns back");
  }
  if (rc != 0) {
    fatal("bind mount " + path + ": " + std::strerror(saved));
  }
  return path;
}

void removeNetns(const std::string& path) {
  ::umount2(path.c_str(), MNT_DETACH);
  ::unlink(path.c_str());
}

void sh(const std::string& command) {
  if (std::system(command.c_str()) != 0) {
    fatal("failed: " + command);
  }
}

bool linkInHost(const std::string& name) { return ::if_nametoindex(name.c_str()) != 0; }

/// The IPv4 address (without prefix) of `ifName` inside the netns at `path`; empty if none.
std::string addressInNetns(const std::string& path, const std::string& ifName) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
    if (fd >= 0) {
      ::close(fd);
    }
    return {};
  }
  ::close(fd);
  std::string found;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) == 0) {
    for (auto* a = list; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr != nullptr && a->ifa_addr->sa_family == AF_INET && ifName == a->ifa_name &&
          (a->ifa_flags & IFF_UP) != 0) {
        char buf[INET_ADDRSTRLEN];
        ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
        found = buf;
      }
    }
    ::freeifaddrs(list);
  }
  if (::setns(g_hostNs, CLONE_NEWNET) != 0) {
    fatal("setns back");
  }
  return found;
}

std::string firstAddress(const std::string& resultJson) {
  json r = json::parse(resultJson, nullptr, false);
  if (r.is_discarded() || !r.contains("ips") || !r["ips"].is_array() || r["ips"].empty()) {
    return {};
  }
  std::string a = r["ips"][0].value("address", "");
  return a.substr(0, a.find('/'));
}

// ---------------------------------------------------------------------------------------------
// Contenders

enum class Kind { kIbcni, kHostDevice, kIbcniHostLocal };

struct Paths {
  std::string ibcni;
  std::string ref;
  std::string floor;
  std::string driver;
  std::string disk;   // stateDir, host-local dataDir
  std::string tmpfs;  // ibcni-ipam dataDir
};

struct Contender {
  Kind kind;
  std::string label;
  std::string driverName;  // in libcni_driver's list
};

const std::vector<Contender> kContenders = {
    {Kind::kIbcni, "ibcni (ibcni-ipam in process)", "ibcni"},
    {Kind::kHostDevice, "host-device + host-local", "hostdevice"},
    {Kind::kIbcniHostLocal, "ibcni + host-local (delegated)", "ibcnihl"},
};

json ipamFor(Kind kind, const Paths& p, const std::string& subnet) {
  json range = {{"subnet", subnet + ".0.0/16"}, {"gateway", subnet + ".0.1"}};
  json route = {{"dst", "10.200.0.0/16"}};
  json ipam = json::object();
  ipam["ranges"] = json::array({json::array({range})});
  ipam["routes"] = json::array({route});
  if (kind == Kind::kIbcni) {
    ipam["type"] = "ibcni-ipam";
    ipam["dataDir"] = p.tmpfs + "/ibcni-ipam";
  } else {
    ipam["type"] = "host-local";
    ipam["dataDir"] = p.disk + (kind == Kind::kHostDevice ? "/host-local" : "/host-local-ibcni");
  }
  return ipam;
}

json pluginConfig(Kind kind, const Paths& p, const std::string& network, const std::string& subnet,
                  const std::string& device, const std::string& logLevel = "") {
  json c = {{"cniVersion", "1.0.0"}, {"name", network}};
  if (kind == Kind::kHostDevice) {
    c["type"] = "host-device";
  } else {
    c["type"] = "ibcni";
    c["mode"] = "sriov";
    c["stateDir"] = p.tmpfs + "/ibcni-state";
    if (!logLevel.empty()) {
      c["logLevel"] = logLevel;
    }
  }
  if (!device.empty()) {
    c["device"] = device;
  }
  c["ipam"] = ipamFor(kind, p, subnet);
  return c;
}

std::string binaryFor(Kind kind, const Paths& p) {
  return kind == Kind::kHostDevice ? p.ref + "/host-device" : p.ibcni;
}

std::string cniPathFor(const Paths& p) { return fs::path(p.ibcni).parent_path().string() + ":" + p.ref; }

std::vector<std::string> cniEnv(const char* verb, const std::string& cid, const std::string& netns,
                                const std::string& ifName, const Paths& p) {
  return {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
          std::string("CNI_COMMAND=") + verb,
          "CNI_CONTAINERID=" + cid,
          "CNI_NETNS=" + netns,
          "CNI_IFNAME=" + ifName,
          "CNI_PATH=" + cniPathFor(p)};
}

// ---------------------------------------------------------------------------------------------
// Reporting

bool g_ok = true;
std::vector<std::string> g_verdicts;

void verdict(bool pass, const std::string& what) {
  g_verdicts.push_back(std::string(pass ? "PASS " : "FAIL ") + what);
  g_ok = g_ok && pass;
}

std::string fmtMs(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.2f ms" : "%.1f ms", v);
  return buf;
}

std::string fmtRatio(double num, double den) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fx", den > 0 ? num / den : 0.0);
  return buf;
}

std::string mib(long kib) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(kib) / 1024.0);
  return buf;
}

void printFailure(const std::string& what, const Exec& e) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s failed (exit %d)\nstdout: %s\nstderr: %s\n", what.c_str(), e.status, e.out.c_str(),
               e.err.substr(0, 4000).c_str());
}

// ---------------------------------------------------------------------------------------------
// exec: ADD+DEL cycles

struct CycleFigures {
  std::vector<double> add;
  std::vector<double> del;
  std::vector<double> addDel;
  std::vector<double> addRss;
  std::vector<double> delRss;
};

struct Options {
  int cycles = 200;
  int warmup = 10;
  int pods = 100;
  int groups = 4;
  int rounds = 3;
  int breakdown = 101;
  bool targets = true;
  bool reuseNetns = false;
  double targetRatio = 5.0;
  std::set<std::string> only;
  bool wants(const std::string& part) const { return only.empty() || only.count(part) != 0; }
};

const char* kDevice = "bvf0";
const char* kIfName = "net1";

bool execPart(const Paths& p, const Options& o) {
  std::printf("\n## ADD+DEL, exec'd as a runtime does (%d cycles, %s pod netns, contenders interleaved)\n\n", o.cycles,
              o.reuseNetns ? "one reused" : "a fresh");
  std::vector<CycleFigures> fig(kContenders.size());
  std::vector<std::string> reused(kContenders.size());
  if (o.reuseNetns) {
    for (std::size_t c = 0; c < kContenders.size(); ++c) {
      reused[c] = makeNetns("exec-pod-" + std::to_string(c));
    }
  }
  for (int i = 0; i < o.warmup + o.cycles; ++i) {
    for (std::size_t k = 0; k < kContenders.size(); ++k) {
      const std::size_t c = (k + static_cast<std::size_t>(i)) % kContenders.size();
      const Kind kind = kContenders[c].kind;
      const std::string ns =
          o.reuseNetns ? reused[c] : makeNetns("exec-" + std::to_string(i) + "-" + std::to_string(c));
      const std::string cid = "exec-" + std::to_string(c) + "-" + std::to_string(i);
      const std::string conf = pluginConfig(kind, p, "benchnet", "10.10", kDevice).dump();
      const std::vector<std::string> argv = {binaryFor(kind, p)};
      Exec add = run(argv, cniEnv("ADD", cid, ns, kIfName, p), conf);
      Exec del = run(argv, cniEnv("DEL", cid, ns, kIfName, p), conf);
      if (!o.reuseNetns) {
        removeNetns(ns);
      }
      if (add.status != 0 || firstAddress(add.out).empty()) {
        printFailure(kContenders[c].label + " ADD", add);
        return false;
      }
      if (del.status != 0 || !linkInHost(kDevice)) {
        printFailure(kContenders[c].label + " DEL (or the device is not back)", del);
        return false;
      }
      if (i < o.warmup) {
        continue;
      }
      fig[c].add.push_back(add.ms());
      fig[c].del.push_back(del.ms());
      fig[c].addDel.push_back(add.ms() + del.ms());
      fig[c].addRss.push_back(static_cast<double>(add.maxRssKiB));
      fig[c].delRss.push_back(static_cast<double>(del.maxRssKiB));
    }
  }
  for (const auto& ns : reused) {
    if (!ns.empty()) {
      removeNetns(ns);
    }
  }
  std::vector<Stats> add;
  std::vector<Stats> del;
  std::vector<Stats> addDel;
  std::vector<Stats> addRss;
  std::vector<Stats> delRss;
  for (const auto& f : fig) {
    add.push_back(stats(f.add));
    del.push_back(stats(f.del));
    addDel.push_back(stats(f.addDel));
    addRss.push_back(stats(f.addRss));
    delRss.push_back(stats(f.delRss));
  }
  std::printf("| %d cycles | %s | %s | %s | host-device / ibcni |\n|---|---|---|---|---|\n", o.cycles,
              kContenders[0].label.c_str(), kContenders[1].label.c_str(), kContenders[2].label.c_str());
  auto row = [&](const char* name, const std::vector<Stats>& s, double Stats::*f) {
    std::printf("| %s | %s | %s | %s | %s |\n", name, fmtMs(s[0].*f).c_str(), fmtMs(s[1].*f).c_str(),
                fmtMs(s[2].*f).c_str(), fmtRatio(s[1].*f, s[0].*f).c_str());
  };
  row("ADD median", add, &Stats::median);
  row("ADD p99", add, &Stats::p99);
  row("DEL median", del, &Stats::median);
  row("DEL p99", del, &Stats::p99);
  row("ADD+DEL median", addDel, &Stats::median);
  row("ADD+DEL p99", addDel, &Stats::p99);
  std::printf("| peak RSS of an ADD, median (max) | %s (%s) | %s (%s) | %s (%s) | %.2f |\n",
              mib(static_cast<long>(addRss[0].median)).c_str(), mib(static_cast<long>(addRss[0].max)).c_str(),
              mib(static_cast<long>(addRss[1].median)).c_str(), mib(static_cast<long>(addRss[1].max)).c_str(),
              mib(static_cast<long>(addRss[2].median)).c_str(), mib(static_cast<long>(addRss[2].max)).c_str(),
              addRss[0].median > 0 ? addRss[1].median / addRss[0].median : 0.0);
  std::printf("| peak RSS of a DEL, median (max) | %s (%s) | %s (%s) | %s (%s) | |\n",
              mib(static_cast<long>(delRss[0].median)).c_str(), mib(static_cast<long>(delRss[0].max)).c_str(),
              mib(static_cast<long>(delRss[1].median)).c_str(), mib(static_cast<long>(delRss[1].max)).c_str(),
              mib(static_cast<long>(delRss[2].median)).c_str(), mib(static_cast<long>(delRss[2].max)).c_str());
  std::printf("\nThe extra exec of a delegated host-local costs ibcni %s per ADD+DEL (median).\n",
              fmtMs(addDel[2].median - addDel[0].median).c_str());

  // Binary sizes.
  auto size = [](const std::string& path) -> std::string {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      return "-";
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(st.st_size) / (1024.0 * 1024.0));
    return buf;
  };
  const std::string ibcniIpam = fs::path(p.ibcni).parent_path().string() + "/ibcni-ipam";
  std::printf("\n| binary (file size) | ibcni | ibcni-ipam | host-device | host-local |\n|---|---|---|---|---|\n");
  std::printf("| | %s | %s | %s | %s |\n", size(p.ibcni).c_str(), size(ibcniIpam).c_str(),
              size(p.ref + "/host-device").c_str(), size(p.ref + "/host-local").c_str());

  if (o.targets) {
    char what[256];
    std::snprintf(what, sizeof what,
                  "exec: ibcni ADD+DEL median %.1fx faster than host-device + host-local (goal %.0fx)",
                  addDel[1].median / addDel[0].median, o.targetRatio);
    verdict(addDel[1].median >= o.targetRatio * addDel[0].median, what);
    std::snprintf(what, sizeof what, "exec: ibcni peak RSS of an ADD (max %s) under half of host-device's (median %s)",
                  mib(static_cast<long>(addRss[0].max)).c_str(), mib(static_cast<long>(addRss[1].median)).c_str());
    verdict(addRss[0].max < 0.5 * addRss[1].median, what);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// libcni

struct Driver {
  pid_t pid = -1;
  FILE* in = nullptr;
  FILE* out = nullptr;
};

Driver startDriver(const Paths& p, const std::vector<std::string>& lists) {
  int toDriver[2];
  int fromDriver[2];
  if (::pipe2(toDriver, O_CLOEXEC) != 0 || ::pipe2(fromDriver, O_CLOEXEC) != 0) {
    fatal("pipe");
  }
  std::vector<std::string> argv = {p.driver};
  argv.insert(argv.end(), lists.begin(), lists.end());
  std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "CNI_PATH=" + cniPathFor(p),
                                  "BENCH_CACHE_DIR=" + p.disk + "/libcni-cache"};
  auto a = cstrings(argv);
  auto e = cstrings(env);
  Driver d;
  d.pid = ::fork();
  if (d.pid == 0) {
    ::dup2(toDriver[0], 0);
    ::dup2(fromDriver[1], 1);
    ::execve(a[0], a.data(), e.data());
    ::_exit(127);
  }
  ::close(toDriver[0]);
  ::close(fromDriver[1]);
  d.in = ::fdopen(toDriver[1], "w");
  d.out = ::fdopen(fromDriver[0], "r");
  return d;
}

struct DriverReply {
  bool ok = false;
  double ms = 0;
  std::string rest;
};

DriverReply ask(Driver& d, const std::string& line) {
  std::fprintf(d.in, "%s\n", line.c_str());
  std::fflush(d.in);
  char buf[4096];
  DriverReply r;
  if (std::fgets(buf, sizeof buf, d.out) == nullptr) {
    r.rest = "libcni_driver exited";
    return r;
  }
  std::string s(buf);
  while (!s.empty() && s.back() == '\n') {
    s.pop_back();
  }
  std::istringstream is(s);
  std::string word;
  long long ns = 0;
  is >> word >> ns;
  std::getline(is, r.rest);
  r.ok = word == "ok";
  r.ms = static_cast<double>(ns) / 1e6;
  return r;
}

bool libcniPart(const Paths& p, const Options& o) {
  std::printf("\n## ADD+DEL through libcni (AddNetworkList/DelNetworkList, %d cycles, contenders interleaved)\n\n",
              o.cycles);
  if (p.driver.empty() || ::access(p.driver.c_str(), X_OK) != 0) {
    std::printf("Skipped: libcni_driver was not built (needs golang-go and golang-github-appc-cni-dev).\n");
    return true;
  }
  std::vector<std::string> lists;
  for (const auto& c : kContenders) {
    json plugin = pluginConfig(c.kind, p, "benchnet", "10.10", kDevice);
    plugin.erase("name");
    plugin.erase("cniVersion");
    json list = {{"cniVersion", "1.0.0"}, {"name", "benchnet"}, {"plugins", json::array({plugin})}};
    const std::string file = p.disk + "/" + c.driverName + ".conflist";
    std::ofstream(file) << list.dump(2);
    lists.push_back(c.driverName + "=" + file);
  }
  Driver d = startDriver(p, lists);
  std::vector<CycleFigures> fig(kContenders.size());
  bool ok = true;
  for (int i = 0; ok && i < o.warmup + o.cycles; ++i) {
    for (std::size_t k = 0; ok && k < kContenders.size(); ++k) {
      const std::size_t c = (k + static_cast<std::size_t>(i)) % kContenders.size();
      const std::string ns = makeNetns("libcni-" + std::to_string(i) + "-" + std::to_string(c));
      const std::string cid = "libcni-" + std::to_string(c) + "-" + std::to_string(i);
      const std::string args = kContenders[c].driverName + " " + ns + " " + cid + " " + kIfName;
      DriverReply add = ask(d, "add " + args);
      DriverReply del = ask(d, "del " + args);
      removeNetns(ns);
      if (!add.ok || add.rest.find('.') == std::string::npos || !del.ok || !linkInHost(kDevice)) {
        std::fprintf(stderr, "libcni %s: ADD: %s; DEL: %s\n", kContenders[c].label.c_str(), add.rest.c_str(),
                     del.rest.c_str());
        ok = false;
        break;
      }
      if (i >= o.warmup) {
        fig[c].add.push_back(add.ms);
        fig[c].del.push_back(del.ms);
        fig[c].addDel.push_back(add.ms + del.ms);
      }
    }
  }
  std::fclose(d.in);
  std::fclose(d.out);
  ::waitpid(d.pid, nullptr, 0);
  if (!ok) {
    return false;
  }
  std::vector<Stats> add;
  std::vector<Stats> del;
  std::vector<Stats> addDel;
  for (const auto& f : fig) {
    add.push_back(stats(f.add));
    del.push_back(stats(f.del));
    addDel.push_back(stats(f.addDel));
  }
  std::printf("| %d cycles, libcni | %s | %s | %s | host-device / ibcni |\n|---|---|---|---|---|\n", o.cycles,
              kContenders[0].label.c_str(), kContenders[1].label.c_str(), kContenders[2].label.c_str());
  auto row = [&](const char* name, const std::vector<Stats>& s, double Stats::*f) {
    std::printf("| %s | %s | %s | %s | %s |\n", name, fmtMs(s[0].*f).c_str(), fmtMs(s[1].*f).c_str(),
                fmtMs(s[2].*f).c_str(), fmtRatio(s[1].*f, s[0].*f).c_str());
  };
  row("AddNetworkList median", add, &Stats::median);
  row("AddNetworkList p99", add, &Stats::p99);
  row("DelNetworkList median", del, &Stats::median);
  row("DelNetworkList p99", del, &Stats::p99);
  row("ADD+DEL median", addDel, &Stats::median);
  row("ADD+DEL p99", addDel, &Stats::p99);
  if (o.targets) {
    char what[256];
    std::snprintf(what, sizeof what,
                  "libcni: ibcni ADD+DEL median %.1fx faster than host-device + host-local (goal %.0fx)",
                  addDel[1].median / addDel[0].median, o.targetRatio);
    verdict(addDel[1].median >= o.targetRatio * addDel[0].median, what);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// concurrent

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
  return drain(fd);
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
  std::vector<std::string> netns;
  std::vector<std::vector<std::string>> argvs;
  std::vector<std::vector<std::string>> addEnvs;
  std::vector<std::vector<std::string>> delEnvs;
  std::vector<std::string> inputs;
  for (int i = 0; i < n; ++i) {
    netns.push_back(makeNetns("pod-" + std::to_string(round) + "-" + std::to_string(i)));
    const std::string cid =
        "pod-" + std::to_string(static_cast<int>(kind)) + "-" + std::to_string(round) + "-" + std::to_string(i);
    argvs.push_back({binaryFor(kind, p)});
    addEnvs.push_back(cniEnv("ADD", cid, netns.back(), kIfName, p));
    delEnvs.push_back(cniEnv("DEL", cid, netns.back(), kIfName, p));
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
  for (const auto& ns : netns) {
    removeNetns(ns);
  }
  return r;
}

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
  std::printf("| %d pods at once | %s | %s | %s | host-device / ibcni |\n|---|---|---|---|---|\n", o.pods,
              kContenders[0].label.c_str(), kContenders[1].label.c_str(), kContenders[2].label.c_str());
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
  auto row = [&](const char* name, const std::vector<Stats>& s, double Stats::*f) {
    std::printf("| %s | %s | %s | %s | %s |\n", name, fmtMs(s[0].*f).c_str(), fmtMs(s[1].*f).c_str(),
                fmtMs(s[2].*f).c_str(), fmtRatio(s[1].*f, s[0].*f).c_str());
  };
  row("ADD wall (median of rounds)", addWall, &Stats::median);
  row("ADD wall (worst round)", addWall, &Stats::max);
  std::printf("| ADD wall / %d pods (median round) | %s | %s | %s | |\n", o.pods,
              fmtMs(addWall[0].median / o.pods).c_str(), fmtMs(addWall[1].median / o.pods).c_str(),
              fmtMs(addWall[2].median / o.pods).c_str());
  row("per-ADD latency median", addLat, &Stats::median);
  row("per-ADD latency p99", addLat, &Stats::p99);
  row("DEL wall (median of rounds)", delWall, &Stats::median);
  row("per-DEL latency p99", delLat, &Stats::p99);
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

// ---------------------------------------------------------------------------------------------
// breakdown

struct Timing {
  bool ok = false;
  std::map<std::string, double> us;  // laps
  double startUs = 0;                // fork -> main
  double exitUs = 0;                 // last mark -> wait4
};

Timing parseTiming(const Exec& e) {
  Timing t;
  const auto pos = e.err.rfind("timing: start=");
  if (pos == std::string::npos) {
    return t;
  }
  std::istringstream is(e.err.substr(pos + 8, e.err.find('\n', pos) - pos - 8));
  std::string tok;
  while (is >> tok) {
    const auto eq = tok.find('=');
    if (eq == std::string::npos) {
      continue;
    }
    const std::string key = tok.substr(0, eq);
    const std::string value = tok.substr(eq + 1);
    if (key == "start") {
      t.startUs = static_cast<double>(std::stoll(value) - monoNs(e.t0)) / 1000.0;
    } else if (key == "end") {
      t.exitUs = static_cast<double>(monoNs(e.t1) - std::stoll(value)) / 1000.0;
      t.ok = true;
    } else {
      t.us[key] += std::stod(value);
    }
  }
  return t;
}

bool breakdownPart(const Paths& p, const Options& o) {
  std::printf(
      "\n## Where the time of one ADD goes (%d cycles: ibcni at logLevel debug, ibcni at warn, "
      "host-device + host-local, the floor; interleaved)\n\n",
      o.breakdown);
  struct Runner {
    std::string label;
    std::vector<std::string> argv;
    std::string conf;
  };
  const std::vector<std::string> floorArgv = {p.floor, kDevice, "10.10.0.2/16", "10.10.0.1", "10.200.0.0/16"};
  const std::vector<Runner> runners = {
      {"ibcni, debug", {p.ibcni}, pluginConfig(Kind::kIbcni, p, "benchnet", "10.10", kDevice, "debug").dump()},
      {"ibcni, warn", {p.ibcni}, pluginConfig(Kind::kIbcni, p, "benchnet", "10.10", kDevice).dump()},
      {"floor", floorArgv, pluginConfig(Kind::kIbcni, p, "benchnet", "10.10", kDevice).dump()},
      {"host-device",
       {binaryFor(Kind::kHostDevice, p)},
       pluginConfig(Kind::kHostDevice, p, "benchnet", "10.10", kDevice).dump()},
  };
  constexpr std::size_t kDebug = 0;
  constexpr std::size_t kWarn = 1;
  constexpr std::size_t kFloor = 2;
  constexpr std::size_t kPeer = 3;
  std::vector<std::vector<Timing>> timings(runners.size());
  std::vector<std::vector<double>> addTotal(runners.size());
  std::vector<std::vector<double>> delTotal(runners.size());
  for (int i = 0; i < 3 + o.breakdown; ++i) {
    for (std::size_t k = 0; k < runners.size(); ++k) {
      const std::size_t r = (k + static_cast<std::size_t>(i)) % runners.size();
      const std::string ns = makeNetns("bd-" + std::to_string(i) + "-" + std::to_string(r));
      const std::string cid = "bd-" + std::to_string(r) + "-" + std::to_string(i);
      Exec add = run(runners[r].argv, cniEnv("ADD", cid, ns, kIfName, p), runners[r].conf);
      Exec del = run(runners[r].argv, cniEnv("DEL", cid, ns, kIfName, p), runners[r].conf);
      removeNetns(ns);
      if (add.status != 0 || del.status != 0 || !linkInHost(kDevice)) {
        printFailure(runners[r].label + (add.status != 0 ? " ADD" : " DEL"), add.status != 0 ? add : del);
        return false;
      }
      if (i < 3) {
        continue;
      }
      addTotal[r].push_back(add.ms());
      delTotal[r].push_back(del.ms());
      if (r == kDebug || r == kFloor) {
        Timing t = parseTiming(add);
        if (!t.ok) {
          std::fprintf(stderr, "%s: no timing line on stderr:\n%s\n", runners[r].label.c_str(), add.err.c_str());
          return false;
        }
        timings[r].push_back(std::move(t));
      }
    }
  }
  auto phase = [&](std::size_t r, const std::string& key) -> std::string {
    if (timings[r].empty()) {
      return "-";
    }
    std::vector<double> v;
    for (const auto& t : timings[r]) {
      if (key == "@start") {
        v.push_back(t.startUs);
      } else if (key == "@exit") {
        v.push_back(t.exitUs);
      } else if (auto it = t.us.find(key); it != t.us.end()) {
        v.push_back(it->second);
      } else {
        return "-";
      }
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f ms", stats(v).median / 1000.0);
    return buf;
  };
  struct Row {
    const char* name;
    const char* key;
  };
  const std::vector<Row> rows = {
      {"process start: fork, exec, dynamic linking, static init (fork → main)", "@start"},
      {"read stdin", "stdin"},
      {"set-up: netlink, sysfs, IPAM objects", "setup"},
      {"config parse, environment, CNI_ARGS, log set-up", "parse"},
      {"open the pod netns (floor: and its rtnetlink sockets)", "netns"},
      {"attachment record lookup (ADD twice?)", "state-read"},
      {"resolve the device (netlink, sysfs, node-device checks), device lock, resolve again", "resolve"},
      {"attachment record written ahead (write, rename; stateDir on tmpfs)", "state-ahead"},
      {"link: alias, rename, move to the pod, rename, up, read back (netlink)", "link"},
      {"IPAM: ibcni-ipam in process (its store on tmpfs)", "ipam"},
      {"address + route (netlink)", "addr"},
      {"result", "result"},
      {"attachment record written (write, fsync, rename; stateDir on tmpfs)", "state-write"},
      {"result JSON, commit, log", "finish"},
      {"exit: stdout, teardown, parent's wait4 (last mark → wait4)", "@exit"},
  };
  std::printf("| phase of one ADD (medians) | ibcni (logLevel debug) | floor (raw netlink) |\n|---|---|---|\n");
  std::set<std::string> known;
  for (const auto& row : rows) {
    known.insert(row.key);
    std::printf("| %s | %s | %s |\n", row.name, phase(kDebug, row.key).c_str(), phase(kFloor, row.key).c_str());
  }
  // Marks this table does not know yet (the plugin's phases may change): shown, never dropped.
  std::vector<std::string> others;
  for (const auto& t : timings[kDebug]) {
    for (const auto& [key, value] : t.us) {
      if (known.count(key) == 0 && std::find(others.begin(), others.end(), key) == others.end()) {
        others.push_back(key);
      }
    }
  }
  for (const auto& key : others) {
    std::printf("| other mark: %s | %s | %s |\n", key.c_str(), phase(kDebug, key).c_str(), phase(kFloor, key).c_str());
  }
  const Stats dbg = stats(addTotal[kDebug]);
  const Stats warn = stats(addTotal[kWarn]);
  const Stats floor = stats(addTotal[kFloor]);
  std::printf("| **ADD total, fork → wait4** | %s (at warn: %s) | %s |\n", fmtMs(dbg.median).c_str(),
              fmtMs(warn.median).c_str(), fmtMs(floor.median).c_str());
  std::printf("| ADD total p99 | %s (at warn: %s) | %s |\n", fmtMs(dbg.p99).c_str(), fmtMs(warn.p99).c_str(),
              fmtMs(floor.p99).c_str());
  const Stats dDel = stats(delTotal[kWarn]);
  const Stats fDel = stats(delTotal[kFloor]);
  std::printf("| DEL total, fork → wait4 (ibcni at warn) | %s | %s |\n", fmtMs(dDel.median).c_str(),
              fmtMs(fDel.median).c_str());
  std::printf("\nibcni / floor (medians, ibcni at warn): ADD %.2f, DEL %.2f, ADD+DEL %.2f.\n",
              warn.median / floor.median, dDel.median / fDel.median,
              (warn.median + dDel.median) / (floor.median + fDel.median));
  // The same cycles, host-device + host-local beside them: what each costs above the kernel's work.
  const Stats pAdd = stats(addTotal[kPeer]);
  const Stats pDel = stats(delTotal[kPeer]);
  const double floorAddDel = floor.median + fDel.median;
  const double oursAbove = warn.median + dDel.median - floorAddDel;
  const double peerAbove = pAdd.median + pDel.median - floorAddDel;
  std::printf("\n| same cycles, medians | floor | ibcni (warn) | host-device + host-local |\n|---|---|---|---|\n");
  std::printf("| ADD | %s | %s | %s |\n| DEL | %s | %s | %s |\n", fmtMs(floor.median).c_str(),
              fmtMs(warn.median).c_str(), fmtMs(pAdd.median).c_str(), fmtMs(fDel.median).c_str(),
              fmtMs(dDel.median).c_str(), fmtMs(pDel.median).c_str());
  // Within the noise of the floor itself, a ratio of the two would mean nothing.
  const std::string peerVsOurs = oursAbove > 0.5 ? fmtRatio(peerAbove, oursAbove) + " ibcni's"
                                                 : "ibcni is at the floor, within its noise";
  std::printf("| ADD+DEL above the floor | | %s | %s (%s) |\n", fmtMs(oursAbove).c_str(), fmtMs(peerAbove).c_str(),
              peerVsOurs.c_str());
  std::printf("| ADD+DEL, ratio to host-device's | %.2f | %.2f | 1 |\n", floorAddDel / (pAdd.median + pDel.median),
              (warn.median + dDel.median) / (pAdd.median + pDel.median));
  return true;
}

// ---------------------------------------------------------------------------------------------

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
  Options o;
  Paths p;
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
  g_hostNs = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  std::string diskTmpl = diskParent + "/cni-bench-XXXXXX";
  char shmTmpl[] = "/dev/shm/cni-bench-XXXXXX";
  if (g_hostNs < 0 || ::mkdtemp(diskTmpl.data()) == nullptr || ::mkdtemp(shmTmpl) == nullptr) {
    fatal("set-up: " + diskTmpl);
  }
  p.disk = diskTmpl;
  p.tmpfs = shmTmpl;
  g_nsDir = p.tmpfs + "/netns";
  fs::create_directories(g_nsDir);
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
  std::error_code ec;
  fs::remove_all(p.disk, ec);
  fs::remove_all(p.tmpfs, ec);
  if (!ok) {
    verdict(false, "a part could not complete (see above)");
  }
  std::printf("\n");
  for (const auto& v : g_verdicts) {
    std::printf("%s\n", v.c_str());
  }
  return g_ok ? 0 : 1;
}
