// SPDX-License-Identifier: Apache-2.0
// ibcni_chaos: seeded randomized schedules of operations and faults over 4-12 simulated nodes,
// against real ibcni-ipam processes, a real etcd and a real kube-apiserver over it, with the
// cluster pool's invariants checked after every step (tests/chaos/README.md).
//
//   ibcni_chaos --plugin PATH --backend etcd|kubernetes [--seed N] [--schedules N | --seconds T]
//               [--steps N] [--nodes-min 4 --nodes-max 12] [--profile NAME] [--compat baseline]
//               [--replay FILE] [--plant same-node-name|skip-guid-record] [--out DIR] [--jobs N]
//               [--expect KIND] [--guid-driver PATH]
//
// Exit status: 0 no violation (with --expect: the expected one found and shrunk); 1 a violation
// (with --expect: not found); 2 usage; 77 this host cannot run it (not root, no etcd, no
// libfaketime, no kube-apiserver built or no Node.js for the fault proxy), saying why.
#include <elf.h>
#include <glob.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "generator.h"
#include "invariants.h"
#include "report.h"
#include "runner.h"
#include "shrink.h"
#include "support/etcd_cluster.h"

#ifndef IBCNI_CHAOS_KILL_SHIM
#define IBCNI_CHAOS_KILL_SHIM ""
#endif

namespace ibcni::chaos {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kSkip = 77;

std::atomic<bool> gStop{false};

struct Options {
  std::string plugin;
  std::string backend = "etcd";
  std::optional<std::uint64_t> seed;
  long schedules = -1;
  double seconds = -1;
  int steps = 30;
  int nodesMin = 4;
  int nodesMax = 12;
  std::string profile = "all";
  bool baseline = false;
  std::string replay;
  std::string plant;
  std::string out = "chaos-out";
  int jobs = 1;
  int tries = 3;
  double shrinkSeconds = 600;
  std::string expect;
  std::string find;       ///< only a violation of this kind stops the run (others are counted)
  bool keepGoing = false; ///< no violation stops the run (none is shrunk)
  std::string shim = IBCNI_CHAOS_KILL_SHIM;
  std::string guidDriver;  ///< empty: ibcni-guidpool-preloadable beside the plugin
  bool verbose = false;
};

constexpr const char* kUsage =
    "usage: ibcni_chaos --plugin PATH [--backend etcd|kubernetes] [--seed N] [--schedules N | --seconds T]\n"
    "                   [--steps N] [--nodes-min N] [--nodes-max N] [--profile NAME] [--compat baseline|new]\n"
    "                   [--replay FILE] [--plant same-node-name|skip-guid-record] [--out DIR] [--jobs N]\n"
    "                   [--tries N] [--shrink-seconds S] [--expect KIND] [--find KIND] [--keep-going]\n"
    "                   [--shim PATH] [--guid-driver PATH] [--verbose]\n"
    "  --guid-driver PATH  the GUID networks' program (default: ibcni-guidpool-preloadable beside the\n"
    "                plugin; without one no schedule has GUID networks)\n"
    "  --find KIND   only a violation of KIND stops the run and is shrunk; others are counted\n"
    "  --keep-going  no violation stops the run (each is counted and named, none shrunk)\n"
    "  --expect KIND exit 0 only when a violation of KIND was found and shrunk\n";

std::string profileList() {
  std::string s;
  for (const auto& p : profiles()) {
    s += "  " + p.name + std::string(10 - std::min<std::size_t>(9, p.name.size()), ' ') + p.purpose + "\n";
  }
  return s;
}

// Reads one option's value; false on a missing value.
bool take(int& i, int argc, char** argv, std::string& value) {
  if (i + 1 >= argc) {
    return false;
  }
  value = argv[++i];
  return true;
}

std::optional<Options> parseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string v;
    if (a == "--verbose" || a == "--keep-going") {
      (a == "--verbose" ? o.verbose : o.keepGoing) = true;
      continue;
    }
    if (a == "--help" || a == "-h" || !take(i, argc, argv, v)) {
      return std::nullopt;
    }
    if (a == "--plugin") o.plugin = v;
    else if (a == "--backend") o.backend = v;
    else if (a == "--seed") o.seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--schedules") o.schedules = std::atol(v.c_str());
    else if (a == "--seconds") o.seconds = std::atof(v.c_str());
    else if (a == "--steps") o.steps = std::atoi(v.c_str());
    else if (a == "--nodes-min") o.nodesMin = std::atoi(v.c_str());
    else if (a == "--nodes-max") o.nodesMax = std::atoi(v.c_str());
    else if (a == "--profile") o.profile = v;
    else if (a == "--compat") o.baseline = v == "baseline";
    else if (a == "--replay") o.replay = v;
    else if (a == "--plant") o.plant = v;
    else if (a == "--out") o.out = v;
    else if (a == "--jobs") o.jobs = std::max(1, std::atoi(v.c_str()));
    else if (a == "--tries") o.tries = std::max(1, std::atoi(v.c_str()));
    else if (a == "--shrink-seconds") o.shrinkSeconds = std::atof(v.c_str());
    else if (a == "--expect") o.expect = v;
    else if (a == "--find") o.find = v;
    else if (a == "--shim") o.shim = v;
    else if (a == "--guid-driver") o.guidDriver = v;
    else return std::nullopt;
  }
  auto known = [](const std::string& k) {
    return k.empty() || std::find(violationKinds().begin(), violationKinds().end(), k) != violationKinds().end();
  };
  const bool kindKnown = known(o.expect) && known(o.find);
  if (o.plugin.empty() || (o.backend != "etcd" && o.backend != "kubernetes") || findProfile(o.profile) == nullptr ||
      o.nodesMin < 2 || o.nodesMax < o.nodesMin || o.steps < 1 || !kindKnown ||
      (!o.plant.empty() && o.plant != "same-node-name" && o.plant != "skip-guid-record")) {
    return std::nullopt;
  }
  if (o.find.empty()) {
    o.find = o.expect;  // --expect KIND: the other kinds do not stop the run either
  }
  if (o.schedules < 0 && o.seconds < 0) {
    o.schedules = 100;
  }
  return o;
}

