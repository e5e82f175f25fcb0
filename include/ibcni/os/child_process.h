// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string>

#include "ibcni/os/sys_error.h"

namespace ibcni::os {

/// What a forked child that answers over a pipe needs (the verbs probe, the RDMA counters reader):
/// the child's start, the parent's bounded read of the answer and the child's reaping.

/// In the child, first: SIGKILL when the parent dies (PR_SET_PDEATHSIG).
/// @return false when the parent (pid `parent`) already died before that: the child should _exit.
[[nodiscard]] bool dieWithParent(pid_t parent) noexcept;

/// Everything written to `fd` until its last writer closes it.
/// @param what names the child in errors.
/// @return ETIMEDOUT once `deadline` has passed, EPROTO when the answer grows beyond `maxBytes`, the
///         errno of poll or read otherwise. On any error the caller kills and reaps the child.
[[nodiscard]] SysResult<std::string> readChildAnswer(int fd, std::chrono::steady_clock::time_point deadline,
                                                     std::size_t maxBytes, const std::string& what);

/// waitpid, retried on EINTR. @return the wait status (0 if waitpid failed otherwise).
int reapChild(pid_t pid) noexcept;

/// SIGKILL, then reapChild.
void killAndReapChild(pid_t pid) noexcept;

/// "exited with status N", "killed by signal KILL" or "ended with wait status N".
[[nodiscard]] std::string describeWaitStatus(int status);

}  // namespace ibcni::os
