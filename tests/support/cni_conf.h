// SPDX-License-Identifier: Apache-2.0
// Network configurations for the tests that run the built ibcni as a runtime does (the binary and
// conformance suites).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace ibcni::testing {

/// An IPAM object: {"type": `type`, dataDir, one range of `subnet`, one route to `routeDst`}.
[[nodiscard]] inline nlohmann::json ipamObject(const std::string& type, const std::string& dataDir,
                                               const std::string& subnet, const std::string& routeDst) {
  using nlohmann::json;
  return {{"type", type},
          {"dataDir", dataDir},
          {"ranges", json::array({json::array({{{"subnet", subnet}}})})},
          {"routes", json::array({{{"dst", routeDst}}})}};
}

/// ibcni's sriov configuration of network `name` for `vf` (logLevel debug, its state in
/// `stateDir`), with `ipam` when given.
[[nodiscard]] inline nlohmann::json ibcniConf(const std::string& version, const std::string& name,
                                              const std::string& vf, const std::string& stateDir,
                                              const std::optional<nlohmann::json>& ipam) {
  nlohmann::json c = {{"cniVersion", version}, {"name", name},   {"type", "ibcni"},
                      {"mode", "sriov"},       {"device", vf},   {"stateDir", stateDir},
                      {"logLevel", "debug"}};
  if (ipam) {
    c["ipam"] = *ipam;
  }
  return c;
}

}  // namespace ibcni::testing
