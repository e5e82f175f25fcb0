// SPDX-License-Identifier: Apache-2.0
#include "pod_process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace ibcni::chaos {

namespace {

// The child: a namespace of its own, one byte to say so, then nothing until killed.
[[noreturn]] void holdNamespace(int ready, pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) {
    ::_exit(1);
  }
  const char ok = ::unshare(CLONE_NEWNET) == 0 ? '1' : '0';
  if (::write(ready, &ok, 1) != 1 || ok != '1') {
    ::_exit(1);
  }
  ::close(ready);
  for (;;) {
    ::pause();
  }
}

}  // namespace

std::expected<PodProcess, std::string> PodProcess::start() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return std::unexpected(std::string("pipe2: ") + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return std::unexpected(std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    ::close(fds[0]);
    holdNamespace(fds[1], parent);
  }
  ::close(fds[1]);
  PodProcess p;
  p.pid_ = pid;
  p.netns_ = "/proc/" + std::to_string(pid) + "/ns/net";
  char ok = 0;
  ssize_t n = 0;
  while ((n = ::read(fds[0], &ok, 1)) < 0 && errno == EINTR) {
  }
  ::close(fds[0]);
  if (n != 1 || ok != '1') {
    p.kill();
    return std::unexpected("the pod process could not unshare(CLONE_NEWNET) (root is needed)");
  }
  return p;
}

PodProcess::PodProcess(PodProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), netns_(std::move(other.netns_)) {}

PodProcess& PodProcess::operator=(PodProcess&& other) noexcept {
  if (this != &other) {
    kill();
    pid_ = std::exchange(other.pid_, -1);
    netns_ = std::move(other.netns_);
  }
  return *this;
}

PodProcess::~PodProcess() { kill(); }

void PodProcess::kill() {
  if (pid_ <= 0) {
    return;
  }
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

}  // namespace ibcni::chaos
