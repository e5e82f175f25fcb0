// SPDX-License-Identifier: Apache-2.0
// Shrinks a failing schedule by delta debugging (ddmin over its steps: remove halves, then
// quarters, ... down to single steps; keep a removal when the same violation kind still occurs).
// Every candidate is replayed from scratch (fresh names, fresh data dirs), up to `tries` times,
// since real processes are not deterministic. A reproducing run ends at its violation, so the
// steps after it are dropped too, and so are the steps it skipped. Last, the kill points the
// violation does not need are dropped from the steps left.
#pragma once

#include <functional>
#include <string>

#include "runner.h"

namespace ibcni::chaos {

struct ShrinkResult {
  RunResult run;       ///< the last run of the smallest schedule that still fails (with outcomes)
  int candidates = 0;  ///< schedules replayed
  bool budgetSpent = false;
};

[[nodiscard]] ShrinkResult shrink(Runner& runner, const RunResult& failing, int tries, double budgetSeconds,
                                  const std::function<void(const std::string&)>& log);

}  // namespace ibcni::chaos
