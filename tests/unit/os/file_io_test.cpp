// SPDX-License-Identifier: Apache-2.0
// os::writeFileAtomic: every file ibcni keeps (IPAM store, block ledger, pool network file,
// attachment records) is replaced in one step; these are its promises.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "ibcni/os/file_io.h"
#include "ibcni/os/unique_fd.h"

namespace ibcni::os {
namespace {

namespace fs = std::filesystem;

class WriteFileAtomic : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ibcni-atomic-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // The names in the directory other than `keep`: a temporary file left behind shows here.
  [[nodiscard]] std::vector<std::string> others(const std::string& keep) const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().filename() != keep) {
        out.push_back(e.path().filename().string());
      }
    }
    return out;
  }
  fs::path dir_;
};

TEST_F(WriteFileAtomic, CreatesTheFileOwnerOnlyAndLeavesNoTemporaryFile) {
  const auto path = (dir_ / "state.json").string();
  ASSERT_TRUE(writeFileAtomic(path, "{\"a\": 1}\n"));
  EXPECT_EQ(slurp(path), "{\"a\": 1}\n");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(others("state.json").empty());
}

TEST_F(WriteFileAtomic, ReplacesTheOldContentWhole) {
  const auto path = (dir_ / "state.json").string();
  ASSERT_TRUE(writeFileAtomic(path, std::string(100000, 'x')));
  ASSERT_TRUE(writeFileAtomic(path, "short", {.durable = false}));
  EXPECT_EQ(slurp(path), "short");
  EXPECT_TRUE(others("state.json").empty());
}

TEST_F(WriteFileAtomic, TheTemporaryFileHasTheSuffixAskedFor) {
  const auto path = (dir_ / "record").string();
  // A symbolic link where the temporary file goes: O_NOFOLLOW refuses it, so the suffix is the one
  // asked for, and nothing is written through the link.
  const auto victim = dir_ / "victim";
  std::ofstream(victim) << "victim";
  fs::create_symlink(victim, dir_ / "record.tmp");
  auto w = writeFileAtomic(path, "new", {.tmpSuffix = ".tmp"});
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().err, ELOOP) << w.error().describe();
  EXPECT_EQ(slurp(victim), "victim");
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(WriteFileAtomic, AFailedRenameLeavesTheTargetAndNoTemporaryFile) {
  const auto path = dir_ / "taken";
  fs::create_directory(path);  // rename(2) of a file over a directory fails: EISDIR
  std::ofstream(path / "inside") << "kept";
  auto w = writeFileAtomic(path.string(), "new");
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().err, EISDIR) << w.error().describe();
  EXPECT_NE(w.error().describe().find("rename"), std::string::npos) << w.error().describe();
  EXPECT_EQ(slurp(path / "inside"), "kept");
  EXPECT_TRUE(others("taken").empty());
}

TEST_F(WriteFileAtomic, AMissingDirectoryIsENOENTNamingIt) {
  auto w = writeFileAtomic((dir_ / "gone" / "file").string(), "x");
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().err, ENOENT);
  EXPECT_NE(w.error().describe().find("gone"), std::string::npos) << w.error().describe();
}

TEST_F(WriteFileAtomic, AtWritesTheTemporaryFileInAnotherDirectoryOfTheSameFileSystem) {
  fs::create_directory(dir_ / "tmp");
  auto tmpDir = UniqueFd::open((dir_ / "tmp").string(), O_RDONLY | O_DIRECTORY);
  auto dir = UniqueFd::open(dir_.string(), O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(tmpDir && dir);
  ASSERT_TRUE(writeFileAtomicAt({tmpDir->get(), "a.1", "tmp/a.1"}, {dir->get(), "a", "a"}, "content"));
  EXPECT_EQ(slurp(dir_ / "a"), "content");
  EXPECT_TRUE(fs::is_empty(dir_ / "tmp"));
}

// A reader racing the writer sees the old content or the new, never a torn or empty file: what
// writing in place (open O_TRUNC, write) would show.
TEST_F(WriteFileAtomic, AConcurrentReaderSeesOneWholeVersionOrTheOther) {
  const auto path = (dir_ / "state").string();
  const std::string a(64 * 1024, 'a');
  const std::string b(96 * 1024, 'b');
  ASSERT_TRUE(writeFileAtomic(path, a, {.durable = false}));
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::atomic<int> reads{0};
  std::thread reader([&] {
    while (!stop) {
      auto text = readFile(path, 1 << 20);
      if (!text || (*text != a && *text != b)) {
        ++torn;
      }
      ++reads;
    }
  });
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(writeFileAtomic(path, i % 2 ? a : b, {.durable = false}));
  }
  stop = true;
  reader.join();
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(torn.load(), 0);
}

TEST_F(WriteFileAtomic, ListDirectoryAtGivesEveryNameButDotsFromTheStartEachTime) {
  // More names than one getdents64 buffer holds, so the listing takes several reads.
  std::set<std::string> made;
  for (int i = 0; i < 600; ++i) {
    const std::string name = "entry-with-a-long-name-to-fill-the-buffer-" + std::to_string(i);
    made.insert(name);
    std::ofstream(dir_ / name) << i;
  }
  auto fd = UniqueFd::open(dir_.string(), O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(fd);
  for (int round = 0; round < 2; ++round) {  // the second listing starts over, not at the end
    auto names = listDirectoryAt(fd->get(), dir_.string());
    ASSERT_TRUE(names) << names.error().describe();
    EXPECT_EQ(std::set<std::string>(names->begin(), names->end()), made) << "round " << round;
    EXPECT_EQ(names->size(), made.size());
  }
}

TEST_F(WriteFileAtomic, ListDirectoryAtOfAFileIsAnErrorNamingIt) {
  std::ofstream(dir_ / "plain") << "x";
  auto fd = UniqueFd::open((dir_ / "plain").string(), O_RDONLY);
  ASSERT_TRUE(fd);
  auto names = listDirectoryAt(fd->get(), (dir_ / "plain").string());
  ASSERT_FALSE(names);
  EXPECT_EQ(names.error().err, ENOTDIR);
  EXPECT_NE(names.error().op.find("plain"), std::string::npos) << names.error().op;
}

}  // namespace
}  // namespace ibcni::os
