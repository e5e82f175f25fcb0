// SPDX-License-Identifier: Apache-2.0
// Runs one schedule from scratch: a fresh World (a new tag: fresh node and pool names, an etcd
// prefix and data dirs of its own), the steps one after another with I1 checked after each, the
// end-of-schedule checks, then everything the schedule left cleaned up (its pods killed, its keys
// and Leases deleted, its Node objects removed, its data dirs removed). Steps come from the
// generator (a new schedule) or from a list (a replay, a shrinking candidate).
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "backend.h"
#include "schedule.h"
#include "world.h"

namespace ibcni::chaos {

struct RunResult {
  Schedule schedule;  ///< the steps that ran, with their outcomes
  std::optional<Violation> violation;
  std::string end;    ///< the end-of-schedule summary
  double seconds = 0;
};

class Runner {
 public:
  Runner(Backend& backend, const Tools& tools, Stats& stats, const std::atomic<bool>& stop);

  [[nodiscard]] Backend& backend() noexcept { return backend_; }
  /// A new schedule of `steps` steps drawn by the generator for `params`.
  [[nodiscard]] RunResult generate(const ScheduleParams& params, int steps);
  /// `schedule`'s steps as they are (skipped where their preconditions do not hold).
  [[nodiscard]] RunResult replay(const Schedule& schedule);
  /// Replays until `kind` shows up, up to `tries` times (real processes are not deterministic).
  [[nodiscard]] std::optional<RunResult> reproduce(const Schedule& schedule, const std::string& kind, int tries);

 private:
  template <typename NextStep>
  RunResult execute(const ScheduleParams& params, NextStep next, std::size_t maxSteps);
  void prepare(World& world);
  void cleanUp(World& world);
  [[nodiscard]] std::string newTag();

  Backend& backend_;
  const Tools& tools_;
  Stats& stats_;
  const std::atomic<bool>& stop_;
};

}  // namespace ibcni::chaos
