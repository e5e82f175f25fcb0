// SPDX-License-Identifier: Apache-2.0
// ibcni-dra-faulty: ibcni-dra (same daemon, same real files) with every change of Prepare and
// Unprepare counted, and the one the fault plan names failed or followed by SIGKILL
// (faulty_claim_effects.h, fault_plan.h); with IBCNI_FAULT_VF_TABLE=FILE, the VFs' settings are
// that file's (file_vf_table.h). A test build only, never installed.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "plugin/cli/dra_daemon.h"
#include "support/fault/faulty_claim_effects.h"

int main(int argc, char** argv) {
  auto plan = ibcni::fault::FaultPlan::fromEnvironment([](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v != nullptr ? std::optional<std::string>(v) : std::nullopt;
  });
  if (!plan) {
    std::fprintf(stderr, "ibcni-dra-faulty: %s\n", plan.error().c_str());
    return 2;
  }
  std::unique_ptr<ibcni::fault::FileVfTable> vfs;
  if (const char* table = std::getenv("IBCNI_FAULT_VF_TABLE"); table != nullptr && *table != '\0') {
    vfs = std::make_unique<ibcni::fault::FileVfTable>(table);
  }
  std::unique_ptr<ibcni::fault::FaultyClaimEffects> faulty;
  return ibcni::plugin::runDraDaemon(argc, argv, "ibcni-dra-faulty",
                                     [&](ibcni::dra::ClaimEffects& real) -> ibcni::dra::ClaimEffects& {
                                       faulty = std::make_unique<ibcni::fault::FaultyClaimEffects>(real, **plan, vfs.get());
                                       return *faulty;
                                     });
}
