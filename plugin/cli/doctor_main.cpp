// SPDX-License-Identifier: Apache-2.0
// `ibcni doctor` and the ibcni executable's main(): wiring only, like production_deps.cpp.
#include "plugin/cli/doctor_main.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "ipam/backends/production_backends.h"
#include "lib/http/http_relay.h"
#include "plugin/cli/production_http.h"
#include "plugin/doctor/config_check.h"
#include "ipam/embedded_ipam.h"
#include "lib/http/curl_http_client.h"
#include "plugin/doctor/doctor.h"
#include "plugin/cli/production_deps.h"
#include "plugin/doctor/doctor_json.h"
#include "plugin/agent/reconcile_report.h"
#include "plugin/agent/reconcile.h"
#include "lib/log/log.h"
#include "lib/version/version.h"

namespace ibcni::plugin {

namespace {

constexpr const char* kUsage =
    "usage: ibcni doctor [--json] [--config FILE [--cni-path DIR[:DIR...]] [--agent-interval SECONDS]]\n"
    "  --json      print the report as JSON\n"
    "  --config    also say whether that network config (a NetworkAttachmentDefinition as\n"
    "              `kubectl get net-attach-def NAME -o json` prints it, or the config itself)\n"
    "              would work on this node; the exit status is then its verdict\n"
    "  --cni-path  where delegated IPAM plugins are looked for (default: $CNI_PATH, else /opt/cni/bin)\n"
    "  --agent-interval  seconds between the node agent's passes, to judge ipam.cluster's lease\n"
    "              (default: $IBCNI_RECONCILE_INTERVAL, as the DaemonSet sets it, else the chart's 60)\n";

std::vector<std::string> splitPath(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ':')) {
    if (!part.empty()) {
      out.push_back(part);
    }
  }
  return out;
}

}  // namespace

int runDoctor(int argc, char** argv) {
  bool json = false;
  std::optional<std::string> configFile;
  std::optional<std::string> cniPath;
  std::optional<std::string> agentInterval;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && !json) {
      json = true;
    } else if (arg == "--config" && !configFile && i + 1 < argc) {
      configFile = argv[++i];
    } else if (arg == "--cni-path" && !cniPath && i + 1 < argc) {
      cniPath = argv[++i];
    } else if (arg == "--agent-interval" && !agentInterval && i + 1 < argc) {
      agentInterval = argv[++i];
    } else {
      std::fputs(kUsage, stderr);
      return 2;
    }
  }
  if ((cniPath || agentInterval) && !configFile) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string intervalSource = "--agent-interval";
  if (!agentInterval) {
    const char* env = std::getenv("IBCNI_RECONCILE_INTERVAL");
    agentInterval = env != nullptr && *env != '\0' ? env : "60";
    intervalSource = env != nullptr && *env != '\0' ? "IBCNI_RECONCILE_INTERVAL" : "the chart's default reconcileInterval";
  }
  char* end = nullptr;
  const long long interval = std::strtoll(agentInterval->c_str(), &end, 10);
  if (end == agentInterval->c_str() || *end != '\0' || interval < 0) {
    std::fprintf(stderr, "ibcni doctor: %s %s is not a number of seconds\n", intervalSource.c_str(),
                 agentInterval->c_str());
    return 2;
  }
  std::string configText;
  if (configFile) {
    std::ifstream f(*configFile);
    std::stringstream s;
    if (!f || !(s << f.rdbuf())) {
      std::fprintf(stderr, "ibcni doctor: cannot read --config %s\n", configFile->c_str());
      return 2;
    }
    configText = s.str();
  }
  try {
    ProductionDeps production;
    Deps& deps = production.deps();
    auto host = deps.netns.current();
    if (!host) {
      std::fprintf(stderr, "ibcni doctor: %s\n", host.error().describe().c_str());
      return 1;
    }
    doctor::DoctorInputs in{deps.netlink, deps.devices, deps.rdma, deps.verbs, *host, "/proc/self/ns/net", {}, {}, {}};
    in.listNetdevs = [] { return doctor::listDirectory("/sys/class/net", ""); };
    in.listUverbs = [] { return doctor::listDirectory("/dev/infiniband", "uverbs"); };
    in.moduleLoaded = [](const std::string& name) {
      std::error_code ec;
      return std::filesystem::exists("/sys/module/" + name, ec);
    };
    doctor::DoctorReport report = doctor::collect(in);
    if (configFile) {
      if (!cniPath) {
        const char* env = std::getenv("CNI_PATH");
        cniPath = env != nullptr && *env != '\0' ? env : "/opt/cni/bin";
      }
      doctor::ConfigCheckInputs cin{deps, *host, report, splitPath(*cniPath), "/proc/self/ns/net"};
      cin.agentInterval = interval;
      cin.agentIntervalSource = intervalSource;
      // Cluster mode: the pool's report as `ibcni-ipam pools` makes it, and whether libcurl loads
      // (a request to a closed loopback port: the library is loaded before anything is sent).
      auto clusterIpam = std::make_shared<ipam::EmbeddedIpam>(clusterCapable(productionHttpClient()));
      cin.clusterPools = [clusterIpam](const ipam::Request& r) { return clusterIpam->pools(r); };
      cin.libcurlProblem = [] {
        http::CurlHttpClient client;
        http::Request probe;
        probe.url = "http://127.0.0.1:1/";
        probe.timeout = std::chrono::milliseconds(500);
        auto res = client.send(probe);
        return !res && res.error().kind == http::ErrorKind::kUnavailable ? res.error().message : std::string();
      };
      report.config = doctor::checkConfig(configText, *configFile, cin);
    }
    const std::string out = json ? doctor::printDoctorReport(report) + "\n" : doctor::renderText(report);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return doctor::exitStatus(report);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ibcni doctor: %s\n", e.what());
    return 1;
  }
}

