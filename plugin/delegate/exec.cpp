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

// Starts `path` with stdin from `in` and stdout to `out`. argv and envp are built before the fork:
// the child makes only async-signal-safe calls until exec.
os::SysResult<pid_t> spawn(const std::string& path, const std::vector<std::string>& env, const Pipe& in,
                           const Pipe& out) {
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
    if (::dup2(in.read.get(), STDIN_FILENO) < 0 || ::dup2(out.write.get(), STDOUT_FILENO) < 0) {
      ::_exit(127);
    }
    ::execve(path.c_str(), argv, envp.data());
    ::_exit(127);
  }
  return pid;
}

// One write of what is left of `input` to the child's stdin; closes it when all is written or the
// child closed its end.
void feedInput(os::UniqueFd& stdinFd, std::string_view input, std::size_t& written) {
  ssize_t w = ::write(stdinFd.get(), input.data() + written, input.size() - written);
  if (w > 0) {
    written += static_cast<std::size_t>(w);
  }
  if (w < 0 && errno != EINTR && errno != EAGAIN) {
    stdinFd.reset();  // the child closed its stdin: it does not want the rest
  } else if (written == input.size()) {
    stdinFd.reset();
  }
}

// One read of the child's stdout into `text`; closes it at its end or on an error.
void drainOutput(os::UniqueFd& stdoutFd, std::string& text) {
  char buf[8192];
  ssize_t r = ::read(stdoutFd.get(), buf, sizeof buf);
  if (r > 0) {
    text.append(buf, static_cast<std::size_t>(r));
  } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
    stdoutFd.reset();
  }
}

// Feeds `input` to the child's stdin and drains its stdout into `text` together, so that neither
// side can block the other, until its stdout closes; true when `timeout` passed first.
bool exchange(os::UniqueFd& stdinFd, os::UniqueFd& stdoutFd, std::string_view input, std::chrono::milliseconds timeout,
              std::string& text) {
  std::signal(SIGPIPE, SIG_IGN);
  std::size_t written = 0;
  if (input.empty()) {
    stdinFd.reset();
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (stdoutFd) {
    struct pollfd fds[2] = {{stdoutFd.get(), POLLIN, 0}, {stdinFd ? stdinFd.get() : -1, POLLOUT, 0}};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return true;
    }
    int n = ::poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      break;
    }
    if (stdinFd && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
      feedInput(stdinFd, input, written);
    }
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      drainOutput(stdoutFd, text);
    }
  }
  return false;
}

// The child's wait status, once it has ended.
os::SysResult<int> reap(pid_t pid, const std::string& path) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return os::sysFail(errno, "wait for " + path);
    }
  }
  return status;
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
  auto pid = spawn(path, env, *in, *out);
  if (!pid) {
    return std::unexpected(pid.error());
  }
  in->read.reset();
  out->write.reset();
  // Non-blocking on ibcni's ends only (the child's ends are other open file descriptions): a
  // blocking write of a large config would deadlock against a child that writes before it reads,
  // and would keep the timeout from firing.
  for (int fd : {in->write.get(), out->read.get()}) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }

  ExecOutput result;
  const bool timedOut = exchange(in->write, out->read, input, timeout, result.stdoutText);
  if (timedOut) {
    ::kill(*pid, SIGKILL);
  }
  auto status = reap(*pid, path);
  if (!status) {
    return std::unexpected(status.error());
  }
  if (timedOut) {
    return os::sysFail(ETIMEDOUT, "run " + path + " (killed after " + std::to_string(timeout.count() / 1000) + " s)");
  }
  if (WIFEXITED(*status)) {
    result.exitStatus = WEXITSTATUS(*status);
  } else if (WIFSIGNALED(*status)) {
    result.exitStatus = 128 + WTERMSIG(*status);
  }
  if (result.exitStatus == 127 && result.stdoutText.empty()) {
    return os::sysFail(ENOEXEC, "exec " + path);
  }
  return result;
}

}  // namespace ibcni::delegate
