// SPDX-License-Identifier: Apache-2.0
// The free-address index on its own (ipam/store/free_index.h), with the claims in a set instead of
// ips/: marks, the claim-checked search, the cursor, the index file's body. FileStore's use of it
// on disk is covered by file_store_test.cpp and fill_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <cerrno>
#include <set>

#include "ipam/store/free_index.h"
#include "ipam/store/record_codec.h"
#include "store_test_util.h"

namespace ibcni::ipam::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

/// Claims held in memory; counts the questions.
struct Claims {
  std::set<net::IpAddress> held;
  int asked = 0;
  ClaimCheck check() {
    return [this](const net::IpAddress& a) -> os::SysResult<bool> {
      ++asked;
      return held.contains(a);
    };
  }
};

FreeIndex v4(const char* start = "10.0.0.0", const char* end = "10.0.0.255") {
  FreeIndex idx({{ip(start), ip(end)}});
  idx.rebuild({});
  return idx;
}

std::optional<net::IpAddress> firstFree(FreeIndex& idx, Claims& claims, const char* lo = "0.0.0.0",
                                        const char* hi = "255.255.255.255", std::size_t range = 0) {
  auto r = idx.firstFree(range, ip(lo), ip(hi), claims.check());
  EXPECT_TRUE(r) << r.error().describe();
  return r ? *r : std::nullopt;
}

TEST(FreeIndex, FileNameFollowsTheRanges) {
  FreeIndex a({{ip("10.0.0.0"), ip("10.0.0.255")}});
  EXPECT_THAT(a.fileName(), ::testing::MatchesRegex("set-[0-9a-f]{16}"));
  EXPECT_EQ(FreeIndex({{ip("10.0.0.0"), ip("10.0.0.255")}}).fileName(), a.fileName());
  EXPECT_NE(FreeIndex({{ip("10.0.0.0"), ip("10.0.0.254")}}).fileName(), a.fileName());
  EXPECT_FALSE(a.known());
}

TEST(FreeIndex, FirstFreeSkipsMarksAndAsksOnlyAboutUnmarkedAddresses) {
  FreeIndex idx = v4();
  for (int i = 0; i < 100; ++i) {
    idx.mark(fromInt(toInt(ip("10.0.0.0")) + static_cast<U128>(i), AF_INET), true);
  }
  Claims claims;
  EXPECT_EQ(firstFree(idx, claims), ip("10.0.0.100"));
  EXPECT_EQ(claims.asked, 1) << "marked addresses are not asked about";
  EXPECT_EQ(idx.countMarked(), 100u);
  EXPECT_EQ(firstFree(idx, claims, "10.0.0.50", "10.0.0.60"), std::nullopt);
  EXPECT_EQ(firstFree(idx, claims, "10.0.0.7", "10.0.0.255"), ip("10.0.0.100"));
  EXPECT_EQ(firstFree(idx, claims, "10.0.1.0", "10.0.1.255"), std::nullopt) << "outside the range";
}

TEST(FreeIndex, AClaimWithoutItsMarkIsSkippedAndMarked) {
  FreeIndex idx = v4();
  idx.markSaved();
  Claims claims;
  claims.held = {ip("10.0.0.0"), ip("10.0.0.1")};
  EXPECT_EQ(firstFree(idx, claims), ip("10.0.0.2"));
  EXPECT_THAT(idx.marked(), ElementsAre(ip("10.0.0.0"), ip("10.0.0.1")));
  EXPECT_TRUE(idx.dirty()) << "the repair is to be saved";
}

TEST(FreeIndex, ClaimCheckErrorsStopTheSearch) {
  FreeIndex idx = v4();
  auto r = idx.firstFree(0, ip("10.0.0.0"), ip("10.0.0.255"),
                         [](const net::IpAddress&) -> os::SysResult<bool> { return os::sysFail(EIO, "stat x"); });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().err, EIO);
}

TEST(FreeIndex, MarksChangeOnlyWhatTheySayAndDirtyOnlyOnChange) {
  FreeIndex idx = v4();
  idx.markSaved();
  idx.mark(ip("10.0.0.9"), false);
  EXPECT_FALSE(idx.dirty());
  idx.mark(ip("10.0.0.9"), true);
  EXPECT_TRUE(idx.dirty());
  idx.markSaved();
  idx.mark(ip("10.0.0.9"), true);
  idx.mark(ip("10.9.9.9"), true);  // outside: nothing indexes it
  idx.mark(ip("fd00::9"), true);   // other family
  EXPECT_FALSE(idx.dirty());
  EXPECT_THAT(idx.marked(), ElementsAre(ip("10.0.0.9")));
  idx.setCursor(ip("10.0.0.9"));
  EXPECT_TRUE(idx.dirty());
  EXPECT_EQ(idx.cursor(), ip("10.0.0.9"));
}

