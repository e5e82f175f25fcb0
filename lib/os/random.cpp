// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/random.h"

#include <sys/random.h>
#include <time.h>
#include <unistd.h>

namespace ibcni::os {

std::uint64_t randomBits() {
  std::uint64_t bits = 0;
  if (getrandom(&bits, sizeof bits, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof bits)) {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    bits = static_cast<std::uint64_t>(getpid()) * 0x9E3779B97F4A7C15ULL ^ static_cast<std::uint64_t>(now.tv_nsec) ^
           (static_cast<std::uint64_t>(now.tv_sec) << 32);
  }
  return bits;
}

}  // namespace ibcni::os
