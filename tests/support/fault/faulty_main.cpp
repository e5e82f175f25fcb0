// SPDX-License-Identifier: Apache-2.0
// ibcni-faulty: ibcni (same sources, same real dependencies) with every mutating call of its
// dependencies counted, and the one IBCNI_FAULT_STEP names failed (fault_plan.h). A test build
// only: built with the tests, never installed, never in the image.
#include <cstdio>
#include <string_view>

#include "doctor_main.h"
#include "process_main.h"
#include "production_deps.h"
#include "result/result_json.h"
#include "support/fault/fault_plan.h"
#include "support/fault/faulty_deps.h"
#include "version.h"

int main(int argc, char** argv) {
  if (ibcni::plugin::isVersionRequest(argc, argv)) {
    std::puts(ibcni::plugin::versionLine("ibcni-faulty").c_str());
    return 0;
  }
  if (argc >= 2 && std::string_view(argv[1]) == "doctor") {
    return ibcni::plugin::runDoctor(argc, argv);
  }
  return ibcni::plugin::runMain([](const ibcni::plugin::Getenv& getenv, std::string_view input, bool inputOk) {
    auto plan = ibcni::fault::FaultPlan::fromEnvironment(getenv);
    if (!plan) {
      return ibcni::plugin::Outcome{
          ibcni::result::printError({ibcni::cni::Errc::kInvalidEnvironment, plan.error(), {}}, ""), 1};
    }
    ibcni::plugin::ProductionDeps production;
    ibcni::fault::FaultyDeps faulty(production.deps(), **plan);
    return ibcni::plugin::dispatch(getenv, input, inputOk, faulty.deps());
  });
}
