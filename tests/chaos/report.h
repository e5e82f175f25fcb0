// SPDX-License-Identifier: Apache-2.0
// What a run prints and writes: the summary (schedules, steps, ops and outcomes per kind,
// violations, time per schedule) and a violation's report (seed, full schedule, shrunk
// schedule), both also written to --out as schedule files that --replay runs again.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runner.h"
#include "shrink.h"
#include "world.h"

namespace ibcni::chaos {

struct RunSummary {
  std::string backend;
  std::string plugin;
  bool baseline = false;
  std::string profile;
  std::uint64_t seed = 0;
  long schedules = 0;
  long steps = 0;
  std::vector<double> secondsPerSchedule;
  double wallSeconds = 0;
  Stats stats;
  int violations = 0;
  std::map<std::string, int> violationsByKind;
  long firstViolationSchedule = -1;  ///< its index in the run (-1: none)
  double firstViolationSeconds = 0;  ///< into the run
};

/// The summary, as printed at the end of a run.
[[nodiscard]] std::string summaryText(const RunSummary& s);

/// A violation's report. Writes <out>/<kind>-seed<seed>.schedule (and .shrunk.schedule when
/// shrunk); returns the text printed (with the files' paths and the replay command).
[[nodiscard]] std::string violationReport(const RunResult& failing, const ShrinkResult* shrunk,
                                          const std::string& outDir, const std::string& plugin,
                                          double secondsToFind);

}  // namespace ibcni::chaos