std::string findFaketime() {
  for (const char* pattern : {"/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib*/faketime/libfaketime.so.1",
                              "/usr/local/lib*/faketime/libfaketime.so.1"}) {
    glob_t g{};
    const bool found = ::glob(pattern, 0, nullptr, &g) == 0 && g.gl_pathc > 0;
    const std::string path = found ? g.gl_pathv[0] : "";
    ::globfree(&g);
    if (found) {
      return path;
    }
  }
  return {};
}

// Whether `path` is an ELF program with an interpreter (the dynamic loader): only then do the kill
// shim and libfaketime, both LD_PRELOADed, reach it. A static program ignores LD_PRELOAD, and its
// schedules would run without a single kill or clock fault.
bool isDynamicProgram(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  Elf64_Ehdr eh{};
  if (!in.read(reinterpret_cast<char*>(&eh), sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64) {
    return false;
  }
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    in.seekg(static_cast<std::streamoff>(eh.e_phoff + i * static_cast<std::uint64_t>(eh.e_phentsize)));
    if (!in.read(reinterpret_cast<char*>(&ph), sizeof ph)) {
      return false;
    }
    if (ph.p_type == PT_INTERP) {
      return true;
    }
  }
  return false;
}

// Why this host cannot run the checker ("" when it can).
std::string cannotRun(const Options& o, const std::string& backend, Tools& tools) {
  if (::geteuid() != 0) {
    return "needs root: every pod is a process with a network namespace of its own (unshare(CLONE_NEWNET))";
  }
  if (!testing::findProgram("etcd") || !testing::findProgram("etcdctl")) {
    return "needs Debian's etcd-server and etcd-client (etcd, etcdctl in PATH)";
  }
  tools.faketime = findFaketime();
  if (tools.faketime.empty()) {
    return "needs libfaketime (Debian's package libfaketime: /usr/lib/<arch>/faketime/libfaketime.so.1)";
  }
  if (backend == "kubernetes" && !testing::ControlPlane::built()) {
    return std::string("the kubernetes backend needs kube-apiserver: ") + testing::ControlPlane::kNotBuilt;
  }
  if (backend == "kubernetes" && !testing::findProgram("node")) {
    return "the kubernetes backend needs Node.js for the API fault proxy (tests/support/control-plane/api_proxy.js)";
  }
  (void)o;
  return {};
}

