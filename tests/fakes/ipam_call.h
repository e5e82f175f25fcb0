// SPDX-License-Identifier: Apache-2.0
// What an ipam::Request refers to, owned: for tests that call an Ipam directly, without the
// dispatcher that owns these values in production.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "ibcni/cni/cmd_args.h"
#include "ibcni/config/net_conf.h"
#include "ibcni/ipam/ipam.h"
#include "plugin/invocation.h"

namespace ibcni::testing {

struct IpamCall {
  config::NetConf conf;
  cni::CmdArgs args;
  cni::CniArgs cniArgs;
  std::string rawConfig;

  /// A request over these values; valid while this IpamCall lives and is not changed.
  operator ipam::Request() const { return plugin::ipamRequest(conf, args, cniArgs, rawConfig); }  // NOLINT

  /// A request as the dispatcher makes it from stdin text and the CNI_* variables: `rawConfig`
  /// parsed by config/ in `role`, `cniArgsText` as CNI_ARGS. A parse error fails the test.
  static IpamCall fromText(const std::string& rawConfig, const std::string& containerId, const std::string& netns = "",
                           const std::string& cniArgsText = "", const std::string& ifName = "net1",
                           cni::Command command = cni::Command::kAdd,
                           config::Role role = config::Role::kIpamPlugin) {
    IpamCall c;
    c.rawConfig = rawConfig;
    c.args.command = command;
    c.args.containerId = containerId;
    c.args.ifName = ifName;
    c.args.netns = netns;
    c.args.rawArgs = cniArgsText;
    auto conf = config::parseNetConf(rawConfig, command, role);
    EXPECT_TRUE(conf) << (conf ? "" : conf.error().msg);
    if (conf) {
      c.conf = std::move(*conf);
    }
    auto parsedArgs = cni::parseCniArgs(cniArgsText);
    EXPECT_TRUE(parsedArgs) << (parsedArgs ? "" : parsedArgs.error().msg);
    if (parsedArgs) {
      c.cniArgs = std::move(*parsedArgs);
    }
    return c;
  }
};

}  // namespace ibcni::testing
