// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <sys/socket.h>

#include "ibcni/net/ip.h"

namespace ibcni::net {
namespace {

TEST(IpAddress, ParsesV4AndV6) {
  auto v4 = IpAddress::parse("10.1.2.3");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->family, AF_INET);
  EXPECT_EQ(v4->toString(), "10.1.2.3");
  auto v6 = IpAddress::parse("fd00::1");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->family, AF_INET6);
  EXPECT_EQ(v6->toString(), "fd00::1");
}

TEST(IpAddress, RejectsGarbage) {
  for (const char* bad : {"", "10.1.2", "10.1.2.256", "abc", "10.1.2.3/24", "::g", " 10.1.2.3"}) {
    EXPECT_FALSE(IpAddress::parse(bad)) << bad;
  }
}

TEST(IpPrefix, ParsesAndKeepsHostBits) {
  auto p = IpPrefix::parse("10.1.2.3/24");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->prefixLen, 24);
  EXPECT_EQ(p->toString(), "10.1.2.3/24");
  EXPECT_EQ(p->network().toString(), "10.1.2.0/24");
  EXPECT_TRUE(p->contains(*IpAddress::parse("10.1.2.200")));
  EXPECT_FALSE(p->contains(*IpAddress::parse("10.1.3.1")));
  EXPECT_EQ(IpPrefix::parse("fd00::5/64")->network().toString(), "fd00::/64");
  EXPECT_EQ(IpPrefix::parse("10.0.0.0/0")->network().toString(), "0.0.0.0/0");
}

TEST(IpPrefix, BareAddressOnlyWhenAllowed) {
  EXPECT_FALSE(IpPrefix::parse("10.1.2.3"));
  auto p = IpPrefix::parse("10.1.2.3", /*allowBare=*/true);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->prefixLen, 32);
  EXPECT_EQ(IpPrefix::parse("fd00::1", true)->prefixLen, 128);
}

TEST(IpPrefix, RejectsBadLengths) {
  for (const char* bad : {"10.1.2.3/33", "10.1.2.3/-1", "10.1.2.3/", "10.1.2.3/2x", "fd00::/129", "/24"}) {
    EXPECT_FALSE(IpPrefix::parse(bad)) << bad;
  }
}

TEST(HwAddress, ParsesAnyLengthAndCanonicalizes) {
  auto mac = HwAddress::parse("0A:58:0a:01:02:03");
  ASSERT_TRUE(mac);
  EXPECT_EQ(mac->text, "0a:58:0a:01:02:03");
  EXPECT_EQ(mac->length, 6u);
  auto ib = HwAddress::parse("00:00:01:07:fe:80:00:00:00:00:00:00:c2:11:22:33:44:55:66:77");
  ASSERT_TRUE(ib);
  EXPECT_EQ(ib->length, 20u);
  for (const char* bad : {"", "0a:58", "0a:58:0a:01:02:0", "0a-58-0a-01-02-03", "zz:00:00:00:00:00", "0a:58:"}) {
    if (std::string(bad) == "0a:58") {
      continue;  // two octets are a valid (short) hardware address
    }
    EXPECT_FALSE(HwAddress::parse(bad)) << bad;
  }
}

TEST(Guid, ParsesEightOctets) {
  auto g = Guid::parse("c2:11:22:33:44:55:66:77");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->value, 0xc211223344556677ULL);
  EXPECT_EQ(g->toString(), "c2:11:22:33:44:55:66:77");
  EXPECT_FALSE(Guid::parse("c2:11:22:33:44:55:66"));
  EXPECT_FALSE(Guid::parse("c2:11:22:33:44:55:66:77:88"));
}

