// SPDX-License-Identifier: Apache-2.0
// `ibcni doctor`, `ibcni reconcile` and `ibcni agent`: wiring only, like production_deps.cpp.
#include "plugin/cli/doctor_main.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <exception>
#include <expected>
#include <filesystem>
#include <memory>
#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "ipam/backends/production_backends.h"
#include "plugin/cli/reconcile_args.h"
#include "plugin/cli/production_http.h"
#include "plugin/doctor/config_check.h"
#include "ipam/embedded_ipam.h"
#include "ipam/embedded_ipam_guids.h"
#include "lib/http/curl_http_client.h"
#include "plugin/doctor/doctor.h"
#include "plugin/cli/production_deps.h"
#include "plugin/doctor/doctor_json.h"
#include "plugin/agent/reconcile_report.h"
#include "plugin/agent/reconcile.h"
#include "lib/log/log.h"

namespace ibcni::plugin {

namespace {

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

// `ibcni doctor`'s command line.
struct DoctorArgs {
  bool json = false;
  std::optional<std::string> configFile;
  std::optional<std::string> cniPath;
  std::optional<std::string> agentInterval;
};

// The command line's values; a usage problem when --cni-path or --agent-interval comes without --config.
std::expected<DoctorArgs, UsageProblem> doctorArgs(const CommandLine& line) {
  DoctorArgs a{line.has(kDoctorJsonFlag), line.value(kDoctorConfigFlag), line.value(kDoctorCniPathFlag),
               line.value(kDoctorAgentIntervalFlag)};
  if ((a.cniPath || a.agentInterval) && !a.configFile) {
    return std::unexpected(UsageProblem{"--cni-path and --agent-interval judge a --config: give one"});
  }
  return a;
}

// The node agent's interval in seconds and where it came from (--agent-interval, the agent's
// environment, the chart's default); nullopt (said on stderr) when it is not a number of seconds.
std::optional<std::pair<long long, std::string>> resolveAgentInterval(std::optional<std::string> given) {
  std::string source = "--agent-interval";
  if (!given) {
    const char* env = std::getenv("IBCNI_RECONCILE_INTERVAL");
    given = env != nullptr && *env != '\0' ? env : "60";
    source = env != nullptr && *env != '\0' ? "IBCNI_RECONCILE_INTERVAL" : "the chart's default reconcileInterval";
  }
  char* end = nullptr;
  const long long interval = std::strtoll(given->c_str(), &end, 10);
  if (end == given->c_str() || *end != '\0' || interval < 0) {
    std::fprintf(stderr, "ibcni doctor: %s %s is not a number of seconds\n", source.c_str(), given->c_str());
    return std::nullopt;
  }
  return std::make_pair(interval, std::move(source));
}

// The text of --config FILE; nullopt (said on stderr) when it cannot be read.
std::optional<std::string> readConfigFile(const std::string& file) {
  std::ifstream f(file);
  std::stringstream s;
  if (!f || !(s << f.rdbuf())) {
    std::fprintf(stderr, "ibcni doctor: cannot read --config %s\n", file.c_str());
    return std::nullopt;
  }
  return s.str();
}

// The node's facts as this host shows them: /sys/class/net, /dev/infiniband, /sys/module.
doctor::DoctorInputs hostInputs(Deps& deps, const os::Netns& host) {
  doctor::DoctorInputs in{deps.netlink, deps.devices, deps.rdma, deps.verbs, host, "/proc/self/ns/net", {}, {}, {}};
  in.listNetdevs = [] { return doctor::listDirectory("/sys/class/net", ""); };
  in.listUverbs = [] { return doctor::listDirectory("/dev/infiniband", "uverbs"); };
  in.moduleLoaded = [](const std::string& name) {
    std::error_code ec;
    return std::filesystem::exists("/sys/module/" + name, ec);
  };
  return in;
}

// Whether libcurl loads: a request to a closed loopback port (the library is loaded before
// anything is sent); empty when it does.
std::string libcurlProblem() {
  http::CurlHttpClient client;
  http::Request probe;
  probe.url = "http://127.0.0.1:1/";
  probe.timeout = std::chrono::milliseconds(500);
  auto res = client.send(probe);
  return !res && res.error().kind == http::ErrorKind::kUnavailable ? res.error().message : std::string();
}

// --config: whether the config would work on this node, judged against the node's report.
doctor::ConfigReport checkConfigFile(Deps& deps, const os::Netns& host, const doctor::DoctorReport& report,
                                     const DoctorArgs& a, const std::string& configText,
                                     const std::pair<long long, std::string>& interval) {
  std::string cniPath;
  if (a.cniPath) {
    cniPath = *a.cniPath;
  } else {
    const char* env = std::getenv("CNI_PATH");
    cniPath = env != nullptr && *env != '\0' ? env : "/opt/cni/bin";
  }
  doctor::ConfigCheckInputs cin{deps, host, report, splitPath(cniPath), "/proc/self/ns/net"};
  cin.agentInterval = interval.first;
  cin.agentIntervalSource = interval.second;
  // Cluster mode: the pool's report as `ibcni-ipam pools` makes it, and whether libcurl loads.
  auto clusterIpam = std::make_shared<ipam::EmbeddedIpam>(clusterCapable(productionHttpClient()));
  cin.clusterPools = [clusterIpam](const ipam::Request& r) { return clusterIpam->pools(r); };
  auto guidPools = std::make_shared<ipam::EmbeddedGuidPools>(clusterCapable(productionHttpClient()));
  cin.guidPools = [guidPools](const config::GuidPoolConf& pool, const std::string& network) {
    return guidPools->pools(pool, network);
  };
  cin.libcurlProblem = libcurlProblem;
  return doctor::checkConfig(configText, *a.configFile, cin);
}

}  // namespace

int runDoctor(const CommandLine& line) {
  const auto args = doctorArgs(line);
  if (!args) {
    return usageError(*line.program, line.command, args.error().what);
  }
  const auto interval = resolveAgentInterval(args->agentInterval);
  if (!interval) {
    return 2;
  }
  std::string configText;
  if (args->configFile) {
    auto text = readConfigFile(*args->configFile);
    if (!text) {
      return 2;
    }
    configText = std::move(*text);
  }
  try {
    ProductionDeps production;
    Deps& deps = production.deps();
    auto host = deps.netns.current();
    if (!host) {
      std::fprintf(stderr, "ibcni doctor: %s\n", host.error().describe().c_str());
      return 1;
    }
    doctor::DoctorReport report = doctor::collect(hostInputs(deps, *host));
    if (args->configFile) {
      report.config = checkConfigFile(deps, *host, report, *args, configText, *interval);
    }
    const std::string out = args->json ? doctor::printDoctorReport(report) + "\n" : doctor::renderText(report);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return doctor::exitStatus(report);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ibcni doctor: %s\n", e.what());
    return 1;
  }
}

int runReconcile(const CommandLine& line) {
  auto options = reconcileOptions(line);
  if (!options) {
    return usageError(*line.program, line.command, options.error().what);
  }
  const bool json = line.has(kReconcileJsonFlag);
  const bool verbose = line.has(kReconcileVerboseFlag);
  try {
    (void)log::setup(verbose ? log::Level::kInfo : log::Level::kWarn, "", log::Context{"RECONCILE", "", "", ""});
    ProductionDeps production;
    Deps& deps = production.deps();
    const ReconcileReport report = reconcile(*options, deps);
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

int runAgent(const CommandLine& line) {
  // The agent links prometheus-cpp and civetweb: an executable of its own, so that no CNI call loads them.
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    std::fprintf(stderr, "ibcni agent: cannot read /proc/self/exe to find ibcni-agent beside ibcni: %s\n",
                 ec.message().c_str());
    return 1;
  }
  const std::string agent = (self.parent_path() / "ibcni-agent").string();
  std::vector<char*> args{const_cast<char*>(agent.c_str())};
  for (const auto& arg : line.args) {
    args.push_back(const_cast<char*>(arg.c_str()));
  }
  args.push_back(nullptr);
  ::execv(agent.c_str(), args.data());
  std::fprintf(stderr, "ibcni agent: cannot run %s: %s (install ibcni-agent in the same directory as ibcni)\n",
               agent.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace ibcni::plugin
