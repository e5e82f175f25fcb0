// SPDX-License-Identifier: Apache-2.0
// Where the time of one invocation goes, at logLevel debug: the process marks the end of each
// phase (a lap: the time since the previous mark) and, at the end, writes one debug line
//   timing: start=<ns> stdin=<us> setup=<us> ... end=<ns>
// with the CLOCK_MONOTONIC times of the first and last marks, so that whoever exec'd the plugin
// can line them up with its own clock (process start = start - fork, exit = wait - end; see
// bench/cni_bench_breakdown.cpp). A mark is one clock read into a fixed array, taken at any level;
// only the line is limited to debug. Nothing is recorded until start() is called (by runMain), so
// tests that call dispatch directly see no timing line.
#pragma once

#include <time.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/log/log.h"

namespace ibcni::log::timing {

struct Laps {
  struct Lap {
    const char* name;
    std::int64_t ns;
  };
  std::int64_t start = 0;
  std::int64_t last = 0;
  std::array<Lap, 24> laps{};
  std::size_t count = 0;
};

inline Laps& laps() {
  static Laps l;
  return l;
}

inline std::int64_t monotonicNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// The origin: the first line of main.
inline void start() {
  Laps& l = laps();
  l.start = l.last = monotonicNs();
  l.count = 0;
}

/// Ends the phase `name` (a string literal).
inline void lap(const char* name) {
  Laps& l = laps();
  if (l.start == 0) {
    return;
  }
  const std::int64_t now = monotonicNs();
  if (l.count < l.laps.size()) {
    l.laps[l.count++] = {name, now - l.last};
  }
  l.last = now;
}

/// The timing line, at debug level only.
inline void report() {
  const Laps& l = laps();
  if (l.start == 0 || !enabled(Level::kDebug)) {
    return;
  }
  std::string text = "timing: start=" + std::to_string(l.start);
  for (std::size_t i = 0; i < l.count; ++i) {
    text += fmt::format(" {}={:.1f}", l.laps[i].name, static_cast<double>(l.laps[i].ns) / 1000.0);
  }
  text += " end=" + std::to_string(l.last);
  write(Level::kDebug, text);
}

}  // namespace ibcni::log::timing
