// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/child_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace ibcni::os {

bool dieWithParent(pid_t parent) noexcept {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  return ::getppid() == parent;
}

SysResult<std::string> readChildAnswer(int fd, std::chrono::steady_clock::time_point deadline,
                                       std::size_t maxBytes, const std::string& what) {
  std::string answer;
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return sysFail(ETIMEDOUT, what + ": no answer in time");
    }
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 60'000)));
    if (ready < 0 && errno != EINTR) {
      return sysFail(errno, "poll for " + what);
    }
    if (ready <= 0) {
      continue;  // the deadline check above ends the loop
    }
    std::array<char, 4096> buf{};
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      continue;
    }
    if (n < 0) {
      return sysFail(errno, "read answer of " + what);
    }
    if (n == 0) {
      return answer;
    }
    answer.append(buf.data(), static_cast<std::size_t>(n));
    if (answer.size() > maxBytes) {
      return sysFail(EPROTO, what + ": answer longer than " + std::to_string(maxBytes) + " bytes");
    }
  }
}

int reapChild(pid_t pid) noexcept {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return 0;
    }
  }
  return status;
}

void killAndReapChild(pid_t pid) noexcept {
  ::kill(pid, SIGKILL);
  (void)reapChild(pid);
}

std::string describeWaitStatus(int status) {
  if (WIFEXITED(status)) {
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return std::string("killed by signal ") + sigabbrev_np(WTERMSIG(status));
  }
  return "ended with wait status " + std::to_string(status);
}

}  // namespace ibcni::os
