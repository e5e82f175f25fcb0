// SPDX-License-Identifier: Apache-2.0
// The device-info file writer (plugin/state/file_device_info): the document against the
// device-info spec v1.1.0 field by field, the file never overwritten, the path rules of
// docs/security.md (a refusal changes nothing), and removal.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ibcni/os/safe_path.h"
#include "plugin/state/file_device_info.h"
#include "support/temp_dir.h"

namespace ibcni::state {
namespace {

using nlohmann::json;

class FileDeviceInfoTest : public testing::TempDirTest {
 protected:
  FileDeviceInfoTest() : TempDirTest("ibcni-devinfo") {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(TempDirTest::SetUp());
    root_ = dir_ + "/devinfo/";
    files_ = std::make_unique<FileDeviceInfoFiles>(std::vector<std::string>{root_});
  }

  static std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  /// Every entry under the test's directory, for "nothing changed".
  std::string tree() const {
    std::string s;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_)) {
      s += e.path().string() + "\n";
    }
    return s;
  }
  std::string cniFile(const std::string& name = "default-ib-sriov-c0ffee_net1") const { return root_ + "cni/" + name; }

  std::string root_;
  std::unique_ptr<FileDeviceInfoFiles> files_;
};

const DeviceInfo kVfInfo{*net::PciAddress::parse("0000:3b:00.3"), net::PciAddress::parse("0000:3b:00.0"), "mlx5_3"};

// Spec section 3: "type" (required) "pci"; "version" (required) "1.1.0"; "pci" (required for type
// pci) with "pci-address" (required, dddd:BB:DD.f), "rdma-device" and "pf-pci-address" (optional).
TEST_F(FileDeviceInfoTest, DocumentFollowsTheSpecFieldByField) {
  const std::string path = cniFile();
  auto written = files_->create(path, kVfInfo);
  ASSERT_TRUE(written) << written.error().describe();
  EXPECT_TRUE(*written);
  const json doc = json::parse(slurp(path));
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc.size(), 3u) << doc.dump();
  EXPECT_EQ(doc.at("type"), "pci");
  EXPECT_EQ(doc.at("version"), "1.1.0");
  const json& pci = doc.at("pci");
  ASSERT_TRUE(pci.is_object());
  EXPECT_EQ(pci.size(), 3u) << pci.dump();
  EXPECT_EQ(pci.at("pci-address"), "0000:3b:00.3");
  EXPECT_EQ(pci.at("pf-pci-address"), "0000:3b:00.0");
  EXPECT_EQ(pci.at("rdma-device"), "mlx5_3");
  // Read-only, as the NPWG client library writes it; the directory Multus' tree uses, root's only.
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0444u);
  EXPECT_EQ(st.st_nlink, 1u) << "the temporary name is gone";
  ASSERT_EQ(::stat((root_ + "cni").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  // No temporary file is left next to it.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(root_ + "cni"), std::filesystem::directory_iterator{}), 1);
  EXPECT_EQ(files_->check(path).value_or(DeviceInfoFiles::Presence::kAbsent), DeviceInfoFiles::Presence::kPresent);
}

TEST_F(FileDeviceInfoTest, OptionalFieldsAreLeftOutWhenUnknown) {
  const std::string path = cniFile();
  ASSERT_TRUE(files_->create(path, DeviceInfo{*net::PciAddress::parse("0000:5e:00.0"), std::nullopt, ""}).value_or(false));
  const json doc = json::parse(slurp(path));
  EXPECT_EQ(doc.at("pci"), json({{"pci-address", "0000:5e:00.0"}})) << doc.dump();
}

TEST_F(FileDeviceInfoTest, AnExistingFileIsNeverOverwritten) {
  std::filesystem::create_directories(root_ + "cni");
  const std::string path = cniFile();
  const std::string dp = R"({"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:00.3"}})";
  std::ofstream(path) << dp;
  auto presence = files_->check(path);
  ASSERT_TRUE(presence);
  EXPECT_EQ(*presence, DeviceInfoFiles::Presence::kPresent);
  auto written = files_->create(path, kVfInfo);
  ASSERT_TRUE(written) << written.error().describe();
  EXPECT_FALSE(*written);
  EXPECT_EQ(slurp(path), dp);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(root_ + "cni"), std::filesystem::directory_iterator{}), 1);
}

