// SPDX-License-Identifier: Apache-2.0
// Whether this process can ask the kernel what a namespace file is (NS_GET_NSTYPE). qemu-user, which
// runs the arm64 build's unit tier, answers the namespace ioctls with ENOSYS: a test that needs them
// skips there, and the arm64 kernel lab runs it on arm64's own kernel (tests/kernel-lab/kernel_lab.sh,
// NATIVE).
#pragma once

#include <fcntl.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>

namespace ibcni::testing {

inline bool nsIoctlUnsupported() {
  const int fd = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return false;
  }
  const bool enosys = ::ioctl(fd, NS_GET_NSTYPE) < 0 && errno == ENOSYS;
  ::close(fd);
  return enosys;
}

}  // namespace ibcni::testing
