// SPDX-License-Identifier: Apache-2.0
// The directory options `ibcni reconcile` and `ibcni agent` share, and their defaults.
#pragma once

#include "plugin/agent/reconcile.h"

namespace ibcni::plugin {

/// Takes argv[i] (and its value, i advanced past it) into `options` when it is one of
/// --dry-run, --state-dir DIR, --ipam-data-dir DIR, --pool-index-dir DIR.
/// @return false when argv[i] is none of them, or lacks its value (DIR empty for the repeatable ones)
[[nodiscard]] bool takeReconcileOption(int argc, char** argv, int& i, ReconcileOptions& options);

/// Options with the commands' defaults before parsing: the pool index at ipam's kDefaultPoolIndexDir.
[[nodiscard]] ReconcileOptions defaultReconcileOptions();

/// After parsing: the default stateDir (/run/ibcni) and ipam.dataDir (/run/ibcni-ipam) when none was given.
void defaultReconcileDirs(ReconcileOptions& options);

}  // namespace ibcni::plugin
