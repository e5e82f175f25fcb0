// SPDX-License-Identifier: Apache-2.0
// The node agent's pass over sriov mode's GUID pools (<dataDir>/.guid/<pool>), beside the address
// pools reconcile.cpp keeps.
#pragma once

#include <string>

#include "plugin/agent/reconcile.h"

namespace ibcni::plugin {

/// Whether `dir` is there as a directory of trusted owners; anything wrong with it but its absence
/// is reported as an error of `what` ("ipam data directory").
[[nodiscard]] bool trustedDirPresent(const std::string& dir, const std::string& what, ReconcileReport& report);

/// Each cluster pool of the pool index at options.poolIndexDir whose store directory is missing (a
/// reboot wiped the tmpfs it lived on), or lacks its configuration file (a pass killed while it gave
/// the directory back), gets the directory back with the file it kept (network.json, pool.json), so
/// that the pass that follows finds the pool, adopts the node's blocks
/// from the backend and gives the idle ones back (dry run: only reported).
void restorePoolsFromIndex(const ReconcileOptions& options, ReconcileReport& report);

/// Each GUID pool store under `dataDir`: releases the GUIDs no ibcni record of `options.stateDirs`
/// holds (a record is written before its GUID is allocated and removed after it is released, so a
/// GUID without one is no VF's) and keeps a cluster pool's claims (renewed, given back, adopted).
/// A pod's network namespace is never the reason: a VF keeps its GUID in a lingering namespace
/// until its record's DEL (or this pass's undo of it) takes it off.
void reclaimGuidPools(const std::string& dataDir, const ReconcileOptions& options, Deps& deps, ReconcileReport& report);

}  // namespace ibcni::plugin
