// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/file_lock.h"

#include <cerrno>
#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <sys/file.h>
#include <thread>

namespace ibcni::os {

SysResult<FileLock> FileLock::acquire(const std::string& path, std::chrono::milliseconds timeout) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) {
    return sysFail(ec.value(), "create directory for lock " + path);
  }
  // O_NOFOLLOW: a lock file is never reached through a symbolic link (docs/security.md).
  auto fd = UniqueFd::open(path, O_RDWR | O_CREAT | O_NOFOLLOW, 0600);
  if (!fd) {
    return std::unexpected(fd.error());
  }
  return wait(std::move(*fd), path, timeout);
}

SysResult<FileLock> FileLock::acquireAt(int dirFd, const std::string& name, const std::string& path,
                                        std::chrono::milliseconds timeout) {
  const int raw = ::openat(dirFd, name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (raw < 0) {
    return sysFail(errno, "open " + path);
  }
  return wait(UniqueFd(raw), path, timeout);
}

SysResult<FileLock> FileLock::wait(UniqueFd fd, const std::string& path, std::chrono::milliseconds timeout) {
  // Poll with LOCK_NB rather than block in flock(): a blocking wait cannot time out without a
  // signal handler, and the waits here are short.
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return sysFail(errno, "flock " + path);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return sysFail(ETIMEDOUT, "wait for lock " + path);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  return FileLock(std::move(fd), path);
}

}  // namespace ibcni::os
