// SPDX-License-Identifier: Apache-2.0
// ibcni: wiring only. The real dependencies are built here; everything else is in runMain/dispatch.
//
//   ibcni                  the CNI plugin: CNI_COMMAND and the configuration on stdin
//   ibcni doctor [--json]  a report on this node's RDMA, IPoIB and SR-IOV set-up (doctor_main.h)
//   ibcni version          one line: release and CNI spec versions (what the installer checks)
#include <cstdio>
#include <string_view>

#include "doctor_main.h"
#include "process_main.h"
#include "production_deps.h"
#include "version.h"

int main(int argc, char** argv) {
  if (ibcni::plugin::isVersionRequest(argc, argv)) {
    std::puts(ibcni::plugin::versionLine("ibcni").c_str());
    return 0;
  }
  if (argc >= 2 && std::string_view(argv[1]) == "doctor") {
    return ibcni::plugin::runDoctor(argc, argv);
  }
  return ibcni::plugin::runMain([](const ibcni::plugin::Getenv& getenv, std::string_view input, bool inputOk) {
    ibcni::plugin::ProductionDeps production;
    return ibcni::plugin::dispatch(getenv, input, inputOk, production.deps());
  });
}
