// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace ibcni::os {

/// A moment on this boot's clock, comparable across processes: the kernel's boot ID
/// (/proc/sys/kernel/random/boot_id) and CLOCK_BOOTTIME, which neither jumps with the wall clock
/// nor stops while the machine is suspended. Durations the IPAM must not get wrong (how long ago a
/// hold was confirmed) are measured on it; a stamp of another boot has no known age.
struct BootStamp {
  std::string boot;     ///< boot ID; empty: no stamp
  std::int64_t ns = 0;  ///< CLOCK_BOOTTIME in nanoseconds
  [[nodiscard]] bool empty() const noexcept { return boot.empty(); }
  bool operator==(const BootStamp&) const = default;
};

/// Now, on this boot's clock.
[[nodiscard]] BootStamp bootNow();

/// How long ago `then` was, seen at `now`: nullopt when either is empty, they are of different
/// boots, or `then` is later than `now`.
[[nodiscard]] std::optional<std::chrono::nanoseconds> elapsed(const BootStamp& then, const BootStamp& now);

}  // namespace ibcni::os
