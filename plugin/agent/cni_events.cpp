// SPDX-License-Identifier: Apache-2.0
#include "plugin/agent/cni_events.h"

#include <algorithm>

#include "lib/log/log.h"
#include "plugin/state/call_event_ring.h"

namespace ibcni::plugin {

CniEventDrain::CniEventDrain(const std::vector<std::string>& stateDirs, const std::string& fallbackDir) {
  std::vector<std::string> dirs = stateDirs;
  if (std::find(dirs.begin(), dirs.end(), fallbackDir) == dirs.end()) {
    dirs.push_back(fallbackDir);
  }
  for (const auto& dir : dirs) {
    auto now = state::readCallEvents(dir, 0);
    cursors_.emplace_back(dir, now ? now->next : 0);
  }
}

std::vector<std::string> CniEventDrain::dirs() const {
  std::vector<std::string> out;
  for (const auto& [dir, next] : cursors_) {
    out.push_back(dir);
  }
  return out;
}

CniCalls CniEventDrain::drain() {
  CniCalls out;
  for (auto& [dir, next] : cursors_) {
    auto batch = state::readCallEvents(dir, next);
    if (!batch) {
      log::warn("cannot read the call events of {}: {}", dir, batch.error().msg);
      continue;
    }
    if (batch->lost != 0) {
      log::warn("{} call events of {} were lost before the agent read them", batch->lost, dir);
      out.lost += batch->lost;
    }
    next = batch->next;
    for (const auto& e : batch->events) {
      out.calls.push_back(CniObservation{cni::toString(e.verb), e.network, e.code, e.durationSeconds});
    }
  }
  return out;
}

}  // namespace ibcni::plugin
