// SPDX-License-Identifier: Apache-2.0
// Self-reclaim with the production netns checker, on paths that need no privileges: a netns path
// that is gone, and one that is no longer a namespace.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "store_test_util.h"
#include "support/ns_ioctl.h"

namespace ibcni::ipam::testing {
namespace {

using ::testing::HasSubstr;

TEST(SystemNetnsChecker, ClassifiesPaths) {
  TempDir tmp;
  auto checker = os::systemNetnsChecker();
  EXPECT_EQ(checker->check("", 0), os::NetnsLiveness::kUnknown);
  EXPECT_EQ(checker->check(tmp.path() + "/gone", 0), os::NetnsLiveness::kGone);
  EXPECT_EQ(checker->check(tmp.path() + "/no-such-dir/ns", 0), os::NetnsLiveness::kUnknown)
      << "a missing directory may mean another mount namespace: never reclaim on it";
  std::ofstream(tmp.path() + "/plain") << "";
  EXPECT_EQ(checker->check(tmp.path() + "/plain", 0), os::NetnsLiveness::kGone) << "an unmounted netns file";
  if (::ibcni::testing::nsIoctlUnsupported()) {
    EXPECT_EQ(checker->check("/proc/self/ns/net", 0), os::NetnsLiveness::kUnknown) << "no ioctl: never reclaim";
    GTEST_SKIP() << "NS_GET_NSTYPE answers ENOSYS (qemu-user): the rest runs in the arm64 kernel lab";
  }
  EXPECT_EQ(checker->check("/proc/self/ns/net", 0), os::NetnsLiveness::kAlive);
  std::uint64_t ino = checker->identify("/proc/self/ns/net");
  EXPECT_NE(ino, 0u);
  EXPECT_EQ(checker->check("/proc/self/ns/net", ino), os::NetnsLiveness::kAlive);
  EXPECT_EQ(checker->check("/proc/self/ns/net", ino + 1), os::NetnsLiveness::kGone) << "the path names another netns";
  EXPECT_EQ(checker->check("/proc/999999999/ns/net", 0), os::NetnsLiveness::kGone);
  EXPECT_EQ(checker->identify(tmp.path() + "/gone"), 0u);
}

TEST(SelfReclaim, DeadNetnsPathIsReclaimedOnExhaustionLiveOneIsKept) {
  TempDir tmp;
  std::string conf = netConfig(tmp.path(), R"("ranges": [[{"subnet": "10.6.0.0/29"}]])");  // .2-.6
  EmbeddedIpam ipam;                                                                       // production checker
  std::string dead = tmp.path() + "/netns-dead";
  std::ofstream(dead) << "";
  // Live: this process's own namespace, which exists for the whole test.
  for (const char* c : {"a", "b", "c", "d"}) {
    ASSERT_TRUE(ipam.add(makeRequest(conf, c, "/proc/self/ns/net")));
  }
  ASSERT_TRUE(ipam.add(makeRequest(conf, "dead", dead)));
  std::filesystem::remove(dead);  // the runtime deleted the netns, and DEL never came
  auto r = ipam.add(makeRequest(conf, "new", "/proc/self/ns/net"));
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_EQ(r->ips[0].address.toString(), "10.6.0.6/29");
  auto full = ipam.add(makeRequest(conf, "newer", "/proc/self/ns/net"));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, kIpamExhausted);
  EXPECT_THAT(full.error().msg, HasSubstr("5 addresses can be handed out and 5 are in use"));
}

}  // namespace
}  // namespace ibcni::ipam::testing
