// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

namespace ibcni::os {

/// 64 random bits from getrandom(2) (glibc 2.25), never std::random_device: GCC 12's libstdc++
/// built on glibc 2.36 implements that with arc4random, which alone would raise the plugins' glibc
/// floor to 2.36 and keep them off Ubuntu 22.04 (deploy/check-portable.sh). Falls back to the pid
/// and the clock when the entropy pool is not ready yet: enough to tell two invocations apart
/// (temporary link names, the order in which free blocks are tried), never for secrets.
[[nodiscard]] std::uint64_t randomBits();

}  // namespace ibcni::os
