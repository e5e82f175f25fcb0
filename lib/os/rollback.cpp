// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/rollback.h"

namespace ibcni::os {

int Rollback::run() {
  int failed = 0;
  // Undo newest first: each step assumes the state that followed the step before it.
  while (!steps_.empty()) {
    Step step = std::move(steps_.back());
    steps_.pop_back();
    auto r = step.undo();
    if (!r) {
      ++failed;
      if (sink_) {
        sink_(step.what, r.error());
      }
    }
  }
  return failed;
}

}  // namespace ibcni::os
