// SPDX-License-Identifier: Apache-2.0
#include "plugin/delegate/exec.h"

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ibcni/os/unique_fd.h"

namespace ibcni::delegate {

namespace {

struct Pipe {
  os::UniqueFd read;
  os::UniqueFd write;
};

os::SysResult<Pipe> makePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return os::sysFail(errno, "pipe2");
  }
  return Pipe{os::UniqueFd(fds[0]), os::UniqueFd(fds[1])};
}

}  // namespace

std::string findInPath(const std::string& name, const std::vector<std::string>& dirs) {
  for (const auto& dir : dirs) {
    std::string candidate = dir + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return {};
}

os::SysResult<ExecOutput> runProcess(const std::string& path, const std::vector<std::string>& env,
                                     std::string_view input, std::chrono::milliseconds timeout) {
  auto in = makePipe();
  if (!in) {
    return std::unexpected(in.error());
  }
  auto out = makePipe();
  if (!out) {
    return std::unexpected(out.error());
  }
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (const auto& e : env) {
    envp.push_back(const_cast<char*>(e.c_str()));
  }
  envp.push_back(nullptr);
  char* argv[] = {const_cast<char*>(path.c_str()), nullptr};

  pid_t pid = ::fork();
  if (pid < 0) {
    return os::sysFail(errno, "fork for " + path);
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec. dup2 clears close-on-exec on 0 and 1.
    if (::dup2(in->read.get(), STDIN_FILENO) < 0 || ::dup2(out->write.get(), STDOUT_FILENO) < 0) {
      ::_exit(127);
    }
    ::execve(path.c_str(), argv, envp.data());
    ::_exit(127);
  }
  in->read.reset();
  out->write.reset();
  // Non-blocking on ibcni's ends only (the child's ends are other open file descriptions): a
  // blocking write of a large config would deadlock against a child that writes before it reads,
  // and would keep the timeout from firing.
  for (int fd : {in->write.get(), out->read.get()}) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }

  // Feed stdin and drain stdout together so that neither side can block the other.
  std::signal(SIGPIPE, SIG_IGN);
  ExecOutput result;
  std::size_t written = 0;
  if (input.empty()) {
    in->write.reset();
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timedOut = false;
  while (out->read) {
    struct pollfd fds[2] = {{out->read.get(), POLLIN, 0}, {in->write ? in->write.get() : -1, POLLOUT, 0}};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timedOut = true;
      break;
    }
    int n = ::poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      break;
    }
    if (in->write && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
      ssize_t w = ::write(in->write.get(), input.data() + written, input.size() - written);
      if (w > 0) {
        written += static_cast<std::size_t>(w);
      }
      if (w < 0 && errno != EINTR && errno != EAGAIN) {
        in->write.reset();  // the child closed its stdin: it does not want the rest
      } else if (written == input.size()) {
        in->write.reset();
      }
    }
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      char buf[8192];
      ssize_t r = ::read(out->read.get(), buf, sizeof buf);
      if (r > 0) {
        result.stdoutText.append(buf, static_cast<std::size_t>(r));
      } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
        out->read.reset();
      }
    }
  }
  if (timedOut) {
    ::kill(pid, SIGKILL);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return os::sysFail(errno, "wait for " + path);
    }
  }
  if (timedOut) {
    return os::sysFail(ETIMEDOUT, "run " + path + " (killed after " + std::to_string(timeout.count() / 1000) + " s)");
  }
  if (WIFEXITED(status)) {
    result.exitStatus = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exitStatus = 128 + WTERMSIG(status);
  }
  if (result.exitStatus == 127 && result.stdoutText.empty()) {
    return os::sysFail(ENOEXEC, "exec " + path);
  }
  return result;
}

}  // namespace ibcni::delegate
