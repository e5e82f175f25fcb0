// SPDX-License-Identifier: Apache-2.0
// ibcni-agent (`ibcni agent`): the node agent's long-running process. Every --interval seconds one
// reconcile pass (agent/reconcile.h) with the real dependencies, its report logged; /metrics and
// /healthz served on --metrics-listen (agent/metrics/). SIGTERM or SIGINT: it stops after the current
// pass (or at once between passes), closes the listener and exits 0. An executable of its own,
// linked with prometheus-cpp, so that the CNI plugin never loads it.
#include <pthread.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <optional>
#include <memory>
#include <string>
#include <variant>

#include "ibcni/os/time_text.h"
#include "lib/log/log.h"
#include "lib/version/version.h"
#include "plugin/agent/backend_calls.h"
#include "plugin/agent/metrics/agent_metrics.h"
#include "plugin/agent/metrics/metrics_server.h"
#include "plugin/agent/node_counts.h"
#include "plugin/agent/reconcile_report.h"
#include "plugin/cli/production_deps.h"
#include "plugin/cli/reconcile_args.h"
#include "plugin/state/file_attachment_store.h"

namespace ibcni::plugin {

namespace {

constexpr const char* kAgentUsage =
    "usage: ibcni agent [--interval SECONDS] [--metrics-listen ADDRESS:PORT] [--state-dir DIR]...\n"
    "                   [--ipam-data-dir DIR]... [--pool-index-dir DIR] [--dry-run] [--once]\n"
    "  The node agent: `ibcni reconcile`'s pass every --interval seconds, its\n"
    "  report on stdout, and Prometheus metrics at http://ADDRESS:PORT/metrics (/healthz: \"ok\").\n"
    "  Runs until SIGTERM or SIGINT (then exits 0 after the current pass).\n"
    "  --interval        seconds between passes (default 60; 0: no passes, metrics only)\n"
    "  --metrics-listen  where to serve /metrics and /healthz (default :9464, every IPv4 address)\n"
    "  --state-dir, --ipam-data-dir, --pool-index-dir, --dry-run: as `ibcni reconcile`'s\n"
    "  --once            one pass, then exit (status 1 when it failed something)\n"
    "  exit status: 0 stopped by a signal (or --once's pass failed nothing), 1 cannot listen or the pass\n"
    "  failed, 2 usage\n";

struct AgentArgs {
  ReconcileOptions options = defaultReconcileOptions();
  long long interval = 60;
  std::string listen = ":9464";
  bool once = false;
};

int usageError(const std::string& what) {
  std::fprintf(stderr, "ibcni agent: %s\n%s", what.c_str(), kAgentUsage);
  return 2;
}

// The command line (argv[0] is the program); an exit status when it is not one the agent takes.
std::variant<AgentArgs, int> parseAgentArgs(int argc, char** argv) {
  AgentArgs a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool hasValue = i + 1 < argc;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kAgentUsage, stdout);
      return 0;
    }
    if (arg == "--interval" && hasValue) {
      const std::string v = argv[++i];
      char* end = nullptr;
      errno = 0;
      a.interval = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno != 0 || a.interval < 0 || a.interval > 86400 * 365) {
        return usageError("--interval " + v + ": not a number of seconds (0 or more; 0: metrics only)");
      }
    } else if (arg == "--metrics-listen" && hasValue) {
      a.listen = argv[++i];
      if (auto p = metrics::listeningPort(a.listen); !p) {
        return usageError(p.error().msg);
      }
    } else if (arg == "--once") {
      a.once = true;
    } else if (!takeReconcileOption(argc, argv, i, a.options)) {
      const bool takesValue = arg == "--interval" || arg == "--metrics-listen" || arg == "--state-dir" ||
                              arg == "--ipam-data-dir" || arg == "--pool-index-dir";
      return usageError(takesValue ? arg + ": missing its value (or an empty DIR)" : arg + ": not an option");
    }
  }
  defaultReconcileDirs(a.options);
  return a;
}