// A file outside the tree is the runtime's to read (as before ibcni wrote any): present, and
// create() still never writes there.
TEST_F(FileDeviceInfoTest, AFileOutsideTheTreeIsPresentButNeverWritten) {
  const std::string path = dir_ + "/dp-copy.json";
  std::ofstream(path) << "{}";
  auto presence = files_->check(path);
  ASSERT_TRUE(presence) << presence.error().describe();
  EXPECT_EQ(*presence, DeviceInfoFiles::Presence::kPresent);
  auto w = files_->create(path, kVfInfo);
  ASSERT_FALSE(w);
  EXPECT_TRUE(os::isRefusal(w.error()));
  EXPECT_EQ(slurp(path), "{}");
}

TEST_F(FileDeviceInfoTest, MissingDirectoriesAreAbsentThenCreated) {
  const std::string path = cniFile();
  auto presence = files_->check(path);
  ASSERT_TRUE(presence) << presence.error().describe();
  EXPECT_EQ(*presence, DeviceInfoFiles::Presence::kAbsent);
  EXPECT_FALSE(std::filesystem::exists(root_)) << "check() changes nothing";
  ASSERT_TRUE(files_->create(path, kVfInfo).value_or(false));
  EXPECT_TRUE(std::filesystem::is_regular_file(path));
}

TEST_F(FileDeviceInfoTest, RemoveTakesTheFileAndSucceedsWhenItIsGone) {
  const std::string path = cniFile();
  ASSERT_TRUE(files_->create(path, kVfInfo).value_or(false));
  ASSERT_TRUE(files_->remove(path));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(files_->remove(path)) << "already gone";
  EXPECT_TRUE(files_->remove(root_ + "nodir/file")) << "directory gone";
}

// Hostile places: each is refused (kPathRefused, which the plugin reports as error 7) by check(),
// create() and remove(), and nothing on the filesystem changes.
TEST_F(FileDeviceInfoTest, HostilePathsAreRefusedAndNothingChanges) {
  std::filesystem::create_directories(root_ + "cni");
  const std::string victim = dir_ + "/victim";
  std::ofstream(victim) << "precious";
  ASSERT_EQ(::symlink(victim.c_str(), cniFile("link").c_str()), 0);
  ASSERT_EQ(::symlink((dir_ + "/nowhere").c_str(), cniFile("dangling").c_str()), 0);
  ASSERT_EQ(::mkfifo(cniFile("fifo").c_str(), 0600), 0);
  std::filesystem::create_directories(dir_ + "/elsewhere");
  // A directory in the tree that someone else may write: what it holds is not root's word.
  std::filesystem::create_directories(root_ + "open");
  ASSERT_EQ(::chmod((root_ + "open").c_str(), 0777), 0);
  const std::vector<std::string> hostile = {
      cniFile("link"),          // a symbolic link, to a file
      cniFile("dangling"),      // a symbolic link to nothing (writing would create its target)
      cniFile("fifo"),          // a FIFO
      "devinfo/cni/relative",   // relative
      root_ + "cni/../../elsewhere/x",  // ".." out of the tree
      dir_ + "/elsewhere/x",   // outside the tree
      root_,                    // the root itself, no file
      root_ + "open/x",         // under a directory others may write
  };
  const std::string before = tree();
  for (const auto& path : hostile) {
    auto c = files_->check(path);
    ASSERT_FALSE(c) << path;
    EXPECT_TRUE(os::isRefusal(c.error())) << path << ": " << c.error().describe();
    auto w = files_->create(path, kVfInfo);
    ASSERT_FALSE(w) << path;
    EXPECT_TRUE(os::isRefusal(w.error())) << path << ": " << w.error().describe();
    if (path != cniFile("fifo")) {
      EXPECT_FALSE(files_->remove(path)) << path;
    }
  }
  EXPECT_EQ(tree(), before);
  EXPECT_EQ(slurp(victim), "precious");
}

TEST_F(FileDeviceInfoTest, RemoveLeavesAFifoAlone) {
  std::filesystem::create_directories(root_ + "cni");
  ASSERT_EQ(::mkfifo(cniFile("fifo").c_str(), 0600), 0);
  auto r = files_->remove(cniFile("fifo"));
  ASSERT_FALSE(r);
  EXPECT_TRUE(os::isRefusal(r.error()));
  EXPECT_TRUE(std::filesystem::is_fifo(cniFile("fifo")));
}

}  // namespace
}  // namespace ibcni::state
