// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "ibcni/cni/cmd_args.h"
#include "ibcni/cni/error.h"
#include "ibcni/cni/result.h"
#include "ibcni/cni/spec_version.h"

namespace ibcni::ipam {

/// One call to an IPAM plugin. The request configuration is passed on byte for byte, as the spec
/// requires of a delegating plugin.
struct Request {
  std::string type;        ///< ipam.type: the plugin's file name in CNI_PATH
  std::string rawConfig;   ///< the complete stdin ibcni received
  cni::CmdArgs args;       ///< ibcni's own CNI_* environment; the command is replaced per call
  cni::SpecVersion version = cni::SpecVersion::k110;
};

/// The IPAM plugin a network uses. Errors from the plugin keep its code, msg and details.
class Ipam {
 public:
  virtual ~Ipam() = default;
  /// @return the addresses, routes and DNS the plugin allocated (interfaces are ignored).
  [[nodiscard]] virtual cni::Result<cni::AddResult> add(const Request& request) = 0;
  [[nodiscard]] virtual cni::Result<void> del(const Request& request) = 0;
  [[nodiscard]] virtual cni::Result<void> check(const Request& request) = 0;
  [[nodiscard]] virtual cni::Result<void> gc(const Request& request) = 0;
  [[nodiscard]] virtual cni::Result<void> status(const Request& request) = 0;
};

}  // namespace ibcni::ipam
