// SPDX-License-Identifier: Apache-2.0
#include "plugin/cli/reconcile_args.h"

#include <string>

#include "ipam/embedded_ipam.h"

namespace ibcni::plugin {

std::expected<ReconcileOptions, UsageProblem> reconcileOptions(const CommandLine& line) {
  ReconcileOptions options;
  options.dryRun = line.has(kDryRunFlag);
  options.stateDirs = line.values(kStateDirFlag);
  options.ipamDataDirs = line.values(kIpamDataDirFlag);
  for (const Flag* flag : {&kStateDirFlag, &kIpamDataDirFlag}) {
    for (const auto& dir : line.values(*flag)) {
      if (dir.empty()) {
        return std::unexpected(UsageProblem{std::string(flag->name) + " \"\": name a directory"});
      }
    }
  }
  options.poolIndexDir = line.value(kPoolIndexDirFlag).value_or(std::string(ipam::kDefaultPoolIndexDir));
  if (options.stateDirs.empty()) {
    options.stateDirs.emplace_back(config::kDefaultStateDir);
  }
  if (options.ipamDataDirs.empty()) {
    options.ipamDataDirs.emplace_back(config::kDefaultIpamDataDir);
  }
  return options;
}

}  // namespace ibcni::plugin
