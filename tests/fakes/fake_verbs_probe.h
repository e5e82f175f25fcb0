// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/verbs/verbs_probe.h"

namespace ibcni::testing {

/// verbs::VerbsProbe that answers with `byDevice[device]`, else `result` (or `error`), and records
/// every request.
class FakeVerbsProbe final : public verbs::VerbsProbe {
 public:
  os::SysResult<verbs::ProbeResult> probe(const verbs::ProbeRequest& request) override {
    requests.push_back(request);
    if (error) {
      return std::unexpected(*error);
    }
    if (auto it = byDevice.find(request.device); it != byDevice.end()) {
      return it->second;
    }
    return result;
  }

  /// A healthy InfiniBand port of `device` (values of an mlx5 VF port with a subnet manager).
  static verbs::ProbeResult healthyIb(const std::string& device) {
    verbs::ProbeResult r;
    r.devices = {device};
    r.opened = true;
    verbs::PortFacts p;
    p.device = device;
    p.port = 1;
    p.state = 4;      // PORT_ACTIVE
    p.physState = 5;  // LinkUp
    p.linkLayer = verbs::LinkLayer::kInfiniband;
    p.lid = 0x2a;
    p.smLid = 0x1;
    p.nodeGuid = 0xc211223344556600ULL;
    p.portGuid = 0xc211223344556677ULL;
    p.pkeys = {net::Pkey::fromWire(0xffff), net::Pkey::fromWire(0x8123)};
    r.port = p;
    return r;
  }

  verbs::ProbeResult result;
  /// Answers for requests naming these devices; `result` answers the others.
  std::map<std::string, verbs::ProbeResult> byDevice;
  std::optional<os::SysError> error;
  std::vector<verbs::ProbeRequest> requests;
};

}  // namespace ibcni::testing
