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

/// One symbol for resolveSymbols: its name, and the function pointer its address goes to.
template <class Fn>
struct Symbol {
  const char* name;
  Fn& fn;
};
template <class Fn>
Symbol(const char*, Fn&) -> Symbol<Fn>;

/// Resolves every symbol in order, each one even after a failure (not short-circuited) so that
/// `missing` names the first absent one. @return whether all were found.
template <class... Fns>
bool resolveSymbols(void* lib, std::string& missing, Symbol<Fns>... symbols) {
  bool ok = true;
  ((ok = resolveSymbol(lib, symbols.name, symbols.fn, missing) && ok), ...);
  return ok;
}

}  // namespace ibcni::os
