// SPDX-License-Identifier: Apache-2.0
// Running a program as a runtime runs a CNI plugin: exactly the given environment, the config on a
// stdin pipe (or stdin closed), stdout and stderr captured, a time limit. Shared by the binary
// tests, the conformance suite and the benchmarks (bench/), which also read the timing points and
// the peak RSS.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ibcni::testing {

/// PATH as every process environment has it.
inline constexpr const char* kPathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What a finished child left behind.
struct ProgramRun {
  using Clock = std::chrono::steady_clock;

  int status = -1;  ///< exit status; 128 + signal number when killed
  std::string out;
  std::string err;
  long maxRssKiB = 0;         ///< peak RSS of the child and the children it waited for (wait4's ru_maxrss)
  Clock::time_point started;  ///< just before fork
  Clock::time_point reaped;   ///< when wait4 returned

  /// fork -> wait4: one invocation as the runtime that started it sees it.
  [[nodiscard]] Clock::duration elapsed() const { return reaped - started; }
  [[nodiscard]] std::string describe() const;
};

/// Runs `path` with exactly `env` as its environment. `input` is written to a stdin pipe (then
/// closed); std::nullopt runs the child with file descriptor 0 closed (`<&-`). The child inherits
/// the calling thread's network namespace. Killed after `timeout` ("[killed after N ms]" is
/// appended to err).
[[nodiscard]] ProgramRun runProgram(const std::string& path, const std::vector<std::string>& env,
                                    const std::optional<std::string>& input,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(60));

/// The same with arguments: `argv[0]` is the path of the program (and its argv[0]).
[[nodiscard]] ProgramRun runProgram(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                    const std::optional<std::string>& input,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(60));

/// Everything readable from `fd` until end of file (a pipe a child writes its report to); blocks.
[[nodiscard]] std::string readToEnd(int fd);

}  // namespace ibcni::testing
