// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/boot_clock.h"

#include <time.h>

#include "ibcni/os/file_io.h"

namespace ibcni::os {

namespace {

std::string readBootId() {
  auto text = readFile("/proc/sys/kernel/random/boot_id", 128);
  if (!text) {
    return "unknown";
  }
  std::string id = *text;
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) {
    id.pop_back();
  }
  return id.empty() ? "unknown" : id;
}

}  // namespace

BootStamp bootNow() {
  static const std::string boot = readBootId();
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return BootStamp{boot, static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec};
}

std::optional<std::chrono::nanoseconds> elapsed(const BootStamp& then, const BootStamp& now) {
  if (then.empty() || now.empty() || then.boot != now.boot || then.ns > now.ns) {
    return std::nullopt;
  }
  return std::chrono::nanoseconds(now.ns - then.ns);
}

}  // namespace ibcni::os
