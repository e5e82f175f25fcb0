// SPDX-License-Identifier: Apache-2.0
// The node agent's side of the plugin's call events (state/call_event_ring.h): each state
// directory's ring read from where the last read ended, every event turned into one CniObservation
// once (ibcni_cni_requests_total, ibcni_cni_request_duration_seconds), those lost counted
// (ibcni_cni_events_lost_total).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "plugin/agent/cni_observation.h"

namespace ibcni::plugin {

class CniEventDrain {
 public:
  /// Reads `stateDirs` and `fallbackDir` (once, if not among them): the directory where a call whose
  /// configuration could not be read (no stateDir known yet) appends its event, so that such a failure
  /// is counted wherever the agent is told to look. A directory without a ring has no calls.
  /// Starts at the end of each ring: the calls before the agent started are not counted (a restarted
  /// agent's counters start again from 0, which Prometheus reads as a counter reset).
  CniEventDrain(const std::vector<std::string>& stateDirs, const std::string& fallbackDir);

  /// The events appended since the last drain, oldest first, from every state directory, and the
  /// number the rings lost before they were read (more than a ring holds between two drains, or a
  /// writer killed midway). A ring that cannot be read is logged (warn) and tried again at the next
  /// drain.
  [[nodiscard]] CniCalls drain();
  /// The directories read, in order.
  [[nodiscard]] std::vector<std::string> dirs() const;

 private:
  std::vector<std::pair<std::string, std::uint64_t>> cursors_;  ///< state directory, next sequence
};

}  // namespace ibcni::plugin
