// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/netns.h"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <string>
#include <unistd.h>

namespace ibcni::os {

namespace {
constexpr const char* kThreadNetns = "/proc/thread-self/ns/net";
}  // namespace

SysResult<Netns> Netns::fromFd(UniqueFd fd, std::string path) {
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return sysFail(errno, "stat " + path);
  }
  return Netns(std::move(fd), std::move(path), st.st_dev, st.st_ino);
}

SysResult<Netns> Netns::open(const std::string& path) {
  // Look with O_PATH first, which opens nothing: a plain open of a FIFO would block the plugin
  // until someone writes to it, and opening a device node can act on the device. Only a file on
  // nsfs (a bind mount such as /run/netns/x, or what a /proc/<pid>/ns/net link leads to) is then
  // opened for real, through the descriptor already held, so the path cannot change in between.
  auto probe = UniqueFd::open(path, O_PATH);
  if (!probe) {
    return std::unexpected(probe.error());
  }
  struct statfs fs {};
  if (::fstatfs(probe->get(), &fs) != 0) {
    return sysFail(errno, "statfs " + path);
  }
  if (fs.f_type != static_cast<decltype(fs.f_type)>(NSFS_MAGIC) &&
      fs.f_type != static_cast<decltype(fs.f_type)>(PROC_SUPER_MAGIC)) {
    return sysFail(EINVAL, path + " is not a namespace file (not on nsfs or procfs)");
  }
  struct stat st {};
  if (::fstat(probe->get(), &st) != 0) {
    return sysFail(errno, "stat " + path);
  }
  if (!S_ISREG(st.st_mode)) {
    return sysFail(EINVAL, path + " is not a namespace file");
  }
  auto fd = UniqueFd::open("/proc/self/fd/" + std::to_string(probe->get()), O_RDONLY | O_NOCTTY);
  if (!fd) {
    return sysFail(fd.error().err, "open " + path);
  }
  int type = ::ioctl(fd->get(), NS_GET_NSTYPE);
  if (type < 0) {
    return sysFail(errno == ENOTTY ? EINVAL : errno, path + " is not a namespace file");
  }
  if (type != CLONE_NEWNET) {
    return sysFail(EINVAL, path + " is a namespace, but not a network namespace");
  }
  // The descriptor was opened through the probe: the same inode the probe's fstat gave.
  return Netns(std::move(*fd), path, st.st_dev, st.st_ino);
}

SysResult<Netns> Netns::current() {
  auto fd = UniqueFd::open(kThreadNetns, O_RDONLY);
  if (!fd) {
    return std::unexpected(fd.error());
  }
  return fromFd(std::move(*fd), kThreadNetns);
}

SysResult<Netns> Netns::createAnonymous() {
  auto origin = current();
  if (!origin) {
    return std::unexpected(origin.error());
  }
  // unshare() moves this thread into the new namespace; take a handle on it and go back at once.
  if (::unshare(CLONE_NEWNET) != 0) {
    return sysFail(errno, "unshare(CLONE_NEWNET)");
  }
  auto created = current();
  if (::setns(origin->fd(), CLONE_NEWNET) != 0) {
    std::abort();  // still in the new namespace: continuing would act in the wrong place
  }
  if (!created) {
    return std::unexpected(created.error());
  }
  created->path_ = "(temporary netns)";
  return created;
}

bool Netns::sameAs(const Netns& other) const { return dev_ == other.dev_ && ino_ == other.ino_; }

SysResult<NetnsGuard> NetnsGuard::enter(const Netns& target) {
  auto origin = UniqueFd::open(kThreadNetns, O_RDONLY);
  if (!origin) {
    return std::unexpected(origin.error());
  }
  if (::setns(target.fd(), CLONE_NEWNET) != 0) {
    return sysFail(errno, "setns " + target.path());
  }
  return NetnsGuard(std::move(*origin));
}

NetnsGuard::~NetnsGuard() {
  if (origin_ && ::setns(origin_.get(), CLONE_NEWNET) != 0) {
    std::abort();  // see the class comment: never continue in the wrong namespace
  }
}

}  // namespace ibcni::os
