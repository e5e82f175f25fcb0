// SPDX-License-Identifier: Apache-2.0
// `ibcni reconcile`: for each record whose pod netns is gone, DEL's work (mode tear-down, IPAM
// release, record removal) under the device lock DEL takes; then each ibcni-ipam pool reclaimed.
#include "plugin/agent/reconcile.h"
#include "plugin/agent/reconcile_guid_pools.h"

#include <cerrno>
#include <filesystem>
#include <optional>
#include <utility>

#include "plugin/commands/common.h"
#include "plugin/invocation.h"
#include "ibcni/os/file_io.h"
#include "ibcni/os/netns_checker.h"
#include "ipam/embedded_ipam.h"
#include "ipam/pool_use.h"
#include "lib/log/log.h"

namespace ibcni::plugin {

namespace {

std::string deviceOf(const state::AttachmentRecord& r) { return r.pciAddress ? r.pciAddress->text : r.hostName; }

AttachmentOutcome outcome(std::string action, const std::string& stateDir, const state::AttachmentRecord& r,
                          std::string detail) {
  return AttachmentOutcome{std::move(action), stateDir, r.network, r.containerId, r.ifName, r.netns, deviceOf(r),
                           std::move(detail)};
}

// The invocation the DEL that never came would have been: the configuration, CNI_ARGS and
// CNI_PATH ADD was given, as the record keeps them. A record of an older ibcni keeps none: then
// only the mode's tear-down runs (`note` says the IPAM is left to the pool reclaim).
Invocation invocationOf(const state::AttachmentRecord& r, const std::string& stateDir, std::string& note) {
  Invocation inv;
  inv.args = cni::CmdArgs{cni::Command::kDel, r.containerId, r.netns, r.ifName, r.cniArgs, r.cniPath};
  std::optional<config::NetConf> conf;
  if (!r.config.empty()) {
    if (auto parsed = config::parseNetConf(r.config, cni::Command::kDel); parsed) {
      conf = std::move(*parsed);
      inv.rawStdin = r.config;
    } else {
      note = "the configuration in the record no longer parses (" + parsed.error().msg + ")";
    }
  } else {
    note = "the record keeps no configuration (written by an older ibcni)";
  }
  if (!conf) {
    conf.emplace();
    conf->name = r.network;
    for (auto m : {config::Mode::kSriov, config::Mode::kIpoib}) {
      if (r.mode == config::toString(m)) {
        conf->mode = m;
      }
    }
    if (!r.ipamType.empty()) {
      note += ": its " + r.ipamType + " allocation is not released here" +
              (r.ipamType == config::kEmbeddedIpamType ? " (the pool reclaim below releases it)" : "");
    }
  }
  inv.conf = std::move(*conf);
  inv.conf.stateDir = stateDir;  // where the record is, whatever the configuration says
  if (auto a = cni::parseCniArgs(r.cniArgs); a) {
    inv.cniArgs = std::move(*a);
  }
  return inv;
}

// Another attachment of the same device whose netns is alive (or cannot be checked).
std::optional<state::AttachmentRecord> liveHolderOf(state::AttachmentStore& store, const state::AttachmentRecord& r,
                                                    Deps& deps) {
  auto records = store.list("");
  if (!records) {
    return std::nullopt;
  }
  for (auto& other : *records) {
    const bool self = other.network == r.network && other.containerId == r.containerId && other.ifName == r.ifName;
    if (!self && deviceKeyOf(other) == deviceKeyOf(r) &&
        os::netnsLiveness(deps.netns, other.netns, other.netnsInode) != os::NetnsLiveness::kGone) {
      return std::move(other);
    }
  }
  return std::nullopt;
}

// One record whose netns was seen gone: take its device lock, read it again there (a DEL may have
// run, or the attachment been made anew), and undo it.
AttachmentOutcome undo(const std::string& stateDir, const state::AttachmentRecord& seen, Deps& deps,
                       const os::Netns& host, state::AttachmentStore& store, const ReconcileOptions& options) {
  std::string note;
  Invocation inv = invocationOf(seen, stateDir, note);
  Deps waiting = deps;
  waiting.lockTimeout = options.lockWait;
  auto lock = lockDevice(inv, waiting, deviceKeyOf(seen));
  if (!lock) {
    const bool adding = seen.createdAt.empty();
    return outcome("busy", stateDir, seen,
                   (adding ? "an ADD of this attachment is in progress (its record is not complete) and holds "
                           : "an ADD or DEL holds ") +
                       std::string("the device lock: left for the next pass (") + lock.error().msg + ")");
  }
  auto again = store.load(seen.network, seen.containerId, seen.ifName);
  if (!again) {
    return outcome("failed", stateDir, seen, "cannot read the record again: " + again.error().describe());
  }
  if (!*again) {
    return outcome("gone", stateDir, seen, "a DEL removed it meanwhile");
  }
  const state::AttachmentRecord& record = **again;
  if (auto l = os::netnsLiveness(deps.netns, record.netns, record.netnsInode); l != os::NetnsLiveness::kGone) {
    return outcome(os::toString(l), stateDir, record, "the attachment was made again meanwhile");
  }
  // The device taken since by a live attachment (the kernel returned it, and another ADD found it):
  // touching it now (its name, its VF's GUIDs and link state) would break that pod. Left until
  // that attachment lets it go; the next pass after that restores it as this record says.
  if (auto holder = liveHolderOf(store, record, deps)) {
    return outcome("superseded", stateDir, record,
                   "its pod netns " + record.netns + " is gone, but the device is attached to container " +
                       holder->containerId + " (network " + holder->network + ", ifname " + holder->ifName +
                       "), whose netns is not: left until that attachment ends");
  }
  const std::string why = record.createdAt.empty() ? "its ADD died half-way and its pod netns " + record.netns +
                                                         " is gone"
                                                   : "its pod netns " + record.netns + " is gone";
  if (auto r = releaseAttachment(inv, deps, host, record, /*releaseIpam=*/!inv.conf.ipamType.empty()); !r) {
    return outcome("failed", stateDir, record, why + "; undoing it failed: " + r.error().msg);
  }
  AttachmentMode* mode = modeByName(record.mode);
  if (mode != nullptr && mode->awaitsReturn(ModeContext{inv, deps, host}, record)) {
    return outcome("device-missing", stateDir, record,
                   why + "; " + deviceOf(record) +
                       " is not back in the host yet (its namespace lives on in a process): the record is kept, and "
                       "a later pass restores it when the kernel returns it" +
                       (note.empty() ? "" : "; " + note));
  }
  if (auto r = store.remove(record.network, record.containerId, record.ifName); !r) {
    return outcome("failed", stateDir, record, why + "; cannot remove the record: " + r.error().describe());
  }
  return outcome("undone", stateDir, record,
                 why + (inv.conf.ipamType.empty() ? "" : "; " + inv.conf.ipamType + " allocation released") +
                     (note.empty() ? "" : "; " + note));
}

void reconcileStateDir(const std::string& stateDir, const ReconcileOptions& options, Deps& deps,
                       const os::Netns& host, ReconcileReport& report) {
  if (!trustedDirPresent(stateDir, "state directory", report)) {
    return;
  }
  auto store = deps.makeStore(stateDir);
  auto records = store->list("");
  if (!records) {
    report.errors.push_back("cannot list the attachment records in " + stateDir + ": " + records.error().describe());
    return;
  }
  for (const auto& r : *records) {
    const auto liveness = os::netnsLiveness(deps.netns, r.netns, r.netnsInode);
    if (liveness == os::NetnsLiveness::kAlive) {
      report.attachments.push_back(outcome("alive", stateDir, r, "its pod netns " + r.netns + " exists"));
      continue;
    }
    if (liveness == os::NetnsLiveness::kUnknown) {
      report.attachments.push_back(outcome(
          "unknown", stateDir, r,
          "its pod netns " + (r.netns.empty() ? std::string("(none recorded)") : r.netns) +
              " cannot be checked from here (its directory is not visible, or opening it is refused): left alone"));
      continue;
    }
    if (options.dryRun) {
      report.attachments.push_back(outcome("would-undo", stateDir, r, "its pod netns " + r.netns + " is gone"));
      continue;
    }
    report.attachments.push_back(undo(stateDir, r, deps, host, *store, options));
  }
}

// One pool directory that keeps its configuration (network.json): its dead allocations and, for a
// cluster pool, its blocks' upkeep. `cluster`: the directory is .cluster/<pool>, named by the pool.
void reclaimPool(const std::string& dataDir, const std::filesystem::path& poolDir, bool cluster,
                 const ReconcileOptions& options, Deps& deps, ReconcileReport& report) {
  const std::string file = (poolDir / ipam::kNetworkFileName).string();
  auto kept = ipam::readPoolConfig(poolDir);
  if (!kept) {
    report.errors.push_back(kept.error().msg);
    return;
  }
  if (!*kept) {
    return;  // not a pool, or one written before pools kept their configuration
  }
  auto& conf = *kept;
  const auto& clusterConf = (*conf->embeddedIpam)->cluster;
  const std::string dirName = poolDir.filename().string();
  if (cluster) {
    if (!clusterConf || clusterConf->pool != dirName) {
      report.errors.push_back(file + " is not the configuration of cluster pool " + cni::quoted(dirName) +
                              (clusterConf ? " (it names pool " + cni::quoted(clusterConf->pool) + ")"
                                           : " (it has no ipam.cluster)"));
      return;
    }
  } else if (conf->name != dirName) {
    report.errors.push_back(file + " names network " + cni::quoted(conf->name) + ", not the directory's");
    return;
  } else if (clusterConf) {
    return;  // a node-local directory of a network now in cluster mode: its pool is under .cluster
  }
  (*conf->embeddedIpam)->dataDir = dataDir;  // the pool found here, wherever the file says
  const cni::CmdArgs args;
  const cni::CniArgs cniArgs;
  auto outcome = deps.ipamUpkeep->reclaimPool(ipamRequest(*conf, args, cniArgs), options.dryRun);
  if (!outcome) {
    report.errors.push_back((cluster ? "cluster pool " + dirName : "pool " + conf->name) + " in " + dataDir + ": " +
                            outcome.error().msg);
    return;
  }
  for (const auto& a : outcome->released) {
    report.allocations.push_back(AllocationOutcome{options.dryRun ? "would-release" : "released", dataDir,
                                                   conf->name, a.containerId, a.ifName, a.netns, a.addresses});
  }
  if (outcome->upkeep) {
    const auto& u = *outcome->upkeep;
    report.pools.push_back(PoolOutcome{options.dryRun ? "would-maintain" : "maintained", dataDir, conf->name, u});
  }
}

// Every pool directory under `dataDir`: the node-local ones (<dataDir>/<network>) and the cluster
// ones (<dataDir>/.cluster/<pool>).
void reclaimPools(const std::string& dataDir, const ReconcileOptions& options, Deps& deps, ReconcileReport& report) {
  if (deps.ipamUpkeep == nullptr) {
    report.errors.push_back("ipam data directory " + dataDir + ": this program has no embedded IPAM to reclaim its pools");
    return;
  }
  if (!trustedDirPresent(dataDir, "ipam data directory", report)) {
    return;
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dataDir, ec)) {
    reclaimPool(dataDir, entry.path(), /*cluster=*/false, options, deps, report);
  }
  if (ec) {
    report.errors.push_back("cannot list " + dataDir + ": " + ec.message());
  }
  const std::string clusterDir = dataDir + "/.cluster";
  if (!trustedDirPresent(clusterDir, "ipam data directory", report)) {
    return;
  }
  for (const auto& entry : std::filesystem::directory_iterator(clusterDir, ec)) {
    reclaimPool(dataDir, entry.path(), /*cluster=*/true, options, deps, report);
  }
  if (ec) {
    report.errors.push_back("cannot list " + clusterDir + ": " + ec.message());
  }
}

}  // namespace

ReconcileReport reconcile(const ReconcileOptions& options, Deps& deps) {
  ReconcileReport report;
  report.dryRun = options.dryRun;
  auto host = hostNetns(deps);
  if (!host) {
    report.errors.push_back(host.error().msg);
    return report;
  }
  for (const auto& dir : options.stateDirs) {
    reconcileStateDir(dir, options, deps, *host, report);
  }
  restorePoolsFromIndex(options, report);
  for (const auto& dir : options.ipamDataDirs) {
    reclaimPools(dir, options, deps, report);
    reclaimGuidPools(dir, options, deps, report);
  }
  for (const auto& a : report.attachments) {
    if (a.action == "failed") {
      report.errors.push_back(a.network + " " + a.containerId + " " + a.ifName + ": " + a.detail);
    }
  }
  return report;
}

}  // namespace ibcni::plugin
