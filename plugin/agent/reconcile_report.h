// SPDX-License-Identifier: Apache-2.0
// How `ibcni reconcile` tells an operator (and the DaemonSet's log) what a pass did.
#pragma once

#include <string>

#include "plugin/agent/reconcile.h"

namespace ibcni::doctor {

/// One line per attachment acted on or left for a reason (alive ones are only counted), one per
/// allocation released, one per cluster pool kept, one per error, then a summary line; each
/// starts with `stamp` (a time).
[[nodiscard]] std::string renderReconcileText(const plugin::ReconcileReport& report, const std::string& stamp);

/// `ibcni reconcile --json`: {"attachments": [{action, stateDir, network, containerID, ifname,
/// netns, device, detail}], "allocations": [{action, dataDir, network, containerID, ifname, netns,
/// addresses[]}], "pools": [{action ("maintained"|"would-maintain"), dataDir, pool, network, node,
/// renewed, livenessRenewed, releasedBlocks[], lostBlocks[], adoptedBlocks[], releasedAddresses[],
/// reclaimedBlocks[], takenOver[], lent[], loansReturned[]}] (cluster pools), "errors": [...]}.
[[nodiscard]] std::string printReconcileReport(const plugin::ReconcileReport& report);

}  // namespace ibcni::doctor
