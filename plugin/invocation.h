// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "ibcni/cni/cmd_args.h"
#include "ibcni/config/net_conf.h"

namespace ibcni::plugin {

/// One validated call of the plugin: its environment, CNI_ARGS, configuration and raw stdin.
struct Invocation {
  cni::CmdArgs args;
  cni::CniArgs cniArgs;
  config::NetConf conf;
  std::string rawStdin;
};

}  // namespace ibcni::plugin
