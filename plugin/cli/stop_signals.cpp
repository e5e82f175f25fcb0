// SPDX-License-Identifier: Apache-2.0
#include "plugin/cli/stop_signals.h"

#include <pthread.h>

#include <cerrno>
#include <ctime>

namespace ibcni::plugin {

sigset_t blockStopSignals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  return stop;
}

bool waitForStop(const sigset_t& stop, long long seconds) {
  for (;;) {
    int sig = 0;
    if (seconds < 0) {
      sig = sigwaitinfo(&stop, nullptr);
    } else {
      const timespec t{static_cast<time_t>(seconds), 0};
      sig = sigtimedwait(&stop, nullptr, &t);
    }
    if (sig > 0) {
      return true;
    }
    if (errno != EINTR) {
      return false;  // EAGAIN: the time passed
    }
  }
}

}  // namespace ibcni::plugin
