// SPDX-License-Identifier: Apache-2.0
// Running a program as a runtime runs a CNI plugin: exactly the given environment (CniEnv: a
// request's CNI_* variables), the config on a stdin pipe (or stdin closed), stdout and stderr
// captured, a time limit. Shared by the binary tests, the conformance suite, the cluster
// simulation (collectChild) and the benchmarks (bench/), which also read the timing points and
// the peak RSS. And the servers tests talk to (etcd, the Kubernetes API emulator), started tied to
// the test process, with their logs.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

namespace ibcni::testing {

/// PATH as every process environment has it.
inline constexpr const char* kPathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The CNI_* variables of one request: std::nullopt means "not in the environment at all", ""
/// means "set and empty" (what libcni does for unused ones).
struct CniEnv {
  std::optional<std::string> command;
  std::optional<std::string> containerId;
  std::optional<std::string> netns;
  std::optional<std::string> ifName;
  std::optional<std::string> path;
  std::optional<std::string> args;
  std::vector<std::string> extra;  ///< further NAME=value entries

  /// The environment of the request: PATH (kPathEnv), the variables that are set, then `extra`.
  [[nodiscard]] std::vector<std::string> toVector() const;
};

/// What a finished child left behind.
struct ProgramRun {
  using Clock = std::chrono::steady_clock;

  int status = -1;  ///< exit status; 128 + signal number when killed
  std::string out;
  std::string err;
  long maxRssKiB = 0;         ///< peak RSS of the child and the children it waited for (wait4's ru_maxrss)
  double cpuMs = 0;           ///< the child's user + system CPU time (wait4's ru_utime + ru_stime)
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

/// The parent's ends of a started child's pipes (-1: closed) and what is still to be written to its
/// stdin.
struct ChildPipes {
  int in = -1;
  int out = -1;
  int err = -1;
  std::string_view input;
};

/// Writes the rest of `pipes.input` to the child's stdin and reads its stdout and stderr into
/// run.out and run.err until both end, SIGKILLs the child when `timeout` passes first ("[killed
/// after N ms]" is appended to err), closes the pipes (all -1 on return) and reaps `pid` into `run`
/// (status, reaped, maxRssKiB; run.started is the caller's).
void collectChild(pid_t pid, ChildPipes& pipes, std::chrono::milliseconds timeout, ProgramRun& run);

/// Starts a server a test talks to: forks and execs `args[0]` with `args` and exactly `env`, stdin,
/// stdout and stderr on `inFd`, `outFd` and `errFd`. The child dies with the test process, even
/// when that crashes (PR_SET_PDEATHSIG). Returns the child's pid, or -1 with errno when fork failed.
[[nodiscard]] pid_t spawnTiedToTest(std::vector<std::string> args, std::vector<std::string> env, int inFd, int outFd,
                                    int errFd);

/// The whole of the file `path` ("" when it cannot be read).
[[nodiscard]] std::string readFile(const std::string& path);

/// The last `lines` lines of `text` (a server's log, for a failure message), each indented by four
/// spaces and ended by a newline.
[[nodiscard]] std::string indentedTail(const std::string& text, int lines);

/// Everything readable from `fd` until end of file (a pipe a child writes its report to); blocks.
[[nodiscard]] std::string readToEnd(int fd);

}  // namespace ibcni::testing
