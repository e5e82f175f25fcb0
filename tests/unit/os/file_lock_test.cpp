// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ibcni/os/file_lock.h"
#include "support/child_holder.h"
#include "support/temp_dir.h"

namespace ibcni::os {
namespace {

using namespace std::chrono_literals;

class FileLockTest : public testing::TempDirTest {
 protected:
  FileLockTest() : TempDirTest("ibcni-lock") {}
};

TEST_F(FileLockTest, CreatesDirectoriesAndLocks) {
  auto lock = FileLock::acquire(dir_ + "/a/b/dev.lock", 100ms);
  ASSERT_TRUE(lock) << lock.error().describe();
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/a/b/dev.lock"));
}

TEST_F(FileLockTest, SecondHolderTimesOutThenGetsItAfterRelease) {
  std::string path = dir_ + "/dev.lock";
  // Another process holds the lock until told to let go (flock is per open file description).
  testing::ChildHolder other([&](const testing::ChildHolder::Report& report) {
    auto held = FileLock::acquire(path, 1s);
    report(static_cast<bool>(held));
  });
  ASSERT_TRUE(other.started());
  ASSERT_TRUE(other.held());
  auto busy = FileLock::acquire(path, 50ms);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().err, ETIMEDOUT);
  ASSERT_TRUE(other.release());
  auto mine = FileLock::acquire(path, 1s);
  EXPECT_TRUE(mine);
}

TEST_F(FileLockTest, AtAnOpenDirectoryLocksTheSameFileAsByPath) {
  auto dir = UniqueFd::open(dir_, O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(dir);
  auto mine = FileLock::acquireAt(dir->get(), "dev.lock", dir_ + "/dev.lock", 100ms);
  ASSERT_TRUE(mine) << mine.error().describe();
  EXPECT_EQ(mine->path(), dir_ + "/dev.lock");
  // The same lock as FileLock::acquire's for that path: a second open file description waits.
  testing::ChildHolder other([&](const testing::ChildHolder::Report& report) {
    report(static_cast<bool>(FileLock::acquire(dir_ + "/dev.lock", 50ms)));
  });
  ASSERT_TRUE(other.started());
  EXPECT_FALSE(other.held());
}

TEST_F(FileLockTest, AtNeverFollowsASymbolicLinkAndNamesThePath) {
  std::filesystem::create_symlink(dir_ + "/elsewhere", dir_ + "/dev.lock");
  auto dir = UniqueFd::open(dir_, O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(dir);
  auto lock = FileLock::acquireAt(dir->get(), "dev.lock", dir_ + "/dev.lock", 10ms);
  ASSERT_FALSE(lock);
  EXPECT_EQ(lock.error().err, ELOOP);
  EXPECT_NE(lock.error().op.find(dir_ + "/dev.lock"), std::string::npos) << lock.error().op;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/elsewhere"));
}

TEST_F(FileLockTest, UnwritableDirectoryIsAnError) {
  auto lock = FileLock::acquire("/proc/ibcni-cannot-exist/x.lock", 10ms);
  EXPECT_FALSE(lock);
}

}  // namespace
}  // namespace ibcni::os
