// SPDX-License-Identifier: Apache-2.0
// A daemon a test starts and stops (ibcni-dra, kubelet-dra): tied to the test process, its output
// in a log file, stopped by its PID with a signal; optionally one that takes commands on stdin
// and answers each with one JSON line (kubelet-dra).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/exec_program.h"

namespace ibcni::testing {

/// A loopback TCP port that was free a moment ago (for a daemon's listener); 0 when none was found.
inline int freeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof a;
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size) == 0;
  if (fd >= 0) {
    ::close(fd);
  }
  return ok ? ntohs(a.sin_port) : 0;
}

/// A program the test starts and stops; its stdout and stderr go to `log`.
class DaemonProcess {
 public:
  DaemonProcess(const std::vector<std::string>& args, const std::string& log, bool commands = false) {
    int in[2] = {-1, -1};
    int out[2] = {-1, -1};
    if (commands && (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)) {
      return;
    }
    const int logFd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    const int nullFd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_ = spawnTiedToTest(args, {kPathEnv}, commands ? in[0] : nullFd, commands ? out[1] : logFd,
                                    logFd);
    for (int fd : {in[0], out[1], logFd, nullFd}) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
    toChild_ = in[1];
    fromChild_ = out[0];
  }
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;
  ~DaemonProcess() {
    if (toChild_ >= 0) {
      (void)!::write(toChild_, "quit\n", 5);
    }
    (void)stop(SIGTERM);
    for (int fd : {toChild_, fromChild_}) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
  }

  [[nodiscard]] bool started() const { return pid_ > 0; }
  /// Its pid while it runs; -1 once stopped.
  [[nodiscard]] pid_t pid() const { return pid_; }

  /// One command line to kubelet-dra and its one-line JSON answer (null when none came in time).
  nlohmann::json ask(const std::string& command, std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    const std::string line = command + "\n";
    if (::write(toChild_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return nullptr;
    }
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
        nlohmann::json answer = nlohmann::json::parse(buffer_.substr(0, nl), nullptr, false);
        buffer_.erase(0, nl + 1);
        return answer.is_discarded() ? nlohmann::json(nullptr) : answer;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fromChild_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
        return nullptr;
      }
      char chunk[4096];
      const ssize_t n = ::read(fromChild_, chunk, sizeof chunk);
      if (n <= 0) {
        return nullptr;
      }
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  /// ask() again every half second until the answer is ok, as the kubelet's pod workers retry a
  /// pod's sync (its gRPC connection to a driver that restarted reconnects with backoff, and it
  /// learns that a registration socket went only from its watcher); the last answer.
  nlohmann::json askUntilOk(const std::string& command, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      nlohmann::json answer = ask(command);
      if (answer.value("ok", false) || std::chrono::steady_clock::now() > deadline) {
        return answer;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }

  /// Sends `sig` and reaps the process (SIGKILL after 20 s); its wait status, -1 when it was gone.
  int stop(int sig) {
    if (pid_ <= 0) {
      return -1;
    }
    ::kill(pid_, sig);
    int status = 0;
    for (int i = 0; i < 2000 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (::waitpid(pid_, &status, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int toChild_ = -1;
  int fromChild_ = -1;
  std::string buffer_;
};

/// ibcni-agent serving the plugins' relay socket (`dir`/http-relay.sock) and nothing else (no passes,
/// its state in `dir`, its metrics on a free loopback port), as every node's agent does; its log in
/// `dir`/agent.log. up() once the socket is there (waited for at most 10 s).
class RelayAgent {
 public:
  RelayAgent(const std::string& binary, const std::string& dir)
      : socket_(dir + "/http-relay.sock"),
        process_({binary, "--interval", "0", "--metrics-listen", "127.0.0.1:" + std::to_string(freeLoopbackPort()),
                  "--state-dir", prepared(dir), "--ipam-data-dir", dir, "--pool-index-dir", "",
                  "--http-relay-socket", socket_},
                 dir + "/agent.log") {
    for (int i = 0; i < 200 && process_.started() && !std::filesystem::exists(socket_); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  [[nodiscard]] bool up() const { return process_.started() && std::filesystem::exists(socket_); }
  [[nodiscard]] const std::string& socket() const { return socket_; }
  /// DaemonProcess::stop.
  int stop(int sig) { return process_.stop(sig); }

 private:
  static const std::string& prepared(const std::string& dir) {
    std::filesystem::create_directories(dir);
    return dir;
  }

  std::string socket_;
  DaemonProcess process_;
};

}  // namespace ibcni::testing
