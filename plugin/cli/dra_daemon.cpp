// SPDX-License-Identifier: Apache-2.0
// ibcni-dra's daemon (dra_daemon.h): the kubelet's DRA driver for InfiniBand VFs and IPoIB ports (driver ibcni.io). It
// serves the DRAPlugin service and the plugin watcher's Registration on the kubelet's sockets
// (plugin/dra/grpc/), prepares and unprepares claims (plugin/dra/claim_preparation), and keeps
// the node's ResourceSlices equal to the devices sysfs shows: published after every registration
// the kubelet reports (it wipes a driver's slices when the driver goes) and whenever a read every
// --interval seconds finds them changed; each pass also undoes the claims the API server no longer
// has that the kubelet did not unprepare (plugin/dra/claim_sweep, after --gone-grace).
// SIGTERM or SIGINT: the sockets go (the registration's first), then it exits 0. An executable of
// its own, linked with gRPC, so that the CNI plugin never loads it.
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <expected>
#include <string>
#include <vector>

#include "plugin/cli/dra_daemon.h"

#include "ibcni/os/boot_clock.h"
#include "ibcni/os/time_text.h"
#include "ipam/backends/kubeconfig.h"
#include "ipam/backends/production_backends.h"
#include "ipam/embedded_ipam_guids.h"
#include "lib/http/curl_http_client.h"
#include "lib/log/log.h"
#include "plugin/cli/command_line.h"
#include "plugin/cli/stop_signals.h"
#include "plugin/dra/cdi_spec.h"
#include "plugin/dra/claim_preparation.h"
#include "plugin/dra/claim_status.h"
#include "plugin/dra/claim_sweep.h"
#include "plugin/dra/grpc/dra_server.h"
#include "plugin/dra/ib_devices.h"
#include "plugin/dra/kube_claim_api.h"
#include "plugin/dra/kube_slice_api.h"
#include "plugin/dra/resource_slices.h"
#include "plugin/dra/slice_publisher.h"
#include "plugin/netlink/libnl_netlink.h"
#include "plugin/state/file_attachment_store.h"
#include "plugin/sysfs/sysfs_devices.h"
#include "plugin/sysfs/sysfs_inventory.h"

