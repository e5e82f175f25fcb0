// SPDX-License-Identifier: Apache-2.0
#include "support/exec_program.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>

namespace ibcni::testing {

std::string ProgramRun::describe() const {
  return "exit " + std::to_string(status) + "\n--- stdout ---\n" + out + "\n--- stderr ---\n" + err;
}

std::vector<std::string> CniEnv::toVector() const {
  std::vector<std::string> env{kPathEnv};
  const std::pair<const char*, const std::optional<std::string>*> vars[] = {
      {"CNI_COMMAND", &command}, {"CNI_CONTAINERID", &containerId},
      {"CNI_NETNS", &netns},     {"CNI_IFNAME", &ifName},
      {"CNI_PATH", &path},       {"CNI_ARGS", &args}};
  for (const auto& [name, value] : vars) {
    if (*value) {
      env.push_back(std::string(name) + "=" + **value);
    }
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

ProgramRun runProgram(const std::string& path, const std::vector<std::string>& env,
                      const std::optional<std::string>& input, std::chrono::milliseconds timeout) {
  return runProgram(std::vector<std::string>{path}, env, input, timeout);
}

ProgramRun runProgram(const std::vector<std::string>& args, const std::vector<std::string>& env,
                      const std::optional<std::string>& input, std::chrono::milliseconds timeout) {
  ProgramRun run;
  if (args.empty()) {
    run.err = "runProgram: no program";
    return run;
  }
  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  if ((input && ::pipe2(in, O_CLOEXEC) != 0) || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    run.err = std::string("pipe2: ") + std::strerror(errno);
    return run;
  }
  std::vector<char*> argv;
  for (const auto& a : args) {
    argv.push_back(const_cast<char*>(a.c_str()));
  }
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) {
    envp.push_back(const_cast<char*>(e.c_str()));
  }
  envp.push_back(nullptr);

  run.started = ProgramRun::Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    run.err = std::string("fork: ") + std::strerror(errno);
    return run;
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only. dup2 clears close-on-exec on 0, 1 and 2.
    if (input) {
      if (::dup2(in[0], STDIN_FILENO) < 0) {
        ::_exit(126);
      }
    } else {
      ::close(STDIN_FILENO);
    }
    if (::dup2(out[1], STDOUT_FILENO) < 0 || ::dup2(err[1], STDERR_FILENO) < 0) {
      ::_exit(126);
    }
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  if (input) {
    ::close(in[0]);
  }
  ::close(out[1]);
  ::close(err[1]);
  int inFd = in[1];
  if (inFd >= 0) {
    ::fcntl(inFd, F_SETFL, ::fcntl(inFd, F_GETFL) | O_NONBLOCK);
    if (input->empty()) {
      ::close(inFd);
      inFd = -1;
    }
  }
  ChildPipes pipes{inFd, out[0], err[0], inFd >= 0 ? std::string_view(*input) : std::string_view()};
  collectChild(pid, pipes, timeout, run);
  return run;
}

void collectChild(pid_t pid, ChildPipes& pipes, std::chrono::milliseconds timeout, ProgramRun& run) {
  std::size_t written = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timedOut = false;
  while (pipes.out >= 0 || pipes.err >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timedOut = true;
      break;
    }
    pollfd fds[3] = {{pipes.out, POLLIN, 0}, {pipes.err, POLLIN, 0}, {pipes.in, POLLOUT, 0}};
    if (::poll(fds, 3, static_cast<int>(left.count())) < 0) {
      if (errno == EINTR) {
        continue;
      }
      break;
    }
    if (pipes.in >= 0 && fds[2].revents != 0) {
      const ssize_t w = ::write(pipes.in, pipes.input.data() + written, pipes.input.size() - written);
      if (w > 0) {
        written += static_cast<std::size_t>(w);
      }
      if ((w < 0 && errno != EINTR && errno != EAGAIN) || written == pipes.input.size()) {
        ::close(pipes.in);
        pipes.in = -1;
      }
    }
    for (int i = 0; i < 2; ++i) {
      int& fd = i == 0 ? pipes.out : pipes.err;
      if (fd < 0 || fds[i].revents == 0) {
        continue;
      }
      char buf[8192];
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? run.out : run.err).append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fd);
        fd = -1;
      }
    }
  }
  if (timedOut) {
    ::kill(pid, SIGKILL);
  }
  for (int* fd : {&pipes.in, &pipes.out, &pipes.err}) {
    if (*fd >= 0) {
      ::close(*fd);
      *fd = -1;
    }
  }
  int status = 0;
  rusage usage{};
  while (::wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  run.reaped = ProgramRun::Clock::now();
  run.maxRssKiB = usage.ru_maxrss;
  run.cpuMs = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e3 +
              static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e3;
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (timedOut) {
    run.err += "\n[killed after " + std::to_string(timeout.count()) + " ms]";
  }
}

pid_t spawnTiedToTest(std::vector<std::string> args, std::vector<std::string> env, int inFd, int outFd, int errFd) {
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : env) {
    envp.push_back(e.data());
  }
  envp.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) {
    return pid;
  }
  // Child: async-signal-safe calls only. Dies with the test process, even when it crashes.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) {
    ::_exit(126);
  }
  if (::dup2(inFd, STDIN_FILENO) < 0 || ::dup2(outFd, STDOUT_FILENO) < 0 || ::dup2(errFd, STDERR_FILENO) < 0) {
    ::_exit(126);
  }
  ::execve(argv[0], argv.data(), envp.data());
  ::_exit(127);
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string indentedTail(const std::string& text, int lines) {
  std::deque<std::string> last;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) {
      last.pop_front();
    }
  }
  std::string out;
  for (const auto& l : last) {
    out += "    " + l + "\n";
  }
  return out;
}

std::string readToEnd(int fd) {
  std::string out;
  char buf[8192];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) {
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

}  // namespace ibcni::testing
