// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/unique_fd.h"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace ibcni::os {

SysResult<UniqueFd> UniqueFd::open(const std::string& path, int flags, unsigned mode) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) {
    return sysFail(errno, "open " + path);
  }
  return UniqueFd(fd);
}

void UniqueFd::reset(int fd) noexcept {
  if (fd_ >= 0) {
    // On Linux the fd is released even when close() reports EINTR: never retry.
    (void)::close(fd_);
  }
  fd_ = fd;
}

SysResult<void> UniqueFd::close() {
  int fd = release();
  if (fd >= 0 && ::close(fd) != 0) {
    return sysFail(errno, "close");
  }
  return {};
}

}  // namespace ibcni::os
