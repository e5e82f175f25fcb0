// SPDX-License-Identifier: Apache-2.0
// sysfs::NetSysctls on the kernel (label netns: needs root): a namespace's per-interface sysctls are
// read and written there and nowhere else, and names that could reach another file are refused.
#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <optional>
#include <tuple>

#include "ibcni/sysfs/net_sysctls.h"
#include "support/test_netns.h"

namespace ibcni::testing {
namespace {

class NetSysctlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = TestNetns::create("sysctl-a");
    auto b = TestNetns::create("sysctl-b");
    if (!a || !b) {
      const auto& err = !a ? a.error() : b.error();
      if (isPermissionError(err)) {
        GTEST_SKIP() << "cannot create network namespaces: " << err.describe();
      }
      FAIL() << err.describe();
    }
    a_.emplace(std::move(*a));
    b_.emplace(std::move(*b));
  }
  std::unique_ptr<sysfs::NetSysctls> sysctls_ = sysfs::systemNetSysctls();
  std::optional<TestNetns> a_;
  std::optional<TestNetns> b_;
};

TEST_F(NetSysctlsTest, AValueSetInOneNamespaceIsReadThereAndNotInAnother) {
  auto before = sysctls_->get(b_->netns(), "ipv4", "lo", "arp_ignore");
  ASSERT_TRUE(before) << before.error().describe();
  const std::string other = *before == "2" ? "1" : "2";
  ASSERT_TRUE(sysctls_->set(a_->netns(), "ipv4", "lo", "arp_ignore", other));
  auto now = sysctls_->get(a_->netns(), "ipv4", "lo", "arp_ignore");
  ASSERT_TRUE(now) << now.error().describe();
  EXPECT_EQ(*now, other);
  EXPECT_EQ(sysctls_->get(b_->netns(), "ipv4", "lo", "arp_ignore").value_or("?"), *before);
  ASSERT_TRUE(sysctls_->set(a_->netns(), "ipv6", "lo", "accept_dad", "0"));
  EXPECT_EQ(sysctls_->get(a_->netns(), "ipv6", "lo", "accept_dad").value_or("?"), "0");
}

TEST_F(NetSysctlsTest, AMissingInterfaceIsEnoentAndNamesThatCouldReachAnotherFileAreEinval) {
  auto missing = sysctls_->get(a_->netns(), "ipv4", "nosuch0", "arp_ignore");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().err, ENOENT);
  for (const auto& [family, ifName, key] :
       {std::tuple{"ipv4", "lo", "../../../kernel/hostname"}, std::tuple{"ipv4", "..", "arp_ignore"},
        std::tuple{"core", "lo", "arp_ignore"}, std::tuple{"ipv4", "lo", ""}, std::tuple{"ipv4", "a/b", "rp_filter"}}) {
    auto r = sysctls_->set(a_->netns(), family, ifName, key, "1");
    ASSERT_FALSE(r) << family << " " << ifName << " " << key;
    EXPECT_EQ(r.error().err, EINVAL) << family << " " << ifName << " " << key;
  }
}

}  // namespace
}  // namespace ibcni::testing