TEST(FreeIndex, RebuildMarksTheClaimNamesInBitmapRanges) {
  FreeIndex idx({{ip("10.0.0.0"), ip("10.0.0.9")}, {ip("10.0.1.0"), ip("10.0.1.9")}});
  idx.rebuild({"10.0.1.5", "junk", "fd00::1", "10.0.0.3", "10.0.2.0"});
  EXPECT_TRUE(idx.known());
  EXPECT_TRUE(idx.dirty());
  EXPECT_THAT(idx.marked(), ElementsAre(ip("10.0.0.3"), ip("10.0.1.5")));
  EXPECT_EQ(idx.cursor(), std::nullopt);
  EXPECT_FALSE(idx.hasProbedRange());
}

TEST(FreeIndex, DropUnclaimedClearsMarksWithoutAClaim) {
  FreeIndex idx = v4();
  for (const char* a : {"10.0.0.1", "10.0.0.2", "10.0.0.200"}) {
    idx.mark(ip(a), true);
  }
  Claims claims;
  claims.held = {ip("10.0.0.2")};
  auto n = idx.dropUnclaimed(claims.check());
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 2u);
  EXPECT_THAT(idx.marked(), ElementsAre(ip("10.0.0.2")));
}

TEST(FreeIndex, LargeRangesAreProbedAndCountedFromTheClaimNames) {
  // 2^20 addresses still get a bitmap; one more does not.
  EXPECT_FALSE(FreeIndex({{ip("10.0.0.0"), ip("10.15.255.255")}}).hasProbedRange());
  EXPECT_TRUE(FreeIndex({{ip("10.0.0.0"), ip("10.16.0.0")}}).hasProbedRange());
  FreeIndex idx({{ip("fd00::"), ip("fd00::ffff:ffff:ffff:ffff")}});
  idx.rebuild({"fd00::1"});
  EXPECT_TRUE(idx.marked().empty());
  Claims claims;
  claims.held = {ip("fd00::1"), ip("fd00::2")};
  auto got = idx.firstFree(0, ip("fd00::1"), ip("fd00::ffff"), claims.check());
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, ip("fd00::3"));
  EXPECT_EQ(claims.asked, 3);
  got = idx.firstFree(0, ip("fd00::1"), ip("fd00::2"), claims.check());
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, std::nullopt);
  EXPECT_EQ(idx.countMarked(), 0u);
  EXPECT_EQ(idx.countInProbedRanges({"fd00::1", "fd00::2", "fd01::1", "10.0.0.1", "junk"}), 2u);
}

TEST(FreeIndex, EncodeDecodeRoundTrips) {
  const RangeSetSpans spans{{ip("10.0.0.0"), ip("10.0.0.99")}, {ip("10.0.1.0"), ip("10.0.1.63")}};
  FreeIndex a(spans);
  a.rebuild({"10.0.0.0", "10.0.0.64", "10.0.0.99", "10.0.1.63"});
  a.setCursor(ip("10.0.0.99"));
  std::string text = a.encode();
  EXPECT_TRUE(text.starts_with("ibcni-ipam index 1 "));
  EXPECT_THAT(text, HasSubstr("\nspec 10.0.0.0-10.0.0.99,10.0.1.0-10.0.1.63\ncursor 10.0.0.99\n"
                              "range 10.0.0.0-10.0.0.99 bitmap 16\n"));
  FreeIndex b(spans);
  ASSERT_TRUE(b.decode(text, "/s/i", "fix"));
  EXPECT_TRUE(b.known());
  EXPECT_FALSE(b.dirty());
  EXPECT_EQ(b.marked(), a.marked());
  EXPECT_EQ(b.cursor(), a.cursor());
  EXPECT_EQ(b.encode(), text);
}

TEST(FreeIndex, GuidIndexReadsClaimNamesOfSixteenHexDigitsAndAGuidCursor) {
  auto g = [](std::uint64_t v) { return net::IpAddress::fromGuid(net::Guid{v}); };
  const RangeSetSpans spans{{g(0x0200000000000100ULL), g(0x02000000000001ffULL)}};
  FreeIndex a(spans, guidSpace());
  EXPECT_TRUE(a.covers(g(0x0200000000000142ULL)));
  EXPECT_FALSE(a.covers(ip("200::142")));
  // Only the GUID claim name counts: GUID text is IPv6 text, and an IPv6 value is not in a GUID set.
  a.rebuild({"0200000000000101", "02:00:00:00:00:00:01:02", "200::103", "10.0.0.1", "0200000000000200"});
  EXPECT_THAT(a.marked(), ElementsAre(g(0x0200000000000101ULL)));
  a.setCursor(g(0x0200000000000101ULL));
  const std::string text = a.encode();
  EXPECT_THAT(text, HasSubstr("\nspec 02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:ff\n"
                              "cursor 02:00:00:00:00:00:01:01\n"
                              "range 02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:ff bitmap 32\n"));
  FreeIndex b(spans, guidSpace());
  ASSERT_TRUE(b.decode(text, "/s/i", "fix"));
  EXPECT_EQ(b.marked(), a.marked());
  ASSERT_TRUE(b.cursor());
  EXPECT_TRUE(b.cursor()->isGuid());
  EXPECT_EQ(*b.cursor(), g(0x0200000000000101ULL));
  Claims claims;
  claims.held.insert(g(0x0200000000000100ULL));
  auto r = b.firstFree(0, g(0x0200000000000100ULL), g(0x02000000000001ffULL), claims.check());
  ASSERT_TRUE(r && *r);
  EXPECT_EQ(**r, g(0x0200000000000102ULL));
}

