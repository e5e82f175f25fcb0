// SPDX-License-Identifier: Apache-2.0
// The verbs check: what libibverbs sees of the RDMA port behind a pod interface, judged. The facts
// come from a verbs::VerbsProbe (a child process in the pod's netns); the decisions are here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deps.h"
#include "ibcni/cni/error.h"
#include "ibcni/net/ip.h"
#include "ibcni/net/pkey.h"
#include "ibcni/verbs/verbs_probe.h"
#include "invocation.h"

namespace ibcni::plugin {

/// One problem the check found: what is wrong and what fixes it.
struct VerbsFinding {
  std::string check;    ///< short name: "libibverbs", "device", "open", "port state", ...
  std::string problem;
  std::string fix;
};

/// What the port should show beyond being usable.
struct VerbsExpectations {
  std::string device;                  ///< the RDMA device behind the interface
  std::uint32_t port = 1;
  std::optional<net::Pkey> pkey;       ///< without the membership bit
  std::vector<net::IpAddress> ips;     ///< RoCE: each needs a RoCE v2 GID
  bool qpProbe = false;
};

/// Judges `result` against `want`. Empty: the RDMA side works as far as verbs can tell.
[[nodiscard]] std::vector<VerbsFinding> evaluateVerbs(const verbs::ProbeResult& result, const VerbsExpectations& want);

/// Runs the check of `want` from inside `netnsPath` as `inv`'s verbsCheck says: off → nothing;
/// warn → findings logged; require → error 109 listing every finding with its fix.
[[nodiscard]] cni::Result<void> runVerbsCheck(const Invocation& inv, Deps& deps, const std::string& netnsPath,
                                              const VerbsExpectations& want);

}  // namespace ibcni::plugin