// A private directory for the data dirs (tmpfs when there is one) and a run ID.
bool makeRoot(Tools& tools, std::uint64_t seed) {
  std::string tmpl = (fs::exists("/dev/shm") ? std::string("/dev/shm") : std::string("/tmp")) + "/ibcni-chaos.XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return false;
  }
  tools.root = tmpl;
  char id[16];
  std::snprintf(id, sizeof id, "%04x", static_cast<unsigned>(mixSeed(seed ^ static_cast<std::uint64_t>(::getpid())) & 0xffff));
  tools.runId = id;
  return true;
}

void log(const std::string& line) {
  static std::mutex m;
  const std::lock_guard lock(m);
  std::cout << line << std::endl;
}

struct Shared {
  Shared(const Options& o, const Tools& t, std::uint64_t s) : options(o), tools(t), seed(s) {
    summary.backend = o.backend;
    summary.plugin = o.plugin;
    summary.baseline = o.baseline;
    summary.profile = o.profile;
    summary.seed = s;
  }
  const Options& options;
  const Tools& tools;
  std::uint64_t seed;
  Clock::time_point started = Clock::now();
  std::atomic<long> next{0};
  std::mutex m;
  RunSummary summary;
  std::optional<std::string> report;
  std::optional<std::string> foundKind;
  std::atomic<bool> found{false};  ///< a violation was found: no new schedule starts
  bool shrunk = false;
  std::string fatal;
};

bool budgetLeft(Shared& s, long index) {
  if (gStop) {
    return false;
  }
  if (s.options.schedules >= 0 && index >= s.options.schedules) {
    return false;
  }
  return s.options.seconds < 0 ||
         std::chrono::duration<double>(Clock::now() - s.started).count() < s.options.seconds;
}

void recordSchedule(Shared& s, const RunResult& r, long index) {
  const std::lock_guard lock(s.m);
  ++s.summary.schedules;
  s.summary.steps += static_cast<long>(r.schedule.steps.size());
  s.summary.secondsPerSchedule.push_back(r.seconds);
  if (s.options.verbose) {
    std::ostringstream line;
    line << "schedule " << index << " seed " << r.schedule.params.seed << ": " << r.schedule.steps.size()
         << " steps, " << r.seconds << " s" << (r.violation ? ", VIOLATION " + r.violation->kind : "");
    log(line.str());
  } else if (s.summary.schedules % 10 == 0) {
    log("[" + std::to_string(s.summary.schedules) + " schedules, " + std::to_string(s.summary.steps) + " steps]");
  }
}

// Counts a violation; true when it is the one that stops the run (--find, --keep-going).
bool countViolation(Shared& s, const RunResult& r, long index) {
  const std::lock_guard lock(s.m);
  ++s.summary.violations;
  ++s.summary.violationsByKind[r.violation->kind];
  if (s.summary.firstViolationSchedule < 0) {
    s.summary.firstViolationSchedule = index;
    s.summary.firstViolationSeconds = std::chrono::duration<double>(Clock::now() - s.started).count();
  }
  const bool stops = !s.options.keepGoing && (s.options.find.empty() || s.options.find == r.violation->kind);
  if (!stops) {
    log("violation " + r.violation->kind + " in schedule " + std::to_string(index) + " (seed " +
        std::to_string(r.schedule.params.seed) + ", step " + std::to_string(r.violation->step) + "): " +
        r.violation->message.substr(0, 300));
  }
  return stops;
}

// A violation found by this worker: shrink it (unless another worker already reports one).
void handleViolation(Shared& s, Runner& runner, const RunResult& r) {
  {
    const std::lock_guard lock(s.m);
    if (s.foundKind) {
      return;
    }
    s.foundKind = r.violation->kind;
    s.found = true;
  }
  const double found = std::chrono::duration<double>(Clock::now() - s.started).count();
  log("VIOLATION " + r.violation->kind + " in schedule seed " + std::to_string(r.schedule.params.seed) + ": " +
      r.violation->message + "\nshrinking (ddmin, up to " + std::to_string(s.options.tries) +
      " tries per candidate)...");
  Stats shrinkStats;  // the summary counts the schedules drawn, not the shrinker's replays
  Runner replays(runner.backend(), s.tools, shrinkStats, gStop);
  const ShrinkResult small = shrink(replays, r, s.options.tries, s.options.shrinkSeconds, log);
  const std::lock_guard lock(s.m);
  s.report = violationReport(r, &small, s.options.out, s.options.plugin, found);
  s.shrunk = small.run.violation && small.run.violation->kind == r.violation->kind;
}

