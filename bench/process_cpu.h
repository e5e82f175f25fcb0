// SPDX-License-Identifier: Apache-2.0
// The CPU time a bench's phase cost each program it runs: its running descendants' user and system
// time (/proc/<pid>/stat) by program name, the children it waited for (getrusage RUSAGE_CHILDREN:
// the plugin runs), and its own threads. Read before and after the phase; the difference is the
// phase's. What dominates a storm on a machine of few cores is whose CPU it waits for.
#pragma once

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace ibcni::bench {

/// CPU seconds by program name; "(waited children)" and "(this process)" beside the names.
using CpuByProgram = std::map<std::string, double>;

namespace detail {

struct ProcStat {
  int ppid = 0;
  std::string name;
  double cpu = 0;  ///< user + system, seconds
};

// /proc/<pid>/stat: "pid (comm) state ppid ... utime stime ..." (utime and stime fields 14, 15).
inline bool readProcStat(const std::string& pid, ProcStat& out) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string line;
  if (!std::getline(in, line)) {
    return false;
  }
  const auto open = line.find('(');
  const auto close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) {
    return false;
  }
  out.name = line.substr(open + 1, close - open - 1);
  std::istringstream rest(line.substr(close + 2));
  std::string state;
  rest >> state >> out.ppid;
  std::string skip;
  for (int field = 5; field < 14; ++field) {
    rest >> skip;
  }
  unsigned long long utime = 0;
  unsigned long long stime = 0;
  rest >> utime >> stime;
  out.cpu = static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  return static_cast<bool>(rest);
}

inline double seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; }

}  // namespace detail

/// The CPU time so far of this process, the children it waited for, and its running descendants.
[[nodiscard]] inline CpuByProgram cpuByProgram() {
  std::map<int, detail::ProcStat> all;
  if (DIR* d = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(d)) {
      const std::string pid = e->d_name;
      detail::ProcStat s;
      if (pid.find_first_not_of("0123456789") == std::string::npos && detail::readProcStat(pid, s)) {
        all.emplace(std::stoi(pid), s);
      }
    }
    ::closedir(d);
  }
  CpuByProgram cpu;
  std::vector<int> parents{::getpid()};
  while (!parents.empty()) {
    const int parent = parents.back();
    parents.pop_back();
    for (const auto& [pid, s] : all) {
      if (s.ppid == parent) {
        cpu[s.name] += s.cpu;
        parents.push_back(pid);
      }
    }
  }
  rusage children{};
  rusage self{};
  ::getrusage(RUSAGE_CHILDREN, &children);
  ::getrusage(RUSAGE_SELF, &self);
  cpu["(waited children)"] = detail::seconds(children.ru_utime) + detail::seconds(children.ru_stime);
  cpu["(this process)"] = detail::seconds(self.ru_utime) + detail::seconds(self.ru_stime);
  return cpu;
}

/// "kube-apiserver 4.2 s, etcd 3.1 s, ...": what each program spent from `before` to `after`,
/// most first; programs that spent less than 0.05 s left out.
[[nodiscard]] inline std::string cpuSpent(const CpuByProgram& before, const CpuByProgram& after) {
  std::vector<std::pair<double, std::string>> spent;
  for (const auto& [name, s] : after) {
    const auto b = before.find(name);
    const double d = s - (b == before.end() ? 0.0 : b->second);
    if (d >= 0.05) {
      spent.emplace_back(d, name);
    }
  }
  std::sort(spent.rbegin(), spent.rend());
  std::string out;
  char buf[96];
  for (const auto& [d, name] : spent) {
    std::snprintf(buf, sizeof buf, "%s%s %.1f s", out.empty() ? "" : ", ", name.c_str(), d);
    out += buf;
  }
  return out.empty() ? "none" : out;
}

}  // namespace ibcni::bench
