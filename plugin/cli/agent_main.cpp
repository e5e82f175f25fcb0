// SPDX-License-Identifier: Apache-2.0
// ibcni-agent (`ibcni agent`): the node agent's long-running process. Every --interval seconds one
// reconcile pass (agent/reconcile.h) with the real dependencies, its report logged; /metrics and
// /healthz served on --metrics-listen (agent/metrics/). SIGTERM or SIGINT: it stops after the current
// pass (or at once between passes), closes the listener and exits 0. An executable of its own,
// linked with prometheus-cpp, so that the CNI plugin never loads it.
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <expected>
#include <optional>
#include <memory>
#include <mutex>
#include <string>

#include "ibcni/config/net_conf.h"
#include "ibcni/os/time_text.h"
#include "ibcni/os/unique_fd.h"
#include "lib/http/relay_socket.h"
#include "lib/log/log.h"
#include "ipam/backend_calls.h"
#include "plugin/agent/cni_events.h"
#include "plugin/agent/metrics/agent_metrics.h"
#include "plugin/agent/metrics/metrics_server.h"
#include "plugin/agent/node_counts.h"
#include "plugin/agent/pod_ports.h"
#include "plugin/agent/reconcile_report.h"
#include "plugin/cli/command_line.h"
#include "plugin/cli/production_deps.h"
#include "plugin/cli/production_http.h"
#include "plugin/cli/reconcile_args.h"
#include "plugin/cli/stop_signals.h"
#include "plugin/state/file_attachment_store.h"

