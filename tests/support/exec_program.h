// SPDX-License-Identifier: Apache-2.0
// Running a program as a runtime runs a CNI plugin: exactly the given environment, the config on a
// stdin pipe (or stdin closed), stdout and stderr captured, a time limit. Shared by the binary
// tests and the conformance suite.
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
  int status = -1;  ///< exit status; 128 + signal number when killed
  std::string out;
  std::string err;

  [[nodiscard]] std::string describe() const;
};

/// Runs `path` with exactly `env` as its environment. `input` is written to a stdin pipe (then
/// closed); std::nullopt runs the child with file descriptor 0 closed (`<&-`). The child inherits
/// the calling thread's network namespace. Killed after `timeout` ("[killed after N ms]" is
/// appended to err).
[[nodiscard]] ProgramRun runProgram(const std::string& path, const std::vector<std::string>& env,
                                    const std::optional<std::string>& input,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace ibcni::testing
