// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <string>

#include "ibcni/os/sys_error.h"
#include "ibcni/os/unique_fd.h"

namespace ibcni::os {

/// An exclusive flock(2) on a lock file, held until destroyed. Creates the file (and its parent
/// directory) when missing.
class [[nodiscard]] FileLock {
 public:
  FileLock(FileLock&&) noexcept = default;
  FileLock& operator=(FileLock&&) noexcept = default;
  ~FileLock() = default;  // closing the fd releases the lock

  /// Waits up to `timeout` for the lock.
  /// @return ETIMEDOUT when another process held it for the whole timeout, or the errno of
  ///         mkdir/open/flock.
  [[nodiscard]] static SysResult<FileLock> acquire(const std::string& path,
                                                   std::chrono::milliseconds timeout);

  /// The same for lock file `name` in the open directory `dirFd` (which must exist), `path` naming
  /// it in errors.
  [[nodiscard]] static SysResult<FileLock> acquireAt(int dirFd, const std::string& name, const std::string& path,
                                                     std::chrono::milliseconds timeout);

  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  /// Waits for the flock of the opened lock file.
  static SysResult<FileLock> wait(UniqueFd fd, const std::string& path, std::chrono::milliseconds timeout);
  FileLock(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  UniqueFd fd_;
  std::string path_;
};

}  // namespace ibcni::os
