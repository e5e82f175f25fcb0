// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <sys/wait.h>
#include <unistd.h>

#include "ibcni/os/file_lock.h"

namespace ibcni::os {
namespace {

using namespace std::chrono_literals;

class FileLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ibcni-lock-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(FileLockTest, CreatesDirectoriesAndLocks) {
  auto lock = FileLock::acquire(dir_ + "/a/b/dev.lock", 100ms);
  ASSERT_TRUE(lock) << lock.error().describe();
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/a/b/dev.lock"));
}

TEST_F(FileLockTest, SecondHolderTimesOutThenGetsItAfterRelease) {
  std::string path = dir_ + "/dev.lock";
  int toChild[2];
  int fromChild[2];
  ASSERT_EQ(::pipe(toChild), 0);
  ASSERT_EQ(::pipe(fromChild), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Another process holds the lock until told to let go (flock is per open file description).
    auto held = FileLock::acquire(path, 1s);
    char c = held ? 'y' : 'n';
    (void)!::write(fromChild[1], &c, 1);
    (void)!::read(toChild[0], &c, 1);
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(fromChild[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  auto busy = FileLock::acquire(path, 50ms);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().err, ETIMEDOUT);
  ASSERT_EQ(::write(toChild[1], "x", 1), 1);
  int status = 0;
  ::waitpid(pid, &status, 0);
  auto mine = FileLock::acquire(path, 1s);
  EXPECT_TRUE(mine);
  for (int fd : {toChild[0], toChild[1], fromChild[0], fromChild[1]}) {
    ::close(fd);
  }
}

TEST_F(FileLockTest, UnwritableDirectoryIsAnError) {
  auto lock = FileLock::acquire("/proc/ibcni-cannot-exist/x.lock", 10ms);
  EXPECT_FALSE(lock);
}

}  // namespace
}  // namespace ibcni::os
