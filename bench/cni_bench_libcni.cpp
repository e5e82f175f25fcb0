// SPDX-License-Identifier: Apache-2.0
// cni_bench's libcni part: ADD+DEL through libcni (AddNetworkList/DelNetworkList) in one
// long-lived process, as a runtime is: bench/libcni_driver, timing each call with Go's monotonic
// clock.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "cni_bench.h"

namespace ibcni::bench {

namespace {

using nlohmann::json;

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

}  // namespace

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
      std::optional<TestNetns> ns = makeNetns("libcni-" + std::to_string(i) + "-" + std::to_string(c));
      const std::string cid = "libcni-" + std::to_string(c) + "-" + std::to_string(i);
      const std::string args = kContenders[c].driverName + " " + ns->path() + " " + cid + " " + kIfName;
      DriverReply add = ask(d, "add " + args);
      DriverReply del = ask(d, "del " + args);
      ns.reset();
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
  const CycleStats s = summarize(fig);
  printContenderHeader(std::to_string(o.cycles) + " cycles, libcni");
  printCycleRows(s, "AddNetworkList", "DelNetworkList");
  if (o.targets) {
    speedVerdict("libcni", s.addDel, o.targetRatio);
  }
  return true;
}

}  // namespace ibcni::bench