TEST(IpAddress, HoldsAGuidAsAThirdFamily) {
  const auto g = *Guid::parse("c2:11:22:33:44:55:66:77");
  const auto ip = IpAddress::fromGuid(g);
  EXPECT_TRUE(ip.isGuid());
  EXPECT_FALSE(ip.isV4());
  EXPECT_EQ(ip.family, kFamilyGuid);
  EXPECT_EQ(ip.size(), 8u);
  EXPECT_EQ(ip.bytes[0], 0xc2);
  EXPECT_EQ(ip.bytes[7], 0x77);
  EXPECT_EQ(ip.bytes[8], 0);
  ASSERT_TRUE(ip.guid());
  EXPECT_EQ(ip.guid()->value, 0xc211223344556677ULL);
  EXPECT_EQ(ip.toString(), "c2:11:22:33:44:55:66:77");
#ifdef AF_IB
  EXPECT_EQ(kFamilyGuid, AF_IB);
#endif
  // Addresses are no GUIDs, and IPv4/IPv6 sizes are as before.
  EXPECT_FALSE(IpAddress::parse("10.1.2.3")->guid());
  EXPECT_EQ(IpAddress::parse("10.1.2.3")->size(), 4u);
  EXPECT_EQ(IpAddress::parse("fd00::1")->size(), 16u);
  EXPECT_EQ(IpAddress{}.size(), 16u);
}

TEST(IpAddress, ParseNeverYieldsAGuid) {
  // GUID text is valid IPv6 text: parse keeps reading it as IPv6.
  auto ip = IpAddress::parse("02:00:00:00:00:00:00:05");
  ASSERT_TRUE(ip);
  EXPECT_EQ(ip->family, AF_INET6);
  EXPECT_FALSE(ip->isGuid());
  EXPECT_EQ(ip->toString(), "2::5");
  EXPECT_NE(*ip, IpAddress::fromGuid(*Guid::parse("02:00:00:00:00:00:00:05")));
}

TEST(IpAddress, GuidsOrderByValueAndAfterOtherFamilies) {
  const auto a = IpAddress::fromGuid(Guid{0x0200000000000005ULL});
  const auto b = IpAddress::fromGuid(Guid{0x0200000000000100ULL});
  EXPECT_LT(a, b);
  EXPECT_EQ(a, IpAddress::fromGuid(Guid{0x0200000000000005ULL}));
  EXPECT_NE(a, b);
  EXPECT_LT(*IpAddress::parse("fd00::1"), a);  // families order by number: AF_INET6 (10) < 27
}

TEST(IpPrefix, GuidPrefixNetworkAndContains) {
  const IpPrefix p{IpAddress::fromGuid(Guid{0x02000000000001abULL}), 56};
  EXPECT_EQ(p.network().address.toString(), "02:00:00:00:00:00:01:00");
  EXPECT_TRUE(p.contains(IpAddress::fromGuid(Guid{0x02000000000001ffULL})));
  EXPECT_FALSE(p.contains(IpAddress::fromGuid(Guid{0x0200000000000200ULL})));
  EXPECT_FALSE(p.contains(*IpAddress::parse("200::1ab")));
}

TEST(PciAddress, CanonicalForm) {
  EXPECT_EQ(PciAddress::parse("0000:AF:06.1")->text, "0000:af:06.1");
  EXPECT_EQ(PciAddress::parse("af:06.1")->text, "0000:af:06.1");
  for (const char* bad : {"", "0000:af:06", "0000:af:06.8", "0000:af:20.0", "000:af:06.1", "0000-af-06.1", "xx:06.1"}) {
    EXPECT_FALSE(PciAddress::parse(bad)) << bad;
  }
}

TEST(IfName, LinuxRules) {
  EXPECT_TRUE(isValidIfName("net1"));
  EXPECT_TRUE(isValidIfName("abcdefghijklmno"));  // 15 bytes
  for (const char* bad : {"", ".", "..", "abcdefghijklmnop", "a/b", "a:b", "a b", "a\tb"}) {
    EXPECT_FALSE(isValidIfName(bad)) << bad;
  }
}

}  // namespace
}  // namespace ibcni::net
