// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>

#include "ibcni/cni/cmd_args.h"
#include "ibcni/config/net_conf.h"
#include "ibcni/ipam/ipam.h"

namespace ibcni::plugin {

/// One validated call of the plugin: its environment, CNI_ARGS, configuration and raw stdin.
struct Invocation {
  cni::CmdArgs args;
  cni::CniArgs cniArgs;
  config::NetConf conf;
  std::string rawStdin;
};

/// The IPAM's request of a call: the network's name, its IPAM (ipam.type, ibcni-ipam's settings), the
/// addresses it names (runtimeConfig.ips, args.cni.ips), prevResult and the valid attachments, with
/// the call's environment. It refers to `conf`, `args` and `cniArgs`, which must outlive it.
[[nodiscard]] inline ipam::Request ipamRequest(const config::NetConf& conf, const cni::CmdArgs& args,
                                               const cni::CniArgs& cniArgs, std::string_view rawConfig = {}) {
  return ipam::Request{.args = args,
                       .cniArgs = cniArgs,
                       .network = conf.name,
                       .ipamType = conf.ipamType,
                       .settings = conf.embeddedIpam ? &*conf.embeddedIpam : nullptr,
                       .runtimeIps = conf.runtime.ips,
                       .argsIps = conf.argsIps,
                       .prevResult = conf.prevResult ? &*conf.prevResult : nullptr,
                       .validAttachments = conf.validAttachments ? &*conf.validAttachments : nullptr,
                       .rawConfig = rawConfig};
}

/// The IPAM's request of `inv`.
[[nodiscard]] inline ipam::Request ipamRequest(const Invocation& inv) {
  return ipamRequest(inv.conf, inv.args, inv.cniArgs, inv.rawStdin);
}

}  // namespace ibcni::plugin
