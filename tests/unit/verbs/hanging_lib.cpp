// SPDX-License-Identifier: Apache-2.0
// Loaded by dlopen_probe_test in place of libibverbs.so.1: its constructor never returns, so the
// probe's child hangs inside dlopen until the parent kills it.
#include <unistd.h>

namespace {

[[gnu::constructor]] void hangForever() {
  for (;;) {
    ::pause();
  }
}

}  // namespace
