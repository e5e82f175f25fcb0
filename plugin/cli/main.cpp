// SPDX-License-Identifier: Apache-2.0
// ibcni: wiring only. runPluginMain (doctor_main.h) builds the real dependencies; dispatch does the rest.
//
//   ibcni                  the CNI plugin: CNI_COMMAND and the configuration on stdin
//   ibcni doctor [--json]  a report on this node's RDMA, IPoIB and SR-IOV set-up (doctor_main.h)
//   ibcni pools CONFIG     the network's cluster pools and the GUIDs this node hands out (pools_main.h)
//   ibcni version          one line: release and CNI spec versions (what the installer checks)
#include <string_view>

#include "plugin/dispatch.h"
#include "plugin/cli/doctor_main.h"

int main(int argc, char** argv) {
  return ibcni::plugin::runPluginMain(
      argc, argv, "ibcni",
      [](const ibcni::plugin::Getenv& getenv, std::string_view input, bool inputOk, ibcni::plugin::Deps& deps) {
        return ibcni::plugin::dispatch(getenv, input, inputOk, deps);
      });
}
