// SPDX-License-Identifier: Apache-2.0
// `ibcni reconcile`: what the DELs that never came would have done. Not a CNI verb: the node agent
// (the ibcni DaemonSet) runs it on a timer, and an operator by hand.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "plugin/deps.h"
#include "ibcni/ipam/ipam.h"

namespace ibcni::plugin {

struct ReconcileOptions {
  std::vector<std::string> stateDirs;     ///< where ibcni keeps attachment records (stateDir)
  std::vector<std::string> ipamDataDirs;  ///< where ibcni-ipam keeps its pools (ipam.dataDir)
  bool dryRun = false;                    ///< change nothing: say what would be undone
  /// The pool index (ipam::EmbeddedIpamOptions::poolIndexDir; `ibcni reconcile`: ipam's
  /// kDefaultPoolIndexDir): a cluster pool whose store a reboot wiped is given its directory back
  /// from there first, so that this pass keeps it. Empty: none.
  std::string poolIndexDir;
  /// How long to wait for an ADD or DEL that holds an attachment's device lock; then the
  /// attachment is left for the next pass ("busy").
  std::chrono::milliseconds lockWait = std::chrono::seconds(2);
};

/// What one pass did with one attachment record.
struct AttachmentOutcome {
  /// "undone", "would-undo" (dry run), "alive", "unknown" (its netns cannot be checked), "busy"
  /// (an ADD or DEL holds its device lock), "device-missing" (undone as far as possible, the
  /// record kept until the physical device comes back), "superseded" (the device is attached to
  /// another, live attachment: left untouched, the record kept until that one ends), "gone" (a DEL
  /// removed the record meanwhile), "failed".
  std::string action;
  std::string stateDir;
  std::string network;
  std::string containerId;
  std::string ifName;
  std::string netns;
  std::string device;  ///< the host device (PCI address, else netdev name)
  std::string detail;  ///< why, in words
};

/// What one pass did with one ibcni-ipam allocation (pools of pods that never had an ibcni
/// record: ibcni-ipam used by another plugin, or a record lost).
struct AllocationOutcome {
  std::string action;  ///< "released", "would-release"
  std::string dataDir;
  std::string network;
  std::string containerId;
  std::string ifName;
  std::string netns;
  std::vector<std::string> addresses;  ///< the addresses, or the GUID
  std::string kind = "address";        ///< "address" (released: its netns is gone), "guid" (no record holds it)
};

/// What one pass did to the claims of one cluster pool (ipam.cluster, <dataDir>/.cluster/<pool>):
/// this node's holds renewed and checked, claims given back, lost, adopted, taken over, lent.
struct PoolOutcome {
  std::string action;  ///< "maintained", "would-maintain" (dry run: nothing renewed or given back)
  std::string dataDir;
  std::string network;  ///< the network whose configuration the pool's directory keeps
  ipam::PoolUpkeep upkeep;
  std::string kind = "address";  ///< "address" (ipam.cluster) or "guid" (guidPool.cluster)
};

struct ReconcileReport {
  std::vector<AttachmentOutcome> attachments;
  std::vector<AllocationOutcome> allocations;
  std::vector<PoolOutcome> pools;  ///< cluster pools kept (one per pool directory)
  bool dryRun = false;                    ///< the pass changed nothing
  std::vector<std::string> restoredPools;  ///< pool directories given back from the pool index (dry run: would be)
  std::vector<std::string> errors;  ///< what could not be read or undone, in words
  [[nodiscard]] bool failed() const { return !errors.empty(); }
};

/// One pass over every attachment record of `options.stateDirs` and every pool of
/// `options.ipamDataDirs`. An attachment whose pod netns is gone (os/netns_checker.h: the path is
/// missing, no longer a namespace, or another one than at ADD) is undone as its DEL would have
/// (under its device lock, re-read there: the mode's tear-down wherever the kernel put the
/// device, the IPAM release with the configuration ADD was given, the record removed). A live
/// attachment, one whose netns cannot be checked, and one whose lock stays held are left alone.
/// Then each pool's allocations whose netns is gone are released (Ipam::reclaimPool): the
/// node-local pools (<dataDir>/<network>/) and the cluster pools (<dataDir>/.cluster/<pool>/),
/// whose pass also renews this node's blocks and gives back the empty ones. Keeps going past
/// failures; safe to run at any time and twice.
[[nodiscard]] ReconcileReport reconcile(const ReconcileOptions& options, Deps& deps);

}  // namespace ibcni::plugin
