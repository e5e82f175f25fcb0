// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/os/sys_error.h"

namespace ibcni::delegate {

/// What a finished child process left.
struct ExecOutput {
  int exitStatus = 0;   ///< exit code, or 128 + signal number
  std::string stdoutText;
};

/// Runs `path` with `env` (KEY=VALUE strings), writes `input` to its stdin and collects its stdout.
/// Its stderr is the plugin's own (the runtime's log). The child is killed after `timeout`.
/// Close-on-exec keeps ibcni's fds (locks, sockets) out of the child.
/// @return ETIMEDOUT when killed for the timeout, or the errno of pipe/fork/exec.
[[nodiscard]] os::SysResult<ExecOutput> runProcess(const std::string& path, const std::vector<std::string>& env,
                                                   std::string_view input, std::chrono::milliseconds timeout);

/// The first regular, executable file named `name` in `dirs`, in order; empty when none.
[[nodiscard]] std::string findInPath(const std::string& name, const std::vector<std::string>& dirs);

}  // namespace ibcni::delegate
