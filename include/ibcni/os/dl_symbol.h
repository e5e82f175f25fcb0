// SPDX-License-Identifier: Apache-2.0
// Resolving the functions of a library loaded with dlopen(3) (libibverbs for the verbs probe, libcurl
// for the HTTP client): each symbol once, the first failure kept to say which.
#pragma once

#include <dlfcn.h>

#include <string>

namespace ibcni::os {

/// Sets `fn` to symbol `name` of `lib`. On failure leaves `fn` alone, returns false, and sets
/// `missing` (unless an earlier failure already did) to dlerror()'s text.
template <class Fn>
bool resolveSymbol(void* lib, const char* name, Fn& fn, std::string& missing) {
  dlerror();
  void* sym = dlsym(lib, name);
  if (sym == nullptr) {
    if (missing.empty()) {
      const char* why = dlerror();
      missing = why != nullptr ? why : std::string("dlsym ") + name + ": not found";
    }
    return false;
  }
  fn = reinterpret_cast<Fn>(sym);
  return true;
}

}  // namespace ibcni::os
