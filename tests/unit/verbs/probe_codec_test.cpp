// SPDX-License-Identifier: Apache-2.0
// encodeProbeAnswer / decodeProbeAnswer: round trips of every shape of answer, and refusal of
// anything that is not a whole, well-formed frame.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "plugin/verbs/probe_codec.h"

namespace ibcni::verbs {
namespace {

ProbeResult roundTrip(const ProbeResult& in) {
  const std::string bytes = encodeProbeAnswer(in);
  auto out = decodeProbeAnswer(bytes);
  EXPECT_TRUE(out.has_value());
  if (!out) {
    return {};
  }
  EXPECT_TRUE(out->has_value());
  return out->has_value() ? **out : ProbeResult{};
}

void expectSame(const ProbeResult& a, const ProbeResult& b) {
  EXPECT_EQ(a.available, b.available);
  EXPECT_EQ(a.unavailableReason, b.unavailableReason);
  EXPECT_EQ(a.devices, b.devices);
  EXPECT_EQ(a.opened, b.opened);
  EXPECT_EQ(a.openError, b.openError);
  EXPECT_EQ(a.port, b.port);
  EXPECT_EQ(a.qpProbeOk, b.qpProbeOk);
  EXPECT_EQ(a.qpProbeError, b.qpProbeError);
}

/// A port with everything set: IB-style pkeys, a RoCE v1 and a v2 GID, GUIDs with high bits.
ProbeResult fullResult() {
  ProbeResult r;
  r.devices = {"mlx5_0", "rxe0"};
  r.opened = true;
  PortFacts p;
  p.device = "rxe0";
  p.port = 1;
  p.state = 4;
  p.physState = 5;
  p.linkLayer = LinkLayer::kEthernet;
  p.lid = 0xBEEF;
  p.smLid = 1;
  p.nodeGuid = 0xFEDCBA9876543210ULL;
  p.portGuid = 0x0123456789ABCDEFULL;
  p.pkeys = {net::Pkey::fromWire(0xFFFF), net::Pkey::fromWire(0x8001), net::Pkey::fromWire(0x7FFF)};
  Gid v1;
  v1.index = 0;
  v1.raw = {0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0x00, 0xFF, 0xFE, 0x12, 0x34, 0x56};
  v1.type = "IB/RoCE v1";
  Gid v2;
  v2.index = 1025;
  v2.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 77, 0, 1};
  v2.type = "RoCE v2";
  Gid untyped;
  untyped.index = 7;
  untyped.raw.fill(0xAB);
  p.gids = {v1, v2, untyped};
  r.port = p;
  r.qpProbeOk = true;
  return r;
}

TEST(ProbeCodec, DefaultResultRoundTrips) { expectSame(roundTrip(ProbeResult{}), ProbeResult{}); }

TEST(ProbeCodec, UnavailableRoundTrips) {
  ProbeResult r;
  r.available = false;
  r.unavailableReason = "libibverbs.so.1: cannot open shared object file: No such file or directory";
  expectSame(roundTrip(r), r);
}

TEST(ProbeCodec, DevicesWithoutPortRoundTrip) {
  ProbeResult r;
  r.devices = {"mlx5_0", "mlx5_1", ""};
  r.openError = "Permission denied (EACCES)";
  expectSame(roundTrip(r), r);
}

TEST(ProbeCodec, FullPortWithGidsAndPkeysRoundTrips) {
  const ProbeResult r = fullResult();
  expectSame(roundTrip(r), r);
}

TEST(ProbeCodec, InfinibandPortWithEmptyListsRoundTrips) {
  ProbeResult r;
  r.opened = true;
  r.port = PortFacts{};
  r.port->linkLayer = LinkLayer::kInfiniband;
  r.port->state = 1;
  expectSame(roundTrip(r), r);
}

TEST(ProbeCodec, QpProbeFailureRoundTrips) {
  ProbeResult r = fullResult();
  r.qpProbeOk = false;
  r.qpProbeError = "ibv_modify_qp RTR: Invalid argument (EINVAL)";
  expectSame(roundTrip(r), r);
}

TEST(ProbeCodec, StringsWithNulAndNewlinesRoundTrip) {
  ProbeResult r;
  r.unavailableReason = std::string("a\0b\nc", 5);
  r.available = false;
  expectSame(roundTrip(r), r);
}

TEST(ProbeCodec, ErrorRoundTrips) {
  const ProbeAnswer in = os::sysFail(EINVAL, "setns /run/netns/x", "ext");
  auto out = decodeProbeAnswer(encodeProbeAnswer(in));
  ASSERT_TRUE(out.has_value());
  ASSERT_FALSE(out->has_value());
  EXPECT_EQ(out->error().err, EINVAL);
  EXPECT_EQ(out->error().op, "setns /run/netns/x");
  EXPECT_EQ(out->error().extAck, "ext");
}

TEST(ProbeCodec, EmptyAndGarbageAreRejected) {
  EXPECT_FALSE(decodeProbeAnswer("").has_value());
  EXPECT_FALSE(decodeProbeAnswer("IBVP").has_value());
  EXPECT_FALSE(decodeProbeAnswer("hello, this is not a frame at all").has_value());
  EXPECT_FALSE(decodeProbeAnswer(std::string(64, '\0')).has_value());
  EXPECT_FALSE(decodeProbeAnswer(std::string(64, '\xFF')).has_value());
}

TEST(ProbeCodec, EveryTruncationIsRejected) {
  const std::string bytes = encodeProbeAnswer(fullResult());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(decodeProbeAnswer(std::string_view(bytes).substr(0, n)).has_value()) << "length " << n;
  }
}

TEST(ProbeCodec, TrailingBytesAreRejected) {
  EXPECT_FALSE(decodeProbeAnswer(encodeProbeAnswer(fullResult()) + '\0').has_value());
}

TEST(ProbeCodec, WrongMagicVersionKindOrLengthIsRejected) {
  const std::string good = encodeProbeAnswer(ProbeResult{});
  ASSERT_TRUE(decodeProbeAnswer(good).has_value());
  for (std::size_t at : {0U, 3U, 4U, 5U, 6U, 9U}) {  // magic, magic, version, kind, length, length
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x40);
    EXPECT_FALSE(decodeProbeAnswer(bad).has_value()) << "byte " << at;
  }
}

TEST(ProbeCodec, OutOfRangeValuesAreRejected) {
  // A result frame's body starts with `available` (one byte, 0 or 1).
  std::string bad = encodeProbeAnswer(ProbeResult{});
  bad[10] = 2;
  EXPECT_FALSE(decodeProbeAnswer(bad).has_value());
  // The last string is qpProbeError (empty: 4 zero bytes); before it the QP tag (0, 1 or 2).
  bad = encodeProbeAnswer(ProbeResult{});
  bad[bad.size() - 5] = 3;
  EXPECT_FALSE(decodeProbeAnswer(bad).has_value());
}

TEST(ProbeCodec, HugeCountsAreRejectedWithoutAllocating) {
  // devices count (after available u8 and an empty unavailableReason) claims 2^32-1 entries.
  std::string bad = encodeProbeAnswer(ProbeResult{});
  for (std::size_t i = 15; i < 19; ++i) {
    bad[i] = '\xFF';
  }
  EXPECT_FALSE(decodeProbeAnswer(bad).has_value());
}

TEST(ProbeCodec, OverlongFrameIsRejected) {
  ProbeResult r;
  r.unavailableReason.assign(kMaxProbeFrame, 'x');
  EXPECT_FALSE(decodeProbeAnswer(encodeProbeAnswer(r)).has_value());
}

}  // namespace
}  // namespace ibcni::verbs
