// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ibcni/os/sys_error.h"

namespace ibcni::os {

/// Undo steps for a multi-step change. After each successful mutation, register its undo with
/// add(). commit() on success forgets them; otherwise the destructor (or run()) executes them in
/// reverse order, and every undo that fails is reported to the failure sink (logged at warn
/// level by the plugin) instead of being swallowed.
class Rollback {
 public:
  using Undo = std::function<SysResult<void>()>;
  using FailureSink = std::function<void(const std::string& what, const SysError& err)>;

  explicit Rollback(FailureSink sink = {}) : sink_(std::move(sink)) {}
  Rollback(const Rollback&) = delete;
  Rollback& operator=(const Rollback&) = delete;
  ~Rollback() { run(); }

  /// Registers the undo of a change that just succeeded. `what` names it for the log.
  void add(std::string what, Undo undo) { steps_.push_back({std::move(what), std::move(undo)}); }

  /// Keeps every change: nothing will be undone.
  void commit() noexcept { steps_.clear(); }

  /// Runs the registered undos now, newest first.
  /// @return the number of undo steps that failed.
  int run();

  [[nodiscard]] std::size_t size() const noexcept { return steps_.size(); }

 private:
  struct Step {
    std::string what;
    Undo undo;
  };
  std::vector<Step> steps_;
  FailureSink sink_;
};

}  // namespace ibcni::os
