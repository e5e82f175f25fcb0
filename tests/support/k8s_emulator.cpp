// SPDX-License-Identifier: Apache-2.0
#include "support/k8s_emulator.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/etcd_cluster.h"
#include "support/exec_program.h"

#ifndef IBCNI_SOURCE_DIR
#error "IBCNI_SOURCE_DIR (the source tree) must be defined"
#endif
#ifndef IBCNI_K8S_MODELS_DIR
#error "IBCNI_K8S_MODELS_DIR (where setup.sh installs kubernetes-models) must be defined"
#endif

namespace ibcni::testing {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

bool writeFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) {
      return false;
    }
  }
  return ::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

K8sEmulator::~K8sEmulator() {
  stop();
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::string K8sEmulator::logTail(int lines) const { return indentedTail(readFile(dir_ + "/log"), lines); }

::testing::AssertionResult K8sEmulator::setRbac(const std::string& rbacJson) const {
  if (!writeFile(dir_ + "/rbac.json", rbacJson)) {
    return ::testing::AssertionFailure() << "K8sEmulator: cannot write " << dir_ << "/rbac.json";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult K8sEmulator::start(const std::string& etcdEndpoints,
                                              const std::vector<std::pair<std::string, std::string>>& tokens,
                                              const std::string& rbacJson) {
  const auto node = findProgram("node");
  const auto bash = findProgram("bash");
  if (!node || !findProgram("npm") || !bash) {
    return ::testing::AssertionFailure()
           << "K8sEmulator: node, npm and bash must be installed (scripts/install-deps.sh: nodejs npm)";
  }
  const std::string src = IBCNI_SOURCE_DIR;
  const std::string models = IBCNI_K8S_MODELS_DIR;
  const char* path = std::getenv("PATH");
  const std::string pathEnv = path != nullptr ? std::string("PATH=") + path : std::string(kPathEnv);
  std::vector<std::string> env{pathEnv};
  if (const char* home = std::getenv("HOME"); home != nullptr) {
    env.push_back(std::string("HOME=") + home);
  }
  const auto setup = runProgram({*bash, src + "/tests/deploy/k8s/setup.sh", models}, env, std::nullopt,
                                std::chrono::minutes(5));
  if (setup.status != 0) {
    return ::testing::AssertionFailure() << "K8sEmulator: tests/deploy/k8s/setup.sh " << models
                                         << " (npm ci of kubernetes-models) failed: " << setup.describe();
  }
  std::string tmpl = (fs::exists("/dev/shm") ? std::string("/dev/shm") : std::string("/tmp")) + "/ibcni-k8s.XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return ::testing::AssertionFailure() << "K8sEmulator: mkdtemp: " << std::strerror(errno);
  }
  dir_ = tmpl;
  std::string tokenText;
  int uid = 1;
  for (const auto& [token, user] : tokens) {
    tokenText += token + "," + user + "," + std::to_string(uid++) + "\n";
  }
  if (!writeFile(dir_ + "/tokens", tokenText) || !writeFile(dir_ + "/rbac.json", rbacJson)) {
    return ::testing::AssertionFailure() << "K8sEmulator: cannot write the tokens or RBAC file in " << dir_;
  }
  std::vector<std::string> args{*node,
                                src + "/tests/support/k8s-emulator/server.js",
                                "--etcd",
                                etcdEndpoints,
                                "--models",
                                models,
                                "--port",
                                "0",
                                "--tokens",
                                dir_ + "/tokens",
                                "--rbac",
                                dir_ + "/rbac.json",
                                "--validation-log",
                                dir_ + "/validation.jsonl"};
  const std::string portFile = dir_ + "/port";
  const std::string logFile = dir_ + "/log";
  const int outFd = ::open(portFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int logFd = ::open(logFile.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const int nullFd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (outFd < 0 || logFd < 0 || nullFd < 0) {
    return ::testing::AssertionFailure() << "K8sEmulator: open files in " << dir_ << ": " << std::strerror(errno);
  }
  const pid_t pid = spawnTiedToTest(args, env, nullFd, outFd, logFd);
  if (pid < 0) {
    return ::testing::AssertionFailure() << "K8sEmulator: fork: " << std::strerror(errno);
  }
  ::close(outFd);
  ::close(logFd);
  ::close(nullFd);
  pid_ = pid;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    const std::string port = readFile(portFile);
    if (!port.empty() && port.back() == '\n' && port.find_first_not_of("0123456789\n") == std::string::npos) {
      url_ = "http://127.0.0.1:" + port.substr(0, port.size() - 1);
      return ::testing::AssertionSuccess();
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return ::testing::AssertionFailure() << "K8sEmulator: server.js exited; its log:\n" << logTail();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop();
  return ::testing::AssertionFailure() << "K8sEmulator: server.js did not listen within 20 s; its log:\n" << logTail();
}

void K8sEmulator::stop() {
  if (pid_ <= 0) {
    return;
  }
  ::kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  int status = 0;
  pid_t r = 0;
  while ((r = ::waitpid(pid_, &status, WNOHANG)) == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (r == 0) {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
}

}  // namespace ibcni::testing
