// SPDX-License-Identifier: Apache-2.0
#include "plugin/agent/cni_events.h"

#include "lib/log/log.h"
#include "plugin/state/call_event_ring.h"

namespace ibcni::plugin {

CniEventDrain::CniEventDrain(const std::vector<std::string>& stateDirs) {
  for (const auto& dir : stateDirs) {
    auto now = state::readCallEvents(dir, 0);
    cursors_.emplace_back(dir, now ? now->next : 0);
  }
}

std::vector<CniObservation> CniEventDrain::drain() {
  std::vector<CniObservation> out;
  for (auto& [dir, next] : cursors_) {
    auto batch = state::readCallEvents(dir, next);
    if (!batch) {
      log::warn("cannot read the call events of {}: {}", dir, batch.error().msg);
      continue;
    }
    if (batch->lost != 0) {
      log::warn("{} call events of {} were lost before the agent read them", batch->lost, dir);
      lost_ += batch->lost;
    }
    next = batch->next;
    for (const auto& e : batch->events) {
      out.push_back(CniObservation{cni::toString(e.verb), e.network, e.code, e.durationSeconds});
    }
  }
  return out;
}

}  // namespace ibcni::plugin
