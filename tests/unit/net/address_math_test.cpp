// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <sys/socket.h>

#include "ibcni/net/address_math.h"

namespace ibcni::net {
namespace {

TEST(AddressMath, RoundTripsAndPrefixBounds) {
  auto v4 = *net::IpAddress::parse("10.1.2.3");
  EXPECT_EQ(toInt(v4), U128{0x0a010203});
  EXPECT_EQ(fromInt(toInt(v4), AF_INET), v4);
  auto v6 = *net::IpAddress::parse("fd00::1:2");
  EXPECT_EQ(fromInt(toInt(v6) + 1, AF_INET6).toString(), "fd00::1:3");
  auto p = *net::IpPrefix::parse("10.1.2.0/24");
  EXPECT_EQ(fromInt(firstOf(p), AF_INET).toString(), "10.1.2.0");
  EXPECT_EQ(fromInt(lastOf(p), AF_INET).toString(), "10.1.2.255");
  auto p6 = *net::IpPrefix::parse("fd00::/64");
  EXPECT_EQ(fromInt(lastOf(p6), AF_INET6).toString(), "fd00::ffff:ffff:ffff:ffff");
  EXPECT_EQ(toDecimal(U128{1} << 64), "18446744073709551616");
  EXPECT_EQ(toDecimal(0), "0");
}

TEST(AddressMath, GuidsAre64BitValues) {
  const auto g = IpAddress::fromGuid(Guid{0xc211223344556677ULL});
  EXPECT_EQ(bitsOf(g), 64);
  EXPECT_EQ(bitsOf(kFamilyGuid), 64);
  EXPECT_EQ(bitsOf(AF_INET), 32);
  EXPECT_EQ(bitsOf(AF_INET6), 128);
  EXPECT_EQ(toInt(g), U128{0xc211223344556677ULL});
  EXPECT_EQ(fromInt(toInt(g), kFamilyGuid), g);
  const auto next = fromInt(toInt(g) + 1, kFamilyGuid);
  EXPECT_EQ(next.toString(), "c2:11:22:33:44:55:66:78");
  EXPECT_EQ(next.guid()->value, 0xc211223344556678ULL);
  // Truncated to 64 bits, as IPv4 is to 32.
  EXPECT_EQ(fromInt((U128{1} << 64) | 5, kFamilyGuid).toString(), "00:00:00:00:00:00:00:05");
  const IpPrefix p{IpAddress::fromGuid(Guid{0x0200000000000142ULL}), 56};
  EXPECT_EQ(fromInt(firstOf(p), kFamilyGuid).toString(), "02:00:00:00:00:00:01:00");
  EXPECT_EQ(fromInt(lastOf(p), kFamilyGuid).toString(), "02:00:00:00:00:00:01:ff");
  const IpPrefix all{IpAddress::fromGuid(Guid{0x1234ULL}), 0};
  EXPECT_EQ(firstOf(all), U128{0});
  EXPECT_EQ(lastOf(all), U128{~0ULL});
}

TEST(AddressMath, IntervalsMergeSubtractAndFind) {
  auto n = normalized({{10, 20}, {1, 4}, {5, 6}, {15, 30}});
  ASSERT_EQ(n.size(), 2u);
  EXPECT_EQ(n[0], (Interval{1, 6}));
  EXPECT_EQ(n[1], (Interval{10, 30}));
  auto s = subtract({0, 40}, n);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], (Interval{0, 0}));
  EXPECT_EQ(s[1], (Interval{7, 9}));
  EXPECT_EQ(s[2], (Interval{31, 40}));
  EXPECT_TRUE(subtract({2, 5}, n).empty());
  EXPECT_EQ(totalSize(s), U128{14});
  EXPECT_EQ(findInterval(n, 12), 1);
  EXPECT_EQ(findInterval(n, 8), -1);
  EXPECT_EQ(findInterval(n, 31), -1);
}

}  // namespace
}  // namespace ibcni::net
