// SPDX-License-Identifier: Apache-2.0
// What the node tools read of the pools on this node through the IPAM's face (ipam/pool_use.h): a
// pool's use, its kept configuration, and the IPAM's own rules for its directory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ipam/embedded_ipam.h"
#include "ipam/pool_use.h"
#include "store_test_util.h"

namespace ibcni::ipam::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
constexpr std::chrono::milliseconds kLockWait{100};

std::string poolConf(const std::string& dataDir, const std::string& name) {
  return netConfig(dataDir, R"("ranges": [[{"subnet": "10.8.0.0/29"}]])", "", name);
}

TEST(PoolUse, APoolDirectoryAnotherUserCouldChangeIsReportedNotRead) {
  TempDir data;
  EmbeddedIpam ipam;
  ASSERT_TRUE(ipam.add(makeRequest(poolConf(data.path(), "net-a"), "a", "/proc/self/ns/net")));
  PoolUseReport before = readPoolUse({data.path()}, kLockWait);
  ASSERT_TRUE(before.errors.empty()) << before.errors.front();
  ASSERT_EQ(before.pools.size(), 1u);
  EXPECT_EQ(before.pools[0], (PoolUse{"net-a", "net-a", false, 1, 4, {}}));

  fs::permissions(data.path() + "/net-a", fs::perms::others_write, fs::perm_options::add);
  PoolUseReport after = readPoolUse({data.path()}, kLockWait);
  EXPECT_TRUE(after.pools.empty()) << "read although another user could have changed it";
  ASSERT_EQ(after.errors.size(), 1u);
  EXPECT_THAT(after.errors[0], HasSubstr("pool net-a: ipam data directory " + data.path() + "/net-a cannot be opened"));
}

TEST(PoolUse, APoolsKeptConfigurationIsReadAsTheIpamReadsIt) {
  TempDir data;
  EmbeddedIpam ipam;
  ASSERT_TRUE(ipam.add(makeRequest(poolConf(data.path(), "net-b"), "b", "/proc/self/ns/net")));
  auto kept = readPoolConfig(data.path() + "/net-b");
  ASSERT_TRUE(kept) << kept.error().msg;
  ASSERT_TRUE(*kept);
  EXPECT_EQ((*kept)->name, "net-b");

  fs::create_directories(data.path() + "/plain");
  auto none = readPoolConfig(data.path() + "/plain");
  ASSERT_TRUE(none) << none.error().msg;
  EXPECT_FALSE(*none) << "a directory that keeps no configuration is no pool";

  fs::create_directories(data.path() + "/broken");
  std::ofstream(data.path() + "/broken/network.json")
      << R"({"cniVersion": "1.1.0", "name": "x", "ipam": {"type": "host-local"}})";
  auto broken = readPoolConfig(data.path() + "/broken");
  ASSERT_FALSE(broken);
  EXPECT_THAT(broken.error().msg, HasSubstr(data.path() + "/broken/network.json: "));
  PoolUseReport use = readPoolUse({data.path()}, kLockWait);
  ASSERT_EQ(use.errors.size(), 1u);
  EXPECT_THAT(use.errors[0], HasSubstr("broken/network.json"));
  ASSERT_EQ(use.pools.size(), 1u) << "the broken and the plain directory are no pools";
  EXPECT_EQ(use.pools[0].network, "net-b");
}

}  // namespace
}  // namespace ibcni::ipam::testing