std::string now() { return os::rfc3339(std::chrono::system_clock::now()); }

// One pass: reconciled, logged on stdout, counted. @return whether it failed something.
bool runPass(const ReconcileOptions& options, Deps& deps, metrics::AgentMetrics& m) {
  ReconcileReport report;
  try {
    report = reconcile(options, deps);
  } catch (const std::exception& e) {
    report.errors.push_back(std::string("the pass stopped: ") + e.what());
  }
  const std::string out = doctor::renderReconcileText(report, now());
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  m.recordPass(report, std::chrono::system_clock::now());
  return report.failed();
}

// Waits up to `seconds` (negative: without end) for SIGTERM or SIGINT, blocked in every thread.
// @return whether one came.
bool stopSignal(const sigset_t& stop, long long seconds) {
  for (;;) {
    int sig = 0;
    if (seconds < 0) {
      sig = sigwaitinfo(&stop, nullptr);
    } else {
      const timespec t{static_cast<time_t>(seconds), 0};
      sig = sigtimedwait(&stop, nullptr, &t);
    }
    if (sig > 0) {
      return true;
    }
    if (errno != EINTR) {
      return false;  // EAGAIN: the time passed
    }
  }
}

int runAgentLoop(const AgentArgs& a, const sigset_t& stop) {
  std::optional<metrics::AgentMetrics> m;
  const auto dirs = a.options;
  m.emplace([dirs] {
    NodeCounts c;
    countAttachments(
        dirs.stateDirs, [](const std::string& d) { return std::make_unique<state::FileAttachmentStore>(d); }, c);
    countPools(dirs.ipamDataDirs, std::chrono::milliseconds(500), c);
    return c;
  });
  ProductionDeps production([&m](ipam::BackendFactory inner) {
    return countingBackends(std::move(inner), [&m](std::string_view b, std::string_view op, std::string_view r) {
      m->recordBackendCall(b, op, r);
    });
  });
  auto server = metrics::MetricsServer::start(a.listen, *m);
  if (!server) {
    std::fprintf(stderr, "ibcni agent: %s (%s)\n", server.error().msg.c_str(), server.error().details.c_str());
    return 1;
  }
  metrics::MetricsServer::setHealthy(true);
  std::fprintf(stdout, "%s ibcni agent: serving /metrics and /healthz on %s (port %d), %s\n", now().c_str(),
               a.listen.c_str(), (*server)->port(),
               a.once           ? "one reconcile pass (--once)"
               : a.interval > 0 ? ("a reconcile pass every " + std::to_string(a.interval) + " s").c_str()
                                : "no reconcile passes (--interval 0)");
  std::fflush(stdout);
  bool failed = false;
  for (;;) {
    if (a.interval > 0 || a.once) {
      failed = runPass(a.options, production.deps(), *m);
    }
    if (a.once || stopSignal(stop, a.interval > 0 ? a.interval : -1)) {
      break;
    }
  }
  metrics::MetricsServer::setHealthy(false);
  server->reset();
  std::fprintf(stdout, "%s ibcni agent: stopped\n", now().c_str());
  return a.once && failed ? 1 : 0;
}

int runAgentMain(int argc, char** argv) {
  if (isVersionRequest(argc, argv)) {
    std::puts(versionLine("ibcni-agent").c_str());
    return 0;
  }
  auto parsed = parseAgentArgs(argc, argv);
  if (auto* status = std::get_if<int>(&parsed)) {
    return *status;
  }
  // Blocked before any thread starts (the listener's inherit the mask): only the loop takes them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  (void)log::setup(log::Level::kWarn, "", log::Context{"RECONCILE", "", "", ""});
  try {
    return runAgentLoop(std::get<AgentArgs>(parsed), stop);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ibcni agent: %s\n", e.what());
    return 1;
  }
}

}  // namespace
}  // namespace ibcni::plugin

int main(int argc, char** argv) { return ibcni::plugin::runAgentMain(argc, argv); }
