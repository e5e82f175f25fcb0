// SPDX-License-Identifier: Apache-2.0
// Shared by the libFuzzer targets of this folder: what a target does when the code under test
// broke a promise it makes (a property, not a crash): print it and abort, which libFuzzer reports
// as a crash and saves the input for.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace ibcni::fuzz {

[[noreturn]] inline void broken(std::string_view what, std::string_view detail = {}) {
  std::fprintf(stderr, "fuzz property broken: %.*s %.*s\n", static_cast<int>(what.size()), what.data(),
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

inline void require(bool ok, std::string_view what, std::string_view detail = {}) {
  if (!ok) {
    broken(what, detail);
  }
}

}  // namespace ibcni::fuzz
