// SPDX-License-Identifier: Apache-2.0
// ibcni-faulty: ibcni (same sources, same real dependencies) with every mutating call of its
// dependencies counted, and the one IBCNI_FAULT_STEP names failed (fault_plan.h). A test build
// only: built with the tests, never installed, never in the image.
#include <string_view>

#include "plugin/dispatch.h"
#include "plugin/cli/plugin_main.h"
#include "lib/result/result_json.h"
#include "support/fault/fault_plan.h"
#include "support/fault/faulty_deps.h"

int main(int argc, char** argv) {
  return ibcni::plugin::runPluginMain(
      argc, argv, "ibcni-faulty",
      [](const ibcni::plugin::Getenv& getenv, std::string_view input, bool inputOk, ibcni::plugin::Deps& real) {
        auto plan = ibcni::fault::FaultPlan::fromEnvironment(getenv);
        if (!plan) {
          return ibcni::plugin::Outcome{
              ibcni::result::printError({ibcni::cni::Errc::kInvalidEnvironment, plan.error(), {}}, ""), 1};
        }
        ibcni::fault::FaultyDeps faulty(real, **plan);
        return ibcni::plugin::dispatch(getenv, input, inputOk, faulty.deps());
      });
}
