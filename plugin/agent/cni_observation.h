// SPDX-License-Identifier: Apache-2.0
// One CNI call as the node agent's metrics count it (ibcni_cni_requests_total,
// ibcni_cni_request_duration_seconds), and the calls lost (ibcni_cni_events_lost_total).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ibcni::plugin {

struct CniObservation {
  std::string verb;     ///< "ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION"
  std::string network;  ///< the configuration's name
  int code = 0;         ///< the CNI error code; 0: success
  double seconds = 0;   ///< how long the call took
};

/// The calls one read of the plugin's call events found, and how many the rings lost before they
/// were read (more calls than a ring holds between two reads: the agent stopped or slow).
struct CniCalls {
  std::vector<CniObservation> calls;
  std::uint64_t lost = 0;
};

}  // namespace ibcni::plugin
