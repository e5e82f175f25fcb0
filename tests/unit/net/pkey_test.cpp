// SPDX-License-Identifier: Apache-2.0
// net::Pkey: the text a config may give, the membership bit, the one hex form.
#include "ibcni/net/pkey.h"

#include <gtest/gtest.h>

#include <string>

namespace ibcni::net {
namespace {

using Err = Pkey::ParseError;

TEST(PkeyParse, AcceptsHexAndDecimalKeepingTheMembershipBit) {
  struct Case {
    const char* text;
    std::uint16_t wire;
  };
  for (const Case& c :
       {Case{"0x7fff", 0x7fff}, Case{"0X7FFF", 0x7fff}, Case{"0x7FfF", 0x7fff}, Case{"32767", 0x7fff},
        Case{"0x0001", 0x0001}, Case{"0x1", 0x0001}, Case{"1", 0x0001}, Case{"0x8001", 0x8001}, Case{"0xffff", 0xffff},
        Case{"65535", 0xffff}, Case{"0x00000123", 0x0123}, Case{"00000001", 0x0001}, Case{"010", 10}}) {
    SCOPED_TRACE(c.text);
    auto p = Pkey::parse(c.text);
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->wire(), c.wire);
    auto q = Pkey::parseOrExplain(c.text);
    ASSERT_TRUE(q.has_value());
    EXPECT_EQ(*q, *p);
  }
}

TEST(PkeyParse, RefusesWithTheReason) {
  struct Case {
    const char* text;
    Err why;
  };
  for (const Case& c : {
           Case{"", Err::kBadLength},
           Case{"0x", Err::kNotANumber},  // too short for a prefix: "0x" is read as decimal
           Case{"123456789", Err::kBadLength},
           Case{"0x123456789", Err::kBadLength},
           Case{"0xffffffff", Err::kOver16Bits},
           Case{"99999999", Err::kOver16Bits},
           Case{"0x10000", Err::kOver16Bits},
           Case{"65536", Err::kOver16Bits},
           Case{"0x0000", Err::kInvalidKey},
           Case{"0", Err::kInvalidKey},
           Case{"0x8000", Err::kInvalidKey},
           Case{"32768", Err::kInvalidKey},
           Case{"-1", Err::kNotANumber},
           Case{"+1", Err::kNotANumber},
           Case{"7fff", Err::kNotANumber},  // hex needs its prefix
           Case{"0x7fffg", Err::kNotANumber},
           Case{" 0x7fff", Err::kNotANumber},
           Case{"0x7fff ", Err::kNotANumber},
           Case{"0x-1", Err::kNotANumber},
       }) {
    SCOPED_TRACE(c.text);
    EXPECT_FALSE(Pkey::parse(c.text).has_value());
    auto q = Pkey::parseOrExplain(c.text);
    ASSERT_FALSE(q.has_value());
    EXPECT_EQ(q.error(), c.why);
  }
}

TEST(Pkey, FromWireKeepsAllSixteenBits) {
  EXPECT_EQ(Pkey().wire(), 0u);
  EXPECT_FALSE(Pkey().valid());
  for (std::uint32_t w = 0; w <= 0xffff; ++w) {
    const Pkey p = Pkey::fromWire(static_cast<std::uint16_t>(w));
    ASSERT_EQ(p.wire(), w);
    ASSERT_EQ(p.key(), w & 0x7fff);
    ASSERT_EQ(p.isFullMember(), w >= 0x8000);
    ASSERT_EQ(p.valid(), (w & 0x7fff) != 0);
  }
}

TEST(Pkey, MembershipBit) {
  const Pkey limited = Pkey::fromWire(0x7fff);
  const Pkey full = Pkey::fromWire(0xffff);
  EXPECT_FALSE(limited.isFullMember());
  EXPECT_TRUE(full.isFullMember());
  EXPECT_EQ(limited.key(), 0x7fff);
  EXPECT_EQ(full.key(), 0x7fff);
  EXPECT_EQ(limited.fullMember().wire(), 0xffff);
  EXPECT_EQ(full.fullMember().wire(), 0xffff);
  EXPECT_EQ(full.partition().wire(), 0x7fff);
  EXPECT_EQ(limited.partition().wire(), 0x7fff);
  // The invalid key stays invalid with the bit set.
  EXPECT_EQ(Pkey().fullMember().wire(), 0x8000);
  EXPECT_FALSE(Pkey().fullMember().valid());
}

TEST(Pkey, EqualityIsExactSamePartitionIgnoresMembership) {
  const Pkey limited = Pkey::fromWire(0x7fff);
  const Pkey full = Pkey::fromWire(0xffff);
  EXPECT_NE(limited, full);
  EXPECT_TRUE(limited.samePartition(full));
  EXPECT_TRUE(full.samePartition(limited));
  EXPECT_EQ(limited, Pkey::fromWire(0x7fff));
  EXPECT_FALSE(Pkey::fromWire(0x8001).samePartition(Pkey::fromWire(0x8002)));
  EXPECT_FALSE(Pkey::fromWire(0x0001).samePartition(Pkey::fromWire(0x0002)));
  static_assert(Pkey::fromWire(0x8123).samePartition(Pkey::fromWire(0x0123)));
  static_assert(Pkey::fromWire(0x8123) != Pkey::fromWire(0x0123));
}

TEST(Pkey, HexIsFourLowerCaseDigitsOfTheSixteenBits) {
  EXPECT_EQ(Pkey::fromWire(0x7fff).hex(), "0x7fff");
  EXPECT_EQ(Pkey::fromWire(0xffff).hex(), "0xffff");
  EXPECT_EQ(Pkey::fromWire(0x8001).hex(), "0x8001");
  EXPECT_EQ(Pkey::fromWire(0x0001).hex(), "0x0001");
  EXPECT_EQ(Pkey::fromWire(0x00ab).hex(), "0x00ab");
  EXPECT_EQ(Pkey().hex(), "0x0000");
  EXPECT_EQ(Pkey::parse("0X7FFF")->hex(), "0x7fff");
  EXPECT_EQ(Pkey::parse("32769")->hex(), "0x8001");
}

}  // namespace
}  // namespace ibcni::net
