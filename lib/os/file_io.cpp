// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/file_io.h"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

#include "ibcni/os/unique_fd.h"

namespace ibcni::os {

SysResult<std::string> readAllFd(int fd, std::size_t maxBytes, const std::string& what) {
  std::string out;
  char buf[16384];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return sysFail(errno, "read " + what);
    }
    if (n == 0) {
      return out;
    }
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > maxBytes) {
      return sysFail(EFBIG, "read " + what + ": larger than " + std::to_string(maxBytes) + " bytes");
    }
  }
}

SysResult<std::string> readFile(const std::string& path, std::size_t maxBytes) {
  auto fd = UniqueFd::open(path, O_RDONLY);
  if (!fd) {
    return std::unexpected(fd.error());
  }
  return readAllFd(fd->get(), maxBytes, path);
}

SysResult<void> writeAll(int fd, std::string_view data, const std::string& what) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return sysFail(errno, "write " + what);
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}

SysResult<void> fsyncDirectory(const std::string& dir) {
  auto fd = UniqueFd::open(dir, O_RDONLY | O_DIRECTORY);
  if (!fd) {
    return std::unexpected(fd.error());
  }
  if (::fsync(fd->get()) != 0) {
    return sysFail(errno, "fsync " + dir);
  }
  return {};
}

}  // namespace ibcni::os
