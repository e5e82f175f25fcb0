// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <sys/types.h>

#include "ibcni/os/sys_error.h"
#include "ibcni/os/unique_fd.h"

namespace ibcni::os {

/// An open handle on a network namespace. Holding it keeps the namespace alive.
class Netns {
 public:
  Netns() = default;
  Netns(Netns&&) noexcept = default;
  Netns& operator=(Netns&&) noexcept = default;

  /// Opens `path` and checks that it is a network namespace: the file must live on nsfs or procfs
  /// and NS_GET_NSTYPE must say CLONE_NEWNET.
  /// @return ENOENT when the path does not exist, EINVAL when it exists but is not a network
  ///         namespace, or the errno of open/fstatfs/ioctl.
  [[nodiscard]] static SysResult<Netns> open(const std::string& path);

  /// The calling thread's current network namespace (/proc/thread-self/ns/net).
  [[nodiscard]] static SysResult<Netns> current();

  /// Creates a new, anonymous network namespace without leaving the current one: the namespace
  /// lives as long as the returned handle (and anything moved into it).
  [[nodiscard]] static SysResult<Netns> createAnonymous();

  /// A handle with no fd, identified by `path` and `ino` only: for fakes in unit tests.
  [[nodiscard]] static Netns fakeForTest(std::string path, ino_t ino) {
    return Netns(UniqueFd(), std::move(path), 0, ino);
  }

  /// True when both handles refer to the same namespace (same st_dev and st_ino).
  [[nodiscard]] bool sameAs(const Netns& other) const;

  [[nodiscard]] int fd() const noexcept { return fd_.get(); }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] ino_t inode() const noexcept { return ino_; }
  explicit operator bool() const noexcept { return static_cast<bool>(fd_) || ino_ != 0; }

 private:
  Netns(UniqueFd fd, std::string path, dev_t dev, ino_t ino)
      : fd_(std::move(fd)), path_(std::move(path)), dev_(dev), ino_(ino) {}
  static SysResult<Netns> fromFd(UniqueFd fd, std::string path);

  UniqueFd fd_;
  std::string path_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

/// Opens and creates network namespaces; the seam that lets commands run against fakes.
class NetnsProvider {
 public:
  virtual ~NetnsProvider() = default;
  /// @see Netns::open
  [[nodiscard]] virtual SysResult<Netns> open(const std::string& path) = 0;
  /// @see Netns::current
  [[nodiscard]] virtual SysResult<Netns> current() = 0;
  /// Whether `dir` is a directory seen from here: a namespace path missing from a directory that
  /// is itself missing proves nothing (another mount namespace than the runtime's).
  [[nodiscard]] virtual bool directoryVisible(const std::string& dir) = 0;
};

/// Holds the calling thread inside another network namespace until destroyed. The plugin is
/// single-threaded; setns(2) affects only the calling thread. The destructor returns to the
/// namespace the thread was in and calls std::abort() if that fails, because continuing would
/// make host changes in the wrong namespace.
class [[nodiscard]] NetnsGuard {
 public:
  [[nodiscard]] static SysResult<NetnsGuard> enter(const Netns& target);
  NetnsGuard(NetnsGuard&& other) noexcept = default;
  NetnsGuard& operator=(NetnsGuard&&) = delete;
  NetnsGuard(const NetnsGuard&) = delete;
  ~NetnsGuard();

 private:
  explicit NetnsGuard(UniqueFd origin) : origin_(std::move(origin)) {}
  UniqueFd origin_;  // empty after a move: the destructor then does nothing
};

}  // namespace ibcni::os
