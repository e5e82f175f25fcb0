// SPDX-License-Identifier: Apache-2.0
// ibcni: wiring only. The real dependencies are built here; everything else is in runMain/dispatch.
#include "process_main.h"
#include "production_deps.h"

int main() {
  return ibcni::plugin::runMain([](const ibcni::plugin::Getenv& getenv, std::string_view input, bool inputOk) {
    ibcni::plugin::ProductionDeps production;
    return ibcni::plugin::dispatch(getenv, input, inputOk, production.deps());
  });
}
