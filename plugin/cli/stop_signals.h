// SPDX-License-Identifier: Apache-2.0
// The long-running programs' stop: SIGTERM and SIGINT blocked in every thread (the mask is
// inherited, so it must be set before the first thread starts) and taken by the main loop alone,
// which finishes what it is doing and shuts down in order.
#pragma once

#include <csignal>

namespace ibcni::plugin {

/// Blocks SIGTERM and SIGINT in the calling thread (and the threads it starts after); their set.
[[nodiscard]] sigset_t blockStopSignals();

/// Waits up to `seconds` (negative: without end) for one of `stop`. @return whether one came.
[[nodiscard]] bool waitForStop(const sigset_t& stop, long long seconds);

}  // namespace ibcni::plugin