void worker(Shared& s, int job) {
  Backend backend;
  Stats stats;
  try {
    const std::string dir = s.tools.root + "/job-" + std::to_string(job);
    fs::create_directories(dir);
    if (auto r = backend.start(s.options.backend, dir); !r) {
      throw std::runtime_error(r.error());
    }
    Runner runner(backend, s.tools, stats, gStop);
    ScheduleParams base;
    base.backend = s.options.backend;
    base.baseline = s.options.baseline;
    base.plant = s.options.plant;
    base.profile = s.options.profile;
    for (long i = s.next++; budgetLeft(s, i) && !s.found; i = s.next++) {
      ScheduleParams params = drawParams(base, s.options.nodesMin, s.options.nodesMax, mixSeed(mixSeed(s.seed) + static_cast<std::uint64_t>(i)));
      params.guids = params.guids && !s.tools.guidDriver.empty();
      const RunResult r = runner.generate(params, s.options.steps);
      recordSchedule(s, r, i);
      if (r.violation && countViolation(s, r, i)) {
        handleViolation(s, runner, r);
      }
    }
  } catch (const std::exception& e) {
    const std::lock_guard lock(s.m);
    s.fatal = e.what();
    gStop = true;
  }
  const std::lock_guard lock(s.m);
  s.summary.stats.merge(stats);
}

int runRandom(const Options& o, const Tools& tools) {
  const std::uint64_t seed = o.seed ? *o.seed : std::random_device{}();
  Shared s(o, tools, seed);
  log("ibcni_chaos: backend " + o.backend + ", plugin " + o.plugin + (o.baseline ? " (baseline)" : "") +
      ", profile " + o.profile + ", seed " + std::to_string(seed) + ", " + std::to_string(o.steps) +
      " steps per schedule, " + std::to_string(o.nodesMin) + "-" + std::to_string(o.nodesMax) + " nodes" +
      (o.plant.empty() ? "" : ", planted bug " + o.plant));
  std::vector<std::thread> workers;
  for (int j = 0; j < o.jobs; ++j) {
    workers.emplace_back(worker, std::ref(s), j);
  }
  for (auto& t : workers) {
    t.join();
  }
  s.summary.wallSeconds = std::chrono::duration<double>(Clock::now() - s.started).count();
  if (s.report) {
    std::cout << *s.report;
  }
  std::cout << summaryText(s.summary);
  if (!s.fatal.empty()) {
    std::cout << "ibcni_chaos: stopped by an error of the test environment: " << s.fatal << "\n";
    return 2;
  }
  if (!o.expect.empty()) {
    const bool ok = s.foundKind == o.expect && s.shrunk;
    std::cout << (ok ? "expected violation " + o.expect + " found and shrunk\n"
                     : "expected violation " + o.expect + " NOT found (or not shrunk)\n");
    return ok ? 0 : 1;
  }
  return s.summary.violations == 0 ? 0 : 1;  // --find: the others count too
}

// One schedule file replayed on `backend`: 0 no violation, 1 a violation (reported), 2 unreadable.
int replayOne(const std::string& file, const Options& o, const Tools& tools, Backend& backend) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  auto schedule = Schedule::parse(text.str());
  if (!in || !schedule) {
    std::cerr << "ibcni_chaos: " << file << ": " << (schedule ? "cannot read" : schedule.error()) << "\n";
    return 2;
  }
  if (schedule->params.guids && tools.guidDriver.empty()) {
    std::cerr << "ibcni_chaos: " << file << " has GUID networks, and there is no GUID driver (--guid-driver)\n";
    return 2;
  }
  if (!backend.started()) {
    if (auto r = backend.start(schedule->params.backend, tools.root); !r) {
      std::cerr << "ibcni_chaos: " << r.error() << "\n";
      return 2;
    }
  }
  Stats stats;
  Runner runner(backend, tools, stats, gStop);
  const RunResult r = runner.replay(*schedule);
  if (!r.violation) {
    std::cout << "replay of " << file << ": no violation (" << r.schedule.steps.size() << " steps, " << r.seconds
              << " s)\n";
    for (std::size_t i = 0; i < r.schedule.steps.size(); ++i) {
      std::cout << "    " << stepLine(i + 1, r.schedule.steps[i], true) << "\n";
    }
    std::cout << "    " << r.end << "\n";
    return 0;
  }
  std::cout << violationReport(r, nullptr, o.out, o.plugin, r.seconds);
  return 1;
}