namespace {

constexpr const char* kReconcileUsage =
    "usage: ibcni reconcile [--dry-run] [--json] [--verbose] [--state-dir DIR]... [--ipam-data-dir DIR]...\n"
    "  Undoes what the DELs that never came would have undone: every attachment whose pod network\n"
    "  namespace is gone (device back home, IPAM released, record removed), then every ibcni-ipam\n"
    "  allocation whose pod network namespace is gone. Live attachments, and those whose namespace\n"
    "  cannot be checked from here, are left alone. For each ibcni-ipam cluster pool\n"
    "  (DIR/.cluster/POOL), it also renews this node's blocks and gives back those empty for\n"
    "  ipam.cluster.releaseAfterSeconds (a node keeps one per range set).\n"
    "  --dry-run        change nothing: list what would be undone\n"
    "  --json           print the report as JSON on stdout\n"
    "  --verbose        log each step on stderr\n"
    "  --state-dir      ibcni's stateDir (repeatable; default /run/ibcni)\n"
    "  --ipam-data-dir  ibcni-ipam's ipam.dataDir (repeatable; default /run/ibcni-ipam)\n"
    "  exit status: 0 nothing failed, 1 something could not be undone or read, 2 usage\n";

}  // namespace

int runReconcile(int argc, char** argv) {
  ReconcileOptions options;
  bool json = false;
  bool verbose = false;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--dry-run") {
      options.dryRun = true;
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--verbose") {
      verbose = true;
    } else if (arg == "--state-dir" && i + 1 < argc && *argv[i + 1] != '\0') {
      options.stateDirs.emplace_back(argv[++i]);
    } else if (arg == "--ipam-data-dir" && i + 1 < argc && *argv[i + 1] != '\0') {
      options.ipamDataDirs.emplace_back(argv[++i]);
    } else {
      std::fputs(kReconcileUsage, stderr);
      return 2;
    }
  }
  if (options.stateDirs.empty()) {
    options.stateDirs.emplace_back(config::kDefaultStateDir);
  }
  if (options.ipamDataDirs.empty()) {
    options.ipamDataDirs.emplace_back(config::kDefaultIpamDataDir);
  }
  try {
    (void)log::setup(verbose ? log::Level::kInfo : log::Level::kWarn, "", log::Context{"RECONCILE", "", "", ""});
    ProductionDeps production;
    Deps& deps = production.deps();
    const ReconcileReport report = reconcile(options, deps);
    const std::string out = json ? doctor::printReconcileReport(report) + "\n"
                                 : doctor::renderReconcileText(report, deps.now ? deps.now() : "");
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return report.failed() ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ibcni reconcile: %s\n", e.what());
    return 1;
  }
}

int runPluginMain(int argc, char** argv, const char* name, const PluginEntry& entry) {
  if (isVersionRequest(argc, argv)) {
    std::puts(versionLine(name).c_str());
    return 0;
  }
  if (argc >= 2 && std::string_view(argv[1]) == "doctor") {
    return runDoctor(argc, argv);
  }
  if (argc >= 2 && std::string_view(argv[1]) == "reconcile") {
    return runReconcile(argc, argv);
  }
  if (argc == 2 && std::string_view(argv[1]) == "http-relay") {
    return http::serveHttpRelay(productionHttpClient(), STDIN_FILENO, STDOUT_FILENO);
  }
  return runMain([&entry](const Getenv& getenv, std::string_view input, bool inputOk) {
    ProductionDeps production;
    return entry(getenv, input, inputOk, production.deps());
  });
}

}  // namespace ibcni::plugin
