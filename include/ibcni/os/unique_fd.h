// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "ibcni/os/sys_error.h"

namespace ibcni::os {

/// Move-only owner of a file descriptor. Closes it on destruction (errors ignored; on Linux a
/// close is never retried after EINTR).
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset(other.release());
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  /// Opens `path` with `flags | O_CLOEXEC`.
  /// @return the fd, or SysError{errno, "open <path>"}.
  [[nodiscard]] static SysResult<UniqueFd> open(const std::string& path, int flags, unsigned mode = 0);

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] int release() noexcept {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) noexcept;
  /// Closes now and reports the error, for the places where a failed close matters.
  [[nodiscard]] SysResult<void> close();
  explicit operator bool() const noexcept { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace ibcni::os
