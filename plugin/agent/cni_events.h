// SPDX-License-Identifier: Apache-2.0
// The node agent's side of the plugin's call events (state/call_event_ring.h): each state
// directory's ring read from where the last read ended, every event turned into one CniObservation
// once (ibcni_cni_requests_total, ibcni_cni_request_duration_seconds).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "plugin/agent/cni_observation.h"

namespace ibcni::plugin {

class CniEventDrain {
 public:
  /// Starts at the end of each ring: the calls before the agent started are not counted (a restarted
  /// agent's counters start again from 0, which Prometheus reads as a counter reset).
  explicit CniEventDrain(const std::vector<std::string>& stateDirs);

  /// The events appended since the last drain, oldest first, from every state directory. A ring
  /// that cannot be read is logged (warn) and tried again at the next drain; events the ring lost
  /// before they were read (more than a ring holds between two drains, or a writer killed midway)
  /// are added to lost().
  [[nodiscard]] std::vector<CniObservation> drain();
  [[nodiscard]] std::uint64_t lost() const { return lost_; }

 private:
  std::vector<std::pair<std::string, std::uint64_t>> cursors_;  ///< state directory, next sequence
  std::uint64_t lost_ = 0;
};

}  // namespace ibcni::plugin
