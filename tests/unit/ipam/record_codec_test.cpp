// SPDX-License-Identifier: Apache-2.0
// The store's byte format on its own (ipam/store/record_codec.h): the frame and the attachment record,
// without a directory. The files on disk are covered by file_store_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>

#include "ipam/store/record_codec.h"
#include "store_test_util.h"

namespace ibcni::ipam::testing {
namespace {

using ::testing::HasSubstr;

const std::string kFix = "the fix";

Allocation sample() {
  Allocation a;
  a.key = {"c0ffee", "net1"};
  a.pod = {"ns", "pod", "uid-1"};
  a.netns = "/run/netns/x";
  a.netnsInode = 4026532000;
  a.createdAt = "2024-01-02T03:04:05Z";
  a.addresses = {ip("10.1.2.3"), ip("fd00::3")};
  return a;
}

std::string errorOf(const os::SysResult<std::string>& r) {
  EXPECT_FALSE(r);
  if (r) {
    return "";
  }
  EXPECT_EQ(r.error().err, EUCLEAN);
  return r.error().op;
}

TEST(RecordCodec, Crc32IsZlibs) {
  EXPECT_EQ(codec::crc32("123456789"), 0xcbf43926u);  // the standard check value
  EXPECT_EQ(codec::crc32(""), 0u);
}

TEST(RecordCodec, FrameHeaderNamesKindFormatLengthAndChecksum) {
  EXPECT_EQ(codec::frame("index", "123456789"), "ibcni-ipam index 1 9 cbf43926\n123456789");
  auto body = codec::unframe(codec::frame("index", "a\nb"), "index", "p", kFix);
  ASSERT_TRUE(body);
  EXPECT_EQ(*body, "a\nb");
}

TEST(RecordCodec, UnframeReportsEachDamageNamingTheFileAndTheFix) {
  const std::string good = codec::frame("attachment", "{}\n");
  EXPECT_THAT(errorOf(codec::unframe("", "attachment", "/s/f", kFix)),
              HasSubstr("ipam store file /s/f is corrupt (empty file); the fix"));
  EXPECT_THAT(errorOf(codec::unframe("no newline", "attachment", "/s/f", kFix)), HasSubstr("(no header line)"));
  EXPECT_THAT(errorOf(codec::unframe("ibcni-ipam attachment 1 x\n", "attachment", "/s/f", kFix)),
              HasSubstr("(bad header"));
  EXPECT_THAT(errorOf(codec::unframe(good, "index", "/s/f", kFix)), HasSubstr("(holds a attachment, not an index)"));
  EXPECT_THAT(errorOf(codec::unframe("ibcni-ipam attachment 2 3 00000000\n{}\n", "attachment", "/s/f", kFix)),
              HasSubstr("(format 2 is not 1)"));
  EXPECT_THAT(errorOf(codec::unframe(good.substr(0, good.size() - 1), "attachment", "/s/f", kFix)),
              HasSubstr("(truncated or extended: 2 bytes instead of 3)"));
  EXPECT_THAT(errorOf(codec::unframe(good + "x", "attachment", "/s/f", kFix)),
              HasSubstr("(truncated or extended: 4 bytes instead of 3)"));
  std::string flipped = good;
  flipped[flipped.size() - 2] ^= 0x01;
  EXPECT_THAT(errorOf(codec::unframe(flipped, "attachment", "/s/f", kFix)), HasSubstr("(checksum mismatch)"));
}

TEST(RecordCodec, RecordRoundTrips) {
  const Allocation a = sample();
  std::string text = codec::encodeRecord(a);
  EXPECT_TRUE(text.starts_with("ibcni-ipam attachment 1 "));
  auto back = codec::decodeRecord(text, a.key, "/s/r");
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(*back, a);
}

TEST(RecordCodec, GuidRecordRoundTripsInTheGuidSpaceOnly) {
  Allocation a = sample();
  a.addresses = {net::IpAddress::fromGuid(net::Guid{0x0200000000000105ULL})};
  const std::string text = codec::encodeRecord(a);
  EXPECT_THAT(text, HasSubstr(R"("addresses":["02:00:00:00:00:00:01:05"])"));
  auto back = codec::decodeRecord(text, a.key, "/s/r", guidSpace());
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(*back, a);
  ASSERT_EQ(back->addresses.size(), 1u);
  EXPECT_TRUE(back->addresses[0].isGuid());
  EXPECT_EQ(back->addresses[0].guid()->value, 0x0200000000000105ULL);
  // An address is no GUID: a GUID store's record listing one is corrupt, naming the value.
  auto v4 = codec::decodeRecord(codec::encodeRecord(sample()), a.key, "/s/r", guidSpace());
  ASSERT_FALSE(v4);
  EXPECT_EQ(v4.error().err, EUCLEAN);
  EXPECT_THAT(v4.error().op, HasSubstr("/s/r is corrupt (bad GUID \"10.1.2.3\")"));
}

TEST(RecordCodec, RecordOfAnotherKeyOrWithBadFieldsIsCorrupt) {
  const Allocation a = sample();
  auto other = codec::decodeRecord(codec::encodeRecord(a), {"c0ffee", "net2"}, "/s/r");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().err, EUCLEAN);
  EXPECT_THAT(other.error().op, HasSubstr("/s/r is corrupt (it names attachment c0ffee/net1)"));
  EXPECT_THAT(other.error().op, HasSubstr("remove it, then run ibcni-ipam gc"));
  auto bad = [&](const std::string& body) {
    auto r = codec::decodeRecord(codec::frame("attachment", body), a.key, "/s/r");
    EXPECT_FALSE(r) << body;
    return r ? std::string() : r.error().op;
  };
  EXPECT_THAT(bad("[]"), HasSubstr("(not a JSON object)"));
  EXPECT_THAT(bad(R"({"containerID": "c0ffee"})"), HasSubstr("(a field is missing or has the wrong type)"));
  const std::string fields =
      R"("containerID": "c0ffee", "ifname": "net1", "netns": "", "createdAt": "", "netnsInode": 0, )";
  EXPECT_THAT(bad("{" + fields + R"("pod": {"namespace": 1, "name": "", "uid": ""}, "addresses": []})"),
              HasSubstr("(a pod field is missing or has the wrong type)"));
  EXPECT_THAT(bad("{" + fields + R"("pod": {"namespace": "", "name": "", "uid": ""}, "addresses": ["10.1.2"]})"),
              HasSubstr("(bad address \"10.1.2\")"));
  auto ok = codec::decodeRecord(
      codec::frame("attachment", "{" + fields + R"("pod": {"namespace": "", "name": "", "uid": ""}, "addresses": []})"),
      a.key, "/s/r");
  EXPECT_TRUE(ok);
}

TEST(RecordCodec, RecordNamesSplitBackIntoTheirKey) {
  EXPECT_EQ(codec::recordName({"c0ffee", "net1"}), "c0ffee:net1");
  auto key = codec::keyFromRecordName("c0ffee:net1");
  ASSERT_TRUE(key);
  EXPECT_EQ(*key, (AttachmentKey{"c0ffee", "net1"}));
  EXPECT_FALSE(codec::keyFromRecordName("c0ffee"));
  EXPECT_FALSE(codec::keyFromRecordName(":net1"));
  EXPECT_FALSE(codec::keyFromRecordName("c0ffee:"));
  EXPECT_FALSE(codec::keyFromRecordName("../x:net1"));
  EXPECT_TRUE(codec::isValidKey({"c0ffee", "net1"}));
  EXPECT_FALSE(codec::isValidKey({"c0ffee", "a/b"}));
}

}  // namespace
}  // namespace ibcni::ipam::testing