namespace ibcni::plugin {

namespace {

constexpr Flag kNodeFlag{"--node", "NAME", "this node's name (default: $NODE_NAME)"};
constexpr Flag kKubeconfigFlag{"--kubeconfig", "FILE", "the API server and credentials (default: the pod's ServiceAccount)"};
constexpr Flag kRegistryFlag{"--registry-dir", "DIR", "the kubelet's plugin registry (default /var/lib/kubelet/plugins_registry)"};
constexpr Flag kPluginsFlag{"--plugins-dir", "DIR", "the kubelet's plugin folder; dra.sock and the checkpoint go in DIR/ibcni.io (default /var/lib/kubelet/plugins)"};
constexpr Flag kCdiFlag{"--cdi-dir", "DIR", "where the claims' CDI specs go (default /var/run/cdi)"};
constexpr Flag kSysfsFlag{"--sysfs", "DIR", "sysfs as mounted here (default /sys)"};
constexpr Flag kInstanceFlag{"--instance-id", "ID", "sockets of this instance's own, for rolling updates (default: $POD_UID; \"\" for none)"};
constexpr Flag kCniStateFlag{"--cni-state-dir", "DIR", "ibcni's attachment records, read for the claims' networkData (default /run/ibcni)"};
constexpr Flag kIntervalFlag{"--interval", "SECONDS", "between two reads of the devices (default 10)"};
constexpr Flag kGoneGraceFlag{"--gone-grace", "SECONDS", "how long a prepared claim must have been gone from the API server before the loop undoes it, if the kubelet has not; also how often each claim is read, from the server's cache (default 60)"};
constexpr Flag kDraFlags[] = {kNodeFlag, kKubeconfigFlag, kRegistryFlag, kPluginsFlag, kCdiFlag, kSysfsFlag, kInstanceFlag, kCniStateFlag, kIntervalFlag, kGoneGraceFlag};

struct DraArgs {
  std::string node;
  dra::KubeTarget target;
  dra::grpc_api::ServerPaths paths{"/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins", ""};
  std::string cdiDir = dra::kCdiDir;
  std::string sysfs = "/sys";
  std::string cniStateDir = "/run/ibcni";
  long long interval = 10;
  long long goneGrace = 60;
};

/// `flag`'s value as a number of seconds from `low` to `high` into `out` (left as it is when the
/// flag is not given).
std::expected<void, UsageProblem> secondsFlag(const CommandLine& line, const Flag& flag, long long low, long long high,
                                              long long& out) {
  const auto v = line.value(flag);
  if (!v) {
    return {};
  }
  char* end = nullptr;
  const long long n = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || n < low || n > high) {
    return std::unexpected(UsageProblem{std::string(flag.name) + " " + *v + ": not a number of seconds from " +
                                        std::to_string(low) + " to " + std::to_string(high)});
  }
  out = n;
  return {};
}

std::expected<dra::KubeTarget, UsageProblem> kubeTarget(const CommandLine& line) {
  if (const auto file = line.value(kKubeconfigFlag)) {
    auto k = ipam::loadKubeconfig(*file);
    if (!k) {
      return std::unexpected(UsageProblem{"--kubeconfig: " + k.error().describe()});
    }
    dra::KubeTarget t;
    t.server = k->server;
    t.tls = k->tls;
    t.token = k->token;
    t.tokenFile = k->tokenFile;
    return t;
  }
  if (auto t = dra::inClusterTarget()) {
    return *t;
  }
  return std::unexpected(UsageProblem{"no --kubeconfig, and not in a pod (KUBERNETES_SERVICE_HOST is not set)"});
}

std::expected<DraArgs, UsageProblem> draArgs(const CommandLine& line) {
  DraArgs a;
  const char* envNode = std::getenv("NODE_NAME");
  a.node = line.value(kNodeFlag).value_or(envNode != nullptr ? envNode : "");
  if (a.node.empty()) {
    return std::unexpected(UsageProblem{"--node: name this node (or set NODE_NAME from spec.nodeName)"});
  }
  auto target = kubeTarget(line);
  if (!target) {
    return std::unexpected(target.error());
  }
  a.target = std::move(*target);
  a.paths.registryDir = line.value(kRegistryFlag).value_or(a.paths.registryDir);
  a.paths.pluginsDir = line.value(kPluginsFlag).value_or(a.paths.pluginsDir);
  const char* podUid = std::getenv("POD_UID");
  a.paths.instance = line.value(kInstanceFlag).value_or(podUid != nullptr ? podUid : "");
  if (a.paths.instance.find('/') != std::string::npos) {
    return std::unexpected(UsageProblem{"--instance-id " + a.paths.instance + ": no '/' (it is part of a file name)"});
  }
  a.cdiDir = line.value(kCdiFlag).value_or(a.cdiDir);
  a.sysfs = line.value(kSysfsFlag).value_or(a.sysfs);
  a.cniStateDir = line.value(kCniStateFlag).value_or(a.cniStateDir);
  if (auto ok = secondsFlag(line, kIntervalFlag, 1, 3600, a.interval); !ok) {
    return std::unexpected(ok.error());
  }
  if (auto ok = secondsFlag(line, kGoneGraceFlag, 0, 86400, a.goneGrace); !ok) {
    return std::unexpected(ok.error());
  }
  return a;
}

// The node's devices published; what went wrong logged (the next read tries again).
void publish(dra::SlicePublisher& publisher, sysfs::Devices& devices, sysfs::IbInventory& inventory) {
  auto present = dra::discoverDevices(devices, inventory);
  if (!present) {
    log::error("ibcni-dra: reading the devices: {}", present.error().describe());
    return;
  }
  auto report = publisher.publish(*present);
  if (!report) {
    log::warn("ibcni-dra: publishing the ResourceSlices: {}", report.error().message);
  } else if (report->changed()) {
    log::info("ibcni-dra: {} devices published at generation {} ({} slices created, {} updated, {} deleted)",
              present->size(), report->generation, report->created, report->updated, report->deleted);
  }
}

// The prepared claims' status.devices brought up to date with ibcni's attachment records; what
// failed logged (the next pass tries again).
void reportStatuses(dra::StatusReporter& reporter, const dra::ClaimRecords& records, const std::string& cniStateDir) {
  auto attachments = state::FileAttachmentStore(cniStateDir).list("");
  if (!attachments) {
    attachments = std::vector<state::AttachmentRecord>{};  // no records yet (no ADD on this node)
  }
  for (const auto& e : reporter.report(records, *attachments, os::rfc3339(std::chrono::system_clock::now()))) {
    log::warn("ibcni-dra: {}", e);
  }
}

// Claims recorded here that the API server no longer has, undone once gone for the grace period;
// what failed logged (the next pass tries again).
void sweepGoneClaims(dra::ClaimSweep& sweep, const dra::ClaimRecords& records) {
  const auto report = sweep.pass(records, dra::ClaimSweep::Clock::now());
  for (const auto& claim : report.undone) {
    log::info("ibcni-dra: {} is gone from the API server and was not unprepared by the kubelet: undone", claim);
  }
  for (const auto& e : report.errors) {
    log::warn("ibcni-dra: {}", e);
  }
}

// The libcurl builds ibcni-dra may load, most wanted first: GnuTLS's (GnuTLS comes with libcurl's
// other dependencies in either build) leaves OpenSSL's TLS out of the process, 0.8 MiB of its
// resident set as measured (libcrypto is still loaded, by libssh2), but takes certificates from files
// only, so a kubeconfig that embeds them (certificate-authority-data, client-*-data) gets OpenSSL's.
std::vector<std::string> curlLibraries(const dra::KubeTarget& t) {
  if (!t.tls.caData.empty() || !t.tls.certData.empty() || !t.tls.keyData.empty()) {
    return {"libcurl.so.4"};
  }
  return {"libcurl-gnutls.so.4", "libcurl.so.4"};
}

int runDra(const DraArgs& a, const sigset_t& stop, const DecorateEffects& decorate) {
  // One client per thread that calls: the loop's, and the kubelet's calls'. Each keeps its
  // connection to the API server: a Prepare's GET then costs no TCP and TLS handshake.
  http::CurlHttpClient sliceHttp(curlLibraries(a.target), true);
  http::CurlHttpClient claimHttp(curlLibraries(a.target), true);
  sysfs::SysfsDevices devices(a.sysfs);
  sysfs::SysfsInventory inventory(a.sysfs);
  sysfs::SysfsDevices claimDevices(a.sysfs);  // the kubelet's calls' own readers
  sysfs::SysfsInventory claimInventory(a.sysfs);
  dra::KubeClient kube(sliceHttp, a.target);
  dra::SliceOptions options;
  options.nodeName = a.node;
  if (auto uid = dra::nodeUid(kube, a.node)) {
    options.nodeUid = *uid;
  } else {
    log::warn("ibcni-dra: the Node's uid ({}): the slices are published without an owner", uid.error().message);
  }
  dra::KubeSliceApi slices(sliceHttp, a.target);
  dra::SlicePublisher publisher(slices, options);
  dra::KubeClaimApi claims(claimHttp, a.target);
  const std::string stateDir = a.paths.pluginsDir + "/" + dra::kDriverName;
  const dra::ClaimCheckpoint checkpoint(stateDir + "/claims.json");
  // The VFs' GUIDs and link state, through their PFs in this (the host's) network namespace; GUID
  // pools as the CNI's guidPool keeps them (the same stores, cluster pools through the same backends).
  nl::LibnlNetlink netlink;
  auto host = os::Netns::current();
  if (!host) {
    std::fprintf(stderr, "ibcni-dra: %s\n", host.error().describe().c_str());
    return 1;
  }
  ipam::EmbeddedGuidPools guids(clusterCapable(claimHttp));
  dra::NodeClaimEffects files(checkpoint, {stateDir, a.cdiDir}, {netlink, *host, claimDevices, guids});
  dra::KubeClaimApi statusApi(sliceHttp, a.target);
  dra::StatusReporter reporter(statusApi, dra::kDriverName);
  dra::ClaimPreparation preparation(claims, claimDevices, claimInventory, decorate(files),
                                    {.driver = dra::kDriverName, .nodeName = a.node, .bootId = os::bootNow().boot});
  dra::ClaimSweep sweep(statusApi, preparation, std::chrono::seconds(a.goneGrace));
  std::atomic<bool> registered{false};
  auto server = dra::grpc_api::DraServer::start(a.paths, dra::kDriverName, preparation,
                                                [&registered](bool ok, const std::string& error) {
                                                  if (ok) {
                                                    registered = true;
                                                  } else {
                                                    log::error("ibcni-dra: the kubelet refused the registration: {}", error);
                                                  }
                                                });
  if (!server) {
    std::fprintf(stderr, "ibcni-dra: %s\n", server.error().c_str());
    return 1;
  }
  log::info("ibcni-dra: serving {} and {} for node {}", a.paths.draSocket(dra::kDriverName),
            a.paths.registrationSocket(dra::kDriverName), a.node);
  auto next = std::chrono::steady_clock::now();
  for (;;) {
    // A registration (first, or again after a kubelet restart, whose wipe removed the slices):
    // a pass at once (the publisher reads the server's slices every pass).
    if (registered.exchange(false)) {
      next = std::chrono::steady_clock::now();
    }
    if (std::chrono::steady_clock::now() >= next) {
      publish(publisher, devices, inventory);
      // The claims read once for both: the statuses, then the sweep of those gone.
      if (auto records = checkpoint.load(); !records) {
        log::error("ibcni-dra: {}", records.error().describe());
      } else {
        reportStatuses(reporter, *records, a.cniStateDir);
        sweepGoneClaims(sweep, *records);
      }
      next = std::chrono::steady_clock::now() + std::chrono::seconds(a.interval);
    }
    if (waitForStop(stop, 1)) {
      break;
    }
  }
  (*server)->stop();
  log::info("ibcni-dra: stopped");
  return 0;
}

int runDraMain(const CommandLine& line, const DecorateEffects& decorate) {
  auto parsed = draArgs(line);
  if (!parsed) {
    return usageError(*line.program, line.command, parsed.error().what);
  }
  // Blocked before any thread starts (gRPC's inherit the mask): only the loop takes them.
  const sigset_t stop = blockStopSignals();
  // One malloc arena for every thread: the daemon's dozen threads would each get one (each a
  // heap's first pages resident) for calls that come seconds apart.
  (void)mallopt(M_ARENA_MAX, 1);
  (void)log::setup(log::Level::kInfo, "", log::Context{"DRA", "", "", ""});
  return runDra(*parsed, stop, decorate);
}

constexpr Subcommand kCommands[] = {kVersionCommand, kHelpCommand};

}  // namespace

int runDraDaemon(int argc, char** argv, std::string_view name, const DecorateEffects& decorate) {
  const Program program{.name = name,
                        .about = "the kubelet's DRA driver for InfiniBand VFs and IPoIB ports (driver ibcni.io)",
                        .commands = kCommands,
                        .flags = kDraFlags};
  return runCommandLine(program, argc, argv, [&decorate](const CommandLine& line) { return runDraMain(line, decorate); });
}

}  // namespace ibcni::plugin
