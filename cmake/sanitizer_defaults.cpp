// SPDX-License-Identifier: Apache-2.0
// Linked into every executable of an IBCNI_SANITIZE build (cmake/IbcniSanitize.cmake): the
// sanitizers' defaults, so that a report fails the process with a status no test expects (66,
// where ibcni's own failures are 1), even when the process was started with a fresh environment.
// ASAN_OPTIONS / UBSAN_OPTIONS in the environment override them.

extern "C" {

// NOLINTBEGIN: names and linkage are fixed by the sanitizer runtimes.
const char* __asan_default_options();
const char* __ubsan_default_options();

__attribute__((used, visibility("default"))) const char* __asan_default_options() {
  return "halt_on_error=1:exitcode=66:detect_leaks=1:detect_stack_use_after_return=1:"
         "check_initialization_order=1:strict_init_order=1";
}

__attribute__((used, visibility("default"))) const char* __ubsan_default_options() {
  return "halt_on_error=1:print_stacktrace=1:exitcode=66";
}
// NOLINTEND

}  // extern "C"