TEST(FreeIndex, TheBitmapIsLittleEndianWordsOfAddressBitsLowFirst) {
  // The file format, whatever the host: bit i of the range is bit i%8 of byte i/8.
  FreeIndex a = v4("10.0.0.0", "10.0.0.99");
  a.rebuild({"10.0.0.0", "10.0.0.15", "10.0.0.65"});
  const std::string text = a.encode();
  const std::string head = "range 10.0.0.0-10.0.0.99 bitmap 16\n";
  const auto at = text.find(head);
  ASSERT_NE(at, std::string::npos) << text;
  const std::string expected("\x01\x80\0\0\0\0\0\0\x02\0\0\0\0\0\0\0", 16);
  EXPECT_EQ(text.substr(at + head.size()), expected);
  FreeIndex b = v4("10.0.0.0", "10.0.0.99");
  ASSERT_TRUE(b.decode(text, "/s/i", "fix"));
  EXPECT_EQ(b.marked(), a.marked());
}

TEST(FreeIndex, DecodeAcceptsOnlyAnIndexOfTheseRangesAndChangesNothingWhenItFails) {
  FreeIndex idx = v4("10.0.0.0", "10.0.0.9");
  idx.mark(ip("10.0.0.4"), true);
  idx.setCursor(ip("10.0.0.4"));
  auto fails = [&](const std::string& text) {
    auto r = idx.decode(text, "/s/i", "the fix");
    EXPECT_FALSE(r);
    if (r) {
      return std::string();
    }
    EXPECT_EQ(r.error().err, EUCLEAN);
    EXPECT_THAT(r.error().op, HasSubstr("ipam store file /s/i is corrupt ("));
    EXPECT_THAT(r.error().op, HasSubstr("; the fix"));
    return r.error().op;
  };
  EXPECT_THAT(fails(v4("10.0.0.0", "10.0.0.8").encode()), HasSubstr("it does not describe ranges 10.0.0.0-10.0.0.9"));
  const std::string head = "spec 10.0.0.0-10.0.0.9\n";
  const std::string range = "range 10.0.0.0-10.0.0.9 bitmap 8\n";
  const std::string zero(8, '\0');
  auto frame = [](const std::string& body) { return codec::frame("index", body); };
  EXPECT_THAT(fails(frame(head)), HasSubstr("(no cursor line)"));
  EXPECT_THAT(fails(frame(head + "cursor fd00::1\n" + range + zero)), HasSubstr("(bad cursor fd00::1)"));
  EXPECT_THAT(fails(frame(head + "cursor -\nrange 10.0.0.0-10.0.0.9 probe 0\n")), HasSubstr("(bad range line)"));
  EXPECT_THAT(fails(frame(head + "cursor -\n" + range + "1234")), HasSubstr("(bitmap cut short)"));
  std::string past = zero;
  past[1] = 0x04;  // bit 10: one past the last address
  EXPECT_THAT(fails(frame(head + "cursor -\n" + range + past)), HasSubstr("(bits set past the end of a range)"));
  EXPECT_THAT(fails(frame(head + "cursor -\n" + range + zero + "x")), HasSubstr("(trailing bytes)"));
  EXPECT_THAT(fails(idx.encode().substr(1)), HasSubstr("(bad header"));
  EXPECT_THAT(idx.marked(), ElementsAre(ip("10.0.0.4")));
  EXPECT_EQ(idx.cursor(), ip("10.0.0.4"));
  EXPECT_TRUE(idx.dirty());
}

TEST(FreeIndex, ForgetDropsEverything) {
  FreeIndex idx = v4();
  idx.mark(ip("10.0.0.4"), true);
  idx.setCursor(ip("10.0.0.4"));
  idx.forget();
  EXPECT_FALSE(idx.known());
  EXPECT_FALSE(idx.dirty());
  EXPECT_EQ(idx.cursor(), std::nullopt);
  EXPECT_TRUE(idx.marked().empty());
}

}  // namespace
}  // namespace ibcni::ipam::testing
