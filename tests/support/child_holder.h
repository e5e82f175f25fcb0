// SPDX-License-Identifier: Apache-2.0
// A lock held by another process, for tests of lock contention: flock() locks belong to the open
// file description, so only another process contends with the test's own.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

namespace ibcni::testing {

/// Forks a child that runs `hold`: it takes the lock and calls `report` with whether it got it,
/// still holding it; `report` tells the parent and waits until the parent calls release(). The
/// child then exits (without running destructors), which lets go of what it took.
class ChildHolder {
 public:
  using Report = std::function<void(bool)>;

  explicit ChildHolder(const std::function<void(const Report&)>& hold) {
    if (::pipe(ready_) != 0 || ::pipe(done_) != 0) {
      return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      hold([this](bool got) {
        char c = got ? 'y' : 'n';
        (void)!::write(ready_[1], &c, 1);
        (void)!::read(done_[0], &c, 1);
      });
      ::_exit(0);
    }
  }
  ChildHolder(const ChildHolder&) = delete;
  ChildHolder& operator=(const ChildHolder&) = delete;
  ~ChildHolder() {
    release();
    for (int fd : {ready_[0], ready_[1], done_[0], done_[1]}) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
  }

  /// The pipes were made and the child forked.
  [[nodiscard]] bool started() const { return pid_ > 0; }
  /// Waits for the child's report: true when it holds the lock.
  [[nodiscard]] bool held() const {
    char c = 0;
    return ::read(ready_[0], &c, 1) == 1 && c == 'y';
  }
  /// Tells the child to let go and waits until it has exited; false when it could not be told.
  bool release() {
    if (pid_ <= 0) {
      return true;
    }
    const bool told = ::write(done_[1], "x", 1) == 1;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return told;
  }

 private:
  int ready_[2] = {-1, -1};
  int done_[2] = {-1, -1};
  pid_t pid_ = -1;
};

}  // namespace ibcni::testing
