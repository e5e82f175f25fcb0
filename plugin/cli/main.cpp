// SPDX-License-Identifier: Apache-2.0
// ibcni: wiring only. runPluginMain (plugin_main.h) builds the real dependencies and runs the
// subcommands of its table (`ibcni help` lists them); dispatch does a CNI call.
#include <string_view>

#include "plugin/dispatch.h"
#include "plugin/cli/plugin_main.h"

int main(int argc, char** argv) {
  return ibcni::plugin::runPluginMain(
      argc, argv, "ibcni",
      [](const ibcni::plugin::Getenv& getenv, std::string_view input, bool inputOk, ibcni::plugin::Deps& deps) {
        return ibcni::plugin::dispatch(getenv, input, inputOk, deps);
      });
}
