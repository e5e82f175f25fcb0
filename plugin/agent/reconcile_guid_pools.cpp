// SPDX-License-Identifier: Apache-2.0
#include "plugin/agent/reconcile_guid_pools.h"

#include <cerrno>
#include <filesystem>

#include "ibcni/os/file_io.h"
#include "ibcni/os/safe_path.h"
#include "ipam/embedded_ipam.h"

namespace ibcni::plugin {

namespace {

// Whether any state directory holds a record of (network, key); an unreadable one counts as held,
// so that a GUID is never released on a guess. A claim's GUID (ibcni-dra's network) is recorded in
// ibcni-dra's checkpoint, not here: ibcni-dra releases it.
bool recordedIn(const std::vector<std::string>& stateDirs, Deps& deps, const std::string& network,
                const cni::AttachmentKey& key) {
  if (network == ipam::kDraGuidNetwork) {
    return true;
  }
  for (const auto& dir : stateDirs) {
    auto found = deps.makeStore(dir)->load(network, key.containerId, key.ifName);
    if (!found || *found) {
      return true;
    }
  }
  return false;
}

void maintainGuidPool(const std::string& storeDir, const ReconcileOptions& options, Deps& deps,
                      ReconcileReport& report) {
  auto outcome = deps.guids->maintain(storeDir, options.dryRun,
                                      [&](const std::string& network, const cni::AttachmentKey& key) {
                                        return recordedIn(options.stateDirs, deps, network, key);
                                      });
  if (!outcome) {
    report.errors.push_back("GUID pool in " + storeDir + ": " + outcome.error().msg);
    return;
  }
  for (const auto& a : outcome->released) {
    report.allocations.push_back(AllocationOutcome{options.dryRun ? "would-release" : "released", storeDir,
                                                   a.network, a.containerId, a.ifName, a.netns, a.addresses, "guid"});
  }
  if (outcome->upkeep) {
    report.pools.push_back(PoolOutcome{options.dryRun ? "would-maintain" : "maintained", storeDir, "",
                                       *outcome->upkeep, "guid"});
  }
}

}  // namespace

bool trustedDirPresent(const std::string& dir, const std::string& what, ReconcileReport& report) {
  auto opened = os::openDirectory(dir, os::DirPolicy{.trustedOwners = true, .create = false});
  if (!opened && opened.error().err != ENOENT) {
    report.errors.push_back(what + " " + dir + ": " + opened.error().describe());
  }
  return opened.has_value();
}

void restorePoolsFromIndex(const ReconcileOptions& options, ReconcileReport& report) {
  if (options.poolIndexDir.empty()) {
    return;
  }
  for (const auto& e : ipam::readPoolIndex(options.poolIndexDir)) {
    // The file, not the directory: a pass killed between the two leaves a directory no pass would
    // find the pool in.
    const std::string file = e.storeDir + "/" + e.fileName;
    std::error_code ec;
    if (std::filesystem::exists(file, ec) || ec) {
      continue;
    }
    report.restoredPools.push_back(e.storeDir);
    if (options.dryRun) {
      continue;
    }
    std::filesystem::create_directories(e.storeDir, ec);
    auto w = ec ? os::sysFail(ec.value(), "create " + e.storeDir) : os::writeFileAtomic(file, e.text);
    if (!w) {
      report.errors.push_back("cannot give " + e.kind + " pool directory " + e.storeDir + " back from the pool index: " +
                              w.error().describe());
    }
  }
}

void reclaimGuidPools(const std::string& dataDir, const ReconcileOptions& options, Deps& deps, ReconcileReport& report) {
  const std::string guidDir = dataDir + "/.guid";
  if (!trustedDirPresent(guidDir, "GUID pools directory", report)) {
    return;
  }
  if (deps.guids == nullptr) {
    report.errors.push_back("GUID pools directory " + guidDir + ": this program has no GUID pools to keep");
    return;
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(guidDir, ec)) {
    if (entry.is_directory(ec) && !entry.is_symlink(ec)) {
      maintainGuidPool(entry.path(), options, deps, report);
    }
  }
  if (ec) {
    report.errors.push_back("cannot list " + guidDir + ": " + ec.message());
  }
}

}  // namespace ibcni::plugin
