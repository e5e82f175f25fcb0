// SPDX-License-Identifier: Apache-2.0
// Fault injection for the test build `ibcni-faulty` (IBCNI_FAULT_INJECTION / IBCNI_BUILD_TESTS):
// every mutating call of the plugin's dependencies is one numbered step, and step N fails as the
// kernel (or the filesystem, or the IPAM plugin) would have failed it. Never part of `ibcni`.
//
//   IBCNI_FAULT_STEP=N      fail the N-th mutating call (1-based), once; unset or 0: fail none
//   IBCNI_FAULT_ERRNO=E     the errno of the failure: a number or a name ("EEXIST"); default per
//                           kind of call (EBUSY for links and devices, ENOSPC/EIO for records)
//   IBCNI_FAULT_TRACE=path  append one line per mutating call: step, call, arguments, outcome
//   IBCNI_FAULT_KILL_AFTER=N  SIGKILL the process right after the N-th mutating call returned (a
//                           crash at an exact point: the window between step N and step N+1)
#pragma once

#ifndef IBCNI_FAULT_INJECTION_BUILD
#error "tests/support/fault/ is compiled into ibcni-faulty and tests only, never into the release ibcni"
#endif

#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "ibcni/os/sys_error.h"
#include "ibcni/os/unique_fd.h"

namespace ibcni::fault {

/// The environment variables ibcni-faulty reads.
inline constexpr const char* kStepEnv = "IBCNI_FAULT_STEP";
inline constexpr const char* kErrnoEnv = "IBCNI_FAULT_ERRNO";
inline constexpr const char* kTraceEnv = "IBCNI_FAULT_TRACE";
inline constexpr const char* kKillAfterEnv = "IBCNI_FAULT_KILL_AFTER";

/// Counts mutating calls and decides which one fails. One per process (or per test).
class FaultPlan {
 public:
  /// No fault, no trace: every call passes through.
  FaultPlan() = default;
  /// @param failStep  the step to fail (1-based; 0: none)
  /// @param err       its errno (0: the call's default)
  /// @param tracePath where to append the trace ("" : no trace)
  /// @param killAfter the step after which the process kills itself with SIGKILL (0: never)
  FaultPlan(unsigned failStep, int err, const std::string& tracePath, unsigned killAfter = 0);
  FaultPlan(const FaultPlan&) = delete;
  FaultPlan& operator=(const FaultPlan&) = delete;

  /// Reads IBCNI_FAULT_STEP, IBCNI_FAULT_ERRNO, IBCNI_FAULT_TRACE and IBCNI_FAULT_KILL_AFTER
  /// through `getenv`.
  /// @return the plan, or a message naming the variable that is malformed.
  [[nodiscard]] static std::expected<std::unique_ptr<FaultPlan>, std::string> fromEnvironment(
      const std::function<std::optional<std::string>(const char*)>& getenv);

  /// Runs one mutating call `real` (returning an os::SysResult): counts it and traces it, or, when
  /// it is the planned step, fails it without calling `real`.
  /// @param what        the call and its arguments, for the trace ("renameLink ns=... index=3 name=x")
  /// @param defaultErr  the errno of an injected failure when IBCNI_FAULT_ERRNO is not set
  template <class F>
  [[nodiscard]] auto run(const std::string& what, int defaultErr, F&& real) -> decltype(real()) {
    if (auto injected = next(what, defaultErr)) {
      return std::unexpected(*injected);
    }
    auto r = std::forward<F>(real)();
    trace(r ? std::string("ok") : "error " + os::errnoName(r.error().err));
    return r;
  }

  /// Counts one mutating call; returns the injected error when it is the planned step (traced as
  /// such), else nullopt (the caller then makes the call and reports its outcome with trace()).
  [[nodiscard]] std::optional<os::SysError> next(const std::string& what, int defaultErr);
  /// Writes the trace line of the call next() let through (then dies if it is the kill step).
  void trace(const std::string& outcome);

  /// Mutating calls seen so far.
  [[nodiscard]] unsigned steps() const noexcept { return steps_; }
  /// True once the planned failure was injected.
  [[nodiscard]] bool fired() const noexcept { return fired_; }

  /// For tests that run the plugin in-process on fakes: at the kill step, `instead` is called in
  /// place of SIGKILL (it records the world as the dead process would have left it; the test then
  /// puts that world back and runs DEL on it). Unset: the process kills itself.
  void onKill(std::function<void()> instead) { onKill_ = std::move(instead); }

 private:
  void writeLine(const std::string& line);

  unsigned failStep_ = 0;
  int err_ = 0;
  unsigned killAfter_ = 0;
  unsigned steps_ = 0;
  bool fired_ = false;
  std::string pending_;  // "N\twhat" of the call in flight
  std::function<void()> onKill_;
  os::UniqueFd trace_;
};

/// The errno named `text` ("EBUSY") or given as a number ("16"); nullopt when it is neither.
[[nodiscard]] std::optional<int> parseErrno(const std::string& text);

}  // namespace ibcni::fault
