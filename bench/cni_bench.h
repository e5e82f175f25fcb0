// SPDX-License-Identifier: Apache-2.0
// cni_bench's parts (cni_bench.cpp describes them) and what they share: the contenders and their
// configurations, running a plugin as a runtime does (tests/support/exec_program.h), pod netns
// (tests/support/test_netns.h), and the report.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "bench_stats.h"
#include "support/exec_program.h"
#include "support/test_netns.h"

namespace ibcni::bench {

using Clock = std::chrono::steady_clock;
using testing::ProgramRun;
using testing::TestNetns;

/// Prints "cni_bench: what" and exits 2 (a usage or set-up error).
[[noreturn]] void fatal(const std::string& what);

// ---- Processes, namespaces, links

/// NULL-terminated pointers into `v`, for execve.
[[nodiscard]] std::vector<char*> cstrings(const std::vector<std::string>& v);

/// fork + execve as a runtime does: exactly `env`, the input on a stdin pipe, stdout and stderr
/// read to the end, then wait4. ProgramRun::elapsed() runs from just before fork to wait4's return.
[[nodiscard]] ProgramRun run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                             const std::string& input);

/// A fresh network namespace bind-mounted at a path, as `ip netns add` makes one (under $TMPDIR,
/// which main() points into the bench's tmpfs directory); removed when destroyed.
[[nodiscard]] TestNetns makeNetns(const std::string& name);

/// Runs `command` through the shell; fatal() when it fails.
void sh(const std::string& command);

/// True when the link `name` is in the bench's "host" netns.
[[nodiscard]] bool linkInHost(const std::string& name);

/// The first IP address (without prefix) of a CNI result; empty if none.
[[nodiscard]] std::string firstAddress(const std::string& resultJson);

// ---- Contenders

enum class Kind { kIbcni, kHostDevice, kIbcniHostLocal };

struct Paths {
  std::string ibcni;
  std::string ref;
  std::string floor;
  std::string driver;
  std::string disk;   // stateDir, host-local dataDir
  std::string tmpfs;  // ibcni-ipam dataDir
  std::string noEvents;  // ibcni built without the call event (the events part's B side)
};

struct Contender {
  Kind kind;
  std::string label;
  std::string driverName;  // in libcni_driver's list
};

extern const std::vector<Contender> kContenders;

inline constexpr const char* kDevice = "bvf0";
inline constexpr const char* kIfName = "net1";

[[nodiscard]] nlohmann::json pluginConfig(Kind kind, const Paths& p, const std::string& network,
                                          const std::string& subnet, const std::string& device,
                                          const std::string& logLevel = "");
[[nodiscard]] std::string binaryFor(Kind kind, const Paths& p);
[[nodiscard]] std::string cniPathFor(const Paths& p);
[[nodiscard]] std::vector<std::string> cniEnv(const char* verb, const std::string& cid, const std::string& netns,
                                              const std::string& ifName, const Paths& p);

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

struct CycleFigures {
  std::vector<double> add;
  std::vector<double> del;
  std::vector<double> addDel;
  std::vector<double> addRss;
  std::vector<double> delRss;
};

/// The statistics of each figure, one Stats per contender.
struct CycleStats {
  std::vector<Stats> add;
  std::vector<Stats> del;
  std::vector<Stats> addDel;
  std::vector<Stats> addRss;
  std::vector<Stats> delRss;
};

[[nodiscard]] CycleStats summarize(const std::vector<CycleFigures>& figures);

// ---- Reporting

/// Records a PASS or FAIL line, printed at the end; one FAIL makes the exit status 1.
void verdict(bool pass, const std::string& what);
/// The verdict on `part`'s goal: ibcni's ADD+DEL median `goal` times host-device's or faster.
void speedVerdict(const char* part, const std::vector<Stats>& addDel, double goal);
[[nodiscard]] bool allPassed();
[[nodiscard]] const std::vector<std::string>& verdicts();

[[nodiscard]] std::string fmtMs(double v);
[[nodiscard]] std::string fmtRatio(double num, double den);
[[nodiscard]] std::string mib(long kib);
void printFailure(const std::string& what, const ProgramRun& e);

/// "| first | <each contender> | host-device / ibcni |" and the separator line.
void printContenderHeader(const std::string& first);
/// One row of a contender table: `field` of each contender's Stats, and host-device's over ibcni's.
void printContenderRow(const std::string& name, const std::vector<Stats>& s, double Stats::*field);
/// The median and p99 rows of ADD (named `add`), DEL (named `del`) and ADD+DEL.
void printCycleRows(const CycleStats& s, const std::string& add, const std::string& del);

// ---- The parts; each returns false when it could not complete.

bool execPart(const Paths& p, const Options& o);
bool libcniPart(const Paths& p, const Options& o);
bool concurrentPart(const Paths& p, const Options& o);
bool breakdownPart(const Paths& p, const Options& o);
bool eventsPart(const Paths& p, const Options& o);

}  // namespace ibcni::bench
