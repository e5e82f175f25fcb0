// SPDX-License-Identifier: Apache-2.0
#include "plugin/cli/reconcile_args.h"

#include <string>

#include "ipam/embedded_ipam.h"

namespace ibcni::plugin {

bool takeReconcileOption(int argc, char** argv, int& i, ReconcileOptions& options) {
  const std::string arg = argv[i];
  if (arg == "--dry-run") {
    options.dryRun = true;
  } else if (arg == "--state-dir" && i + 1 < argc && *argv[i + 1] != '\0') {
    options.stateDirs.emplace_back(argv[++i]);
  } else if (arg == "--ipam-data-dir" && i + 1 < argc && *argv[i + 1] != '\0') {
    options.ipamDataDirs.emplace_back(argv[++i]);
  } else if (arg == "--pool-index-dir" && i + 1 < argc) {
    options.poolIndexDir = argv[++i];
  } else {
    return false;
  }
  return true;
}

ReconcileOptions defaultReconcileOptions() {
  ReconcileOptions options;
  options.poolIndexDir = std::string(ipam::kDefaultPoolIndexDir);
  return options;
}

void defaultReconcileDirs(ReconcileOptions& options) {
  if (options.stateDirs.empty()) {
    options.stateDirs.emplace_back(config::kDefaultStateDir);
  }
  if (options.ipamDataDirs.empty()) {
    options.ipamDataDirs.emplace_back(config::kDefaultIpamDataDir);
  }
}

}  // namespace ibcni::plugin
