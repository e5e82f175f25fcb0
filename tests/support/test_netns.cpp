// SPDX-License-Identifier: Apache-2.0
#include "support/test_netns.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <poll.h>
#include <random>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ibcni/os/unique_fd.h"

namespace ibcni::testing {

namespace {

std::string tempBase() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

// Reads both pipes to their end without letting either fill up and block the child.
void drain(int outFd, int errFd, std::string& out, std::string& err) {
  std::array<pollfd, 2> fds{{{outFd, POLLIN, 0}, {errFd, POLLIN, 0}}};
  std::array<std::string*, 2> sinks{&out, &err};
  int open = 2;
  while (open > 0) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      return;
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) {
        continue;
      }
      char buf[4096];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;  // poll ignores negative fds
        --open;
      }
    }
  }
}

}  // namespace

std::string randomIfName(std::string_view prefix) {
  static std::mt19937_64 rng{std::random_device{}()};
  std::string name(prefix.substr(0, 7));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(rng()));
  name.append(hex, 8);  // at most 7 + 8 = 15 bytes (IFNAMSIZ - 1)
  return name;
}

bool isPermissionError(const os::SysError& err) { return err.err == EPERM || err.err == EACCES; }

os::SysResult<TestNetns> TestNetns::create(std::string_view label) {
  std::string templ = tempBase() + "/ibcni-netns-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    return os::sysFail(errno, "mkdtemp " + templ);
  }
  // From here on the destructor cleans up whatever exists.
  TestNetns result(templ, templ + "/" + std::string(label), os::Netns());
  {
    auto file = os::UniqueFd::open(result.path_, O_RDONLY | O_CREAT | O_EXCL, 0444);
    if (!file) {
      return std::unexpected(file.error());
    }
  }
  auto anon = os::Netns::createAnonymous();
  if (!anon) {
    return std::unexpected(anon.error());
  }
  // Binding the nsfs file keeps the namespace alive after the last fd closes, as `ip netns add`
  // does with /run/netns/<name>.
  const std::string source = "/proc/self/fd/" + std::to_string(anon->fd());
  if (::mount(source.c_str(), result.path_.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return os::sysFail(errno, "bind-mount netns onto " + result.path_);
  }
  auto ns = os::Netns::open(result.path_);
  if (!ns) {
    return std::unexpected(ns.error());
  }
  result.netns_ = std::move(*ns);
  return result;
}

TestNetns::TestNetns(TestNetns&& other) noexcept
    : dir_(std::exchange(other.dir_, {})),
      path_(std::exchange(other.path_, {})),
      netns_(std::move(other.netns_)) {}

TestNetns& TestNetns::operator=(TestNetns&& other) noexcept {
  if (this != &other) {
    destroy();
    dir_ = std::exchange(other.dir_, {});
    path_ = std::exchange(other.path_, {});
    netns_ = std::move(other.netns_);
  }
  return *this;
}

TestNetns::~TestNetns() { destroy(); }

void TestNetns::destroy() noexcept {
  if (dir_.empty()) {
    return;
  }
  netns_ = os::Netns();
  // MNT_DETACH: a process that still sits in the namespace must not make cleanup fail. EINVAL
  // (not a mount point) is expected when create() failed before mounting.
  (void)::umount2(path_.c_str(), MNT_DETACH);
  (void)::unlink(path_.c_str());
  (void)::rmdir(dir_.c_str());
  dir_.clear();
  path_.clear();
}

os::SysResult<ScopedHostNetns> ScopedHostNetns::enter(const os::Netns& ns) {
  auto guard = os::NetnsGuard::enter(ns);
  if (!guard) {
    return std::unexpected(guard.error());
  }
  return ScopedHostNetns(std::move(*guard));
}

std::string nsArg(const os::Netns& ns) {
  return "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(ns.fd());
}

os::SysResult<std::string> runIp(const os::Netns& ns, const std::vector<std::string>& args) {
  std::string command = "ip";
  for (const auto& a : args) {
    command += " " + a;
  }
  const std::string op = command + " (in netns " + ns.path() + ")";
  if (ns.fd() < 0) {
    return os::sysFail(EBADF, op + ": the handle has no fd");
  }
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>("ip"));
  for (const auto& a : args) {
    argv.push_back(const_cast<char*>(a.c_str()));
  }
  argv.push_back(nullptr);

  int outPipe[2];
  int errPipe[2];
  if (::pipe2(outPipe, O_CLOEXEC) != 0) {
    return os::sysFail(errno, op + ": pipe2");
  }
  os::UniqueFd outRead(outPipe[0]);
  os::UniqueFd outWrite(outPipe[1]);
  if (::pipe2(errPipe, O_CLOEXEC) != 0) {
    return os::sysFail(errno, op + ": pipe2");
  }
  os::UniqueFd errRead(errPipe[0]);
  os::UniqueFd errWrite(errPipe[1]);

  pid_t pid = ::fork();
  if (pid < 0) {
    return os::sysFail(errno, op + ": fork");
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    if (::setns(ns.fd(), CLONE_NEWNET) != 0 || ::dup2(outPipe[1], STDOUT_FILENO) < 0 ||
        ::dup2(errPipe[1], STDERR_FILENO) < 0) {
      ::_exit(126);
    }
    ::execvp("ip", argv.data());
    ::_exit(127);
  }
  outWrite.reset();
  errWrite.reset();
  std::string out;
  std::string err;
  drain(outRead.get(), errRead.get(), out, err);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return os::sysFail(errno, op + ": waitpid");
    }
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string how = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                              : "killed by a signal";
    while (!err.empty() && err.back() == '\n') {
      err.pop_back();
    }
    return os::sysFail(EIO, op + ": " + how, err);
  }
  return out;
}

os::SysResult<void> createVethPair(const os::Netns& nsA, const std::string& nameA,
                                   const os::Netns& nsB, const std::string& nameB) {
  std::vector<std::string> args{"link", "add", nameA, "type", "veth", "peer", "name", nameB};
  if (!nsA.sameAs(nsB)) {
    args.push_back("netns");
    args.push_back(nsArg(nsB));
  }
  auto res = runIp(nsA, args);
  if (!res) {
    return std::unexpected(res.error());
  }
  return {};
}

}  // namespace ibcni::testing