namespace ibcni::plugin {

namespace {

struct AgentArgs {
  ReconcileOptions options;
  long long interval = 60;
  std::string listen = ":9464";
  bool once = false;
  std::string hostRoot = {};  ///< empty: the agent stays in its own namespaces
  std::string relaySocket = std::string(http::kDefaultRelaySocket);  ///< empty: none served
};

// The command line's values (parsed against kAgentFlags); a usage problem when one is not a value
// the agent takes.
std::expected<AgentArgs, UsageProblem> agentArgs(const CommandLine& line) {
  auto options = reconcileOptions(line);
  if (!options) {
    return std::unexpected(options.error());
  }
  AgentArgs a{.options = std::move(*options), .once = line.has(kAgentOnceFlag)};
  if (const auto v = line.value(kAgentIntervalFlag)) {
    char* end = nullptr;
    errno = 0;
    a.interval = std::strtoll(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0' || errno != 0 || a.interval < 0 || a.interval > 86400 * 365) {
      return std::unexpected(
          UsageProblem{"--interval " + *v + ": not a number of seconds (0 or more; 0: metrics only)"});
    }
  }
  if (const auto v = line.value(kAgentListenFlag)) {
    a.listen = *v;
    if (auto p = metrics::listeningPort(a.listen); !p) {
      return std::unexpected(UsageProblem{p.error().msg});
    }
  }
  a.hostRoot = line.value(kAgentHostRootFlag).value_or("");
  if (line.has(kAgentHostRootFlag) && a.hostRoot.empty()) {
    return std::unexpected(UsageProblem{"--host-root \"\": name the node's / as mounted here"});
  }
  if (const auto v = line.value(kAgentRelaySocketFlag)) {
    a.relaySocket = *v;
    if (!a.relaySocket.empty() && a.relaySocket.front() != '/') {
      return std::unexpected(UsageProblem{"--http-relay-socket " + *v + ": name an absolute path (\"\": none)"});
    }
  }
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

// --host-root: checks that PID 1's / is `hostRoot` (with hostPID, PID 1 is the node's init; without
// it, the pod's own, whose view would show no pod's netns path and make every pod look dead), then
// enters PID 1's mount namespace. Must run before any thread starts (setns refuses a mount
// namespace to a multi-threaded process). @return PID 1's network namespace, for setns later
// (the listener is made in the pod's own first).
cni::Result<os::UniqueFd> enterNodeMountNamespace(const std::string& hostRoot) {
  struct stat want {};
  struct stat got {};
  if (::stat((hostRoot + "/").c_str(), &want) != 0) {
    return cni::fail(cni::Errc::kIoFailure, "cannot stat --host-root " + hostRoot, std::strerror(errno));
  }
  if (::stat("/proc/1/root/", &got) != 0) {
    return cni::fail(cni::Errc::kIoFailure, "cannot see PID 1's root", std::string(std::strerror(errno)) +
                     ": the pod needs hostPID, CAP_SYS_PTRACE, and no AppArmor/SELinux confinement that forbids it");
  }
  if (got.st_dev != want.st_dev || got.st_ino != want.st_ino) {
    return cni::fail(cni::Errc::kInvalidConfig, "PID 1's / is not the node's root (--host-root " + hostRoot + ")",
                     "the pod needs hostPID: true, and --host-root (hostPaths.hostRoot) must be the node's /");
  }
  os::UniqueFd mnt(::open("/proc/1/ns/mnt", O_RDONLY | O_CLOEXEC));
  os::UniqueFd net(::open("/proc/1/ns/net", O_RDONLY | O_CLOEXEC));
  if (!mnt || !net) {
    return cni::fail(cni::Errc::kIoFailure, "cannot open PID 1's namespaces (/proc/1/ns/mnt, net)",
                     std::strerror(errno));
  }
  if (::setns(mnt.get(), CLONE_NEWNS) != 0 || ::chdir("/") != 0) {
    return cni::fail(cni::Errc::kIoFailure, "cannot enter PID 1's mount namespace",
                     std::string(std::strerror(errno)) + ": the pod needs CAP_SYS_ADMIN");
  }
  return net;
}

// Seconds between two reads of the plugin's call events (the CNI request metrics' delay at most).
constexpr long long kEventsEverySeconds = 5;

// Seconds until `when` (at least 0), at most kEventsEverySeconds.
long long secondsUntil(std::chrono::steady_clock::time_point when) {
  const auto left = std::chrono::ceil<std::chrono::seconds>(when - std::chrono::steady_clock::now()).count();
  return std::clamp<long long>(left, 0, kEventsEverySeconds);
}

// Seconds between two reads of the pods' RDMA port counters (each read of a PMA counter is a query to
// the adapter; a device moved into a pod's netns costs a child process).
constexpr long long kPortsEverySeconds = 10;

// The pods' RDMA port counters as the loop last read them (in the node's namespaces), for the
// listener's threads to expose.
class PortSnapshot {
 public:
  void refresh(const std::vector<std::string>& stateDirs) {
    std::vector<state::AttachmentRecord> records;
    for (const auto& dir : stateDirs) {
      auto listed = state::FileAttachmentStore(dir).list("");
      if (listed) {
        records.insert(records.end(), listed->begin(), listed->end());
      }
    }
    PodPorts read = readPodPorts(records);
    for (const auto& e : read.errors) {
      log::warn("RDMA port counters: {}", e);
    }
    std::lock_guard lock(mutex_);
    ports_ = std::move(read.ports);
  }
  [[nodiscard]] std::vector<PodPortCounters> ports() const {
    std::lock_guard lock(mutex_);
    return ports_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<PodPortCounters> ports_;
};

// The relay socket the plugins send through (none with --once or an empty --http-relay-socket). One
// that cannot be served is logged: the plugins then send their requests themselves.
std::unique_ptr<http::RelayServer> serveRelay(const AgentArgs& a) {
  if (a.once || a.relaySocket.empty()) {
    return nullptr;
  }
  auto server = http::RelayServer::listen({.path = a.relaySocket}, productionHttpClient());
  if (!server) {
    std::fprintf(stderr, "ibcni agent: not serving the HTTP relay: %s\n", server.error().c_str());
    return nullptr;
  }
  std::fprintf(stdout, "%s ibcni agent: serving the plugins' cluster requests on %s\n", now().c_str(),
               a.relaySocket.c_str());
  return std::move(*server);
}

int runAgentLoop(const AgentArgs& a, const sigset_t& stop, const os::UniqueFd& nodeNet) {
  std::optional<metrics::AgentMetrics> m;
  const auto dirs = a.options;
  auto ports = std::make_shared<PortSnapshot>();
  m.emplace([dirs, ports] {
    NodeCounts c;
    countAttachments(
        dirs.stateDirs, [](const std::string& d) { return std::make_unique<state::FileAttachmentStore>(d); }, c);
    countPools(dirs.ipamDataDirs, std::chrono::milliseconds(500), c);
    c.ports = ports->ports();
    return c;
  });
  auto server = metrics::MetricsServer::start(a.listen, *m);
  if (!server) {
    std::fprintf(stderr, "ibcni agent: %s (%s)\n", server.error().msg.c_str(), server.error().details.c_str());
    return 1;
  }
  // The listener's threads stay in the pod's network namespace; this thread, and what it starts, go
  // to the node's (--host-root) before the dependencies open their sockets.
  if (nodeNet && ::setns(nodeNet.get(), CLONE_NEWNET) != 0) {
    std::fprintf(stderr, "ibcni agent: cannot enter PID 1's network namespace: %s (the pod needs CAP_SYS_ADMIN)\n",
                 std::strerror(errno));
    return 1;
  }
  // Its threads are started here, so that they too send from the node's network namespace.
  const auto relay = serveRelay(a);
  ProductionDeps production([&m](ipam::BackendFactory inner) {
    return ipam::countingBackends(std::move(inner), [&m](std::string_view b, std::string_view op, std::string_view r) {
      m->recordBackendCall(b, op, r);
    });
  });
  CniEventDrain events(a.options.stateDirs, std::string(config::kDefaultStateDir));
  metrics::MetricsServer::setHealthy(true);
  std::fprintf(stdout, "%s ibcni agent: serving /metrics and /healthz on %s (port %d), %s\n", now().c_str(),
               a.listen.c_str(), (*server)->port(),
               a.once           ? "one reconcile pass (--once)"
               : a.interval > 0 ? ("a reconcile pass every " + std::to_string(a.interval) + " s").c_str()
                                : "no reconcile passes (--interval 0)");
  std::fflush(stdout);
  const bool passes = a.interval > 0 || a.once;
  bool failed = false;
  auto nextPass = std::chrono::steady_clock::now();
  auto nextPorts = nextPass;
  for (;;) {
    m->recordCniRequests(events.drain());
    if (std::chrono::steady_clock::now() >= nextPorts) {
      ports->refresh(a.options.stateDirs);
      nextPorts = std::chrono::steady_clock::now() + std::chrono::seconds(kPortsEverySeconds);
    }
    if (passes && std::chrono::steady_clock::now() >= nextPass) {
      failed = runPass(a.options, production.deps(), *m);
      nextPass = std::chrono::steady_clock::now() + std::chrono::seconds(a.interval);
    }
    if (a.once || waitForStop(stop, passes ? secondsUntil(nextPass) : kEventsEverySeconds)) {
      break;
    }
  }
  m->recordCniRequests(events.drain());
  metrics::MetricsServer::setHealthy(false);
  server->reset();
  std::fprintf(stdout, "%s ibcni agent: stopped\n", now().c_str());
  return a.once && failed ? 1 : 0;
}

int runAgentMain(const CommandLine& line) {
  auto parsed = agentArgs(line);
  if (!parsed) {
    return usageError(*line.program, line.command, parsed.error().what);
  }
  // Blocked before any thread starts (the listener's inherit the mask): only the loop takes them.
  const sigset_t stop = blockStopSignals();
  (void)log::setup(log::Level::kWarn, "", log::Context{"RECONCILE", "", "", ""});
  const AgentArgs& args = *parsed;
  os::UniqueFd nodeNet;
  if (!args.hostRoot.empty()) {
    auto net = enterNodeMountNamespace(args.hostRoot);
    if (!net) {
      std::fprintf(stderr, "ibcni agent: %s: %s\n", net.error().msg.c_str(), net.error().details.c_str());
      return 1;
    }
    nodeNet = std::move(*net);
  }
  try {
    return runAgentLoop(args, stop, nodeNet);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ibcni agent: %s\n", e.what());
    return 1;
  }
}

constexpr Subcommand kCommands[] = {kVersionCommand, kHelpCommand};

}  // namespace
}  // namespace ibcni::plugin

int main(int argc, char** argv) {
  using namespace ibcni::plugin;
  const Program program{.name = "ibcni-agent",
                        .about = kAgentSummary,
                        .commands = kCommands,
                        .flags = kAgentFlags,
                        .details = kAgentDetails};
  return runCommandLine(program, argc, argv, runAgentMain);
}