// --replay FILE, or --replay DIR: every DIR/*.schedule in name order (one backend of each kind,
// started once); the worst status of them.
int runReplay(const Options& o, const Tools& tools) {
  std::vector<std::string> files;
  if (fs::is_directory(o.replay)) {
    for (const auto& e : fs::directory_iterator(o.replay)) {
      if (e.path().extension() == ".schedule") {
        files.push_back(e.path().string());
      }
    }
    std::ranges::sort(files);
    if (files.empty()) {
      std::cerr << "ibcni_chaos: " << o.replay << ": no *.schedule file\n";
      return 2;
    }
  } else {
    files.push_back(o.replay);
  }
  std::map<std::string, Backend> backends;  // by kind
  int worst = 0;
  for (const auto& file : files) {
    std::ifstream in(file);
    std::string line;
    std::string kind = "etcd";
    while (std::getline(in, line)) {
      if (line.starts_with("backend ")) {
        kind = line.substr(8);
        break;
      }
    }
    worst = std::max(worst, replayOne(file, o, tools, backends[kind]));
  }
  if (files.size() > 1) {
    std::cout << "ibcni_chaos: " << files.size() << " schedules replayed: "
              << (worst == 0 ? "no violation" : worst == 1 ? "VIOLATIONS (above)" : "some could not be read") << "\n";
  }
  return worst;
}

}  // namespace

}  // namespace ibcni::chaos

int main(int argc, char** argv) {
  using namespace ibcni::chaos;
  const auto options = parseArgs(argc, argv);
  if (!options) {
    std::cerr << kUsage << "profiles:\n" << profileList() << "violation kinds (--expect):";
    for (const auto& k : violationKinds()) {
      std::cerr << " " << k;
    }
    std::cerr << "\n";
    return 2;
  }
  Tools tools;
  tools.plugin = fs::absolute(options->plugin).string();
  tools.killShim = options->shim;
  if (::access(tools.plugin.c_str(), X_OK) != 0 || ::access(tools.killShim.c_str(), R_OK) != 0) {
    std::cerr << "ibcni_chaos: " << tools.plugin << " is not executable or the kill shim " << tools.killShim
              << " is missing (--shim)\n";
    return 2;
  }
  if (!isDynamicProgram(tools.plugin)) {
    std::cerr << "ibcni_chaos: " << tools.plugin << " is not a dynamically linked program: the kill shim and "
              << "libfaketime (LD_PRELOAD) would not reach it; give the build's ibcni-ipam-preloadable "
              << "(the same sources, linked dynamically)\n";
    return 2;
  }
  const std::string driver = options->guidDriver.empty()
                                 ? (fs::path(tools.plugin).parent_path() / "ibcni-guidpool-preloadable").string()
                                 : fs::absolute(options->guidDriver).string();
  if (::access(driver.c_str(), X_OK) == 0 && isDynamicProgram(driver)) {
    tools.guidDriver = driver;
  } else if (!options->guidDriver.empty() || options->plant == "skip-guid-record") {
    std::cerr << "ibcni_chaos: " << driver << " is no dynamically linked executable: give the build's "
              << "ibcni-guidpool-preloadable (--guid-driver)\n";
    return 2;
  }
  if (const std::string why = cannotRun(*options, options->backend, tools); !why.empty()) {
    std::cout << "ibcni_chaos: SKIPPED: " << why << "\n";
    return kSkip;
  }
  if (!makeRoot(tools, options->seed.value_or(0))) {
    std::cerr << "ibcni_chaos: cannot create a temporary directory\n";
    return 2;
  }
  struct sigaction sa{};
  sa.sa_handler = [](int) { gStop = true; };
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  int rc = 2;
  try {
    rc = options->replay.empty() ? runRandom(*options, tools) : runReplay(*options, tools);
  } catch (const std::exception& e) {
    std::cerr << "ibcni_chaos: " << e.what() << "\n";
  }
  std::error_code ec;
  fs::remove_all(tools.root, ec);
  return rc;
}
