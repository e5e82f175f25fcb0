// SPDX-License-Identifier: Apache-2.0
// The port counter reader over FakeSysfsTree (a real directory tree in a temp dir) and its child's
// answer codec: no root, no RDMA device, no namespace change.
#include "plugin/rdma/port_counters.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "fakes/fake_sysfs_tree.h"
#include "support/ns_ioctl.h"
#include "plugin/rdma/port_counters_child.h"

namespace ibcni::rdma {
namespace {

using ::ibcni::testing::FakeSysfsTree;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

/// mlx5_0 on 0000:3b:00.0 with port 1: state ACTIVE, PMA counters and hw_counters as mlx5 shows.
class PortCountersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tree_.addRdmaDevice("0000:3b:00.0", "mlx5_0")
        .writeFile(port("state"), "4: ACTIVE\n")
        .writeFile(port("counters/port_xmit_data"), "250\n")
        .writeFile(port("counters/port_rcv_data"), "18446744073709551615\n")
        .writeFile(port("counters/port_xmit_packets"), "12\n")
        .writeFile(port("counters/link_downed"), "0\n")
        .writeFile(port("hw_counters/out_of_buffer"), "7\n")
        .writeFile(port("hw_counters/lifespan"), "10\n");
    ASSERT_TRUE(tree_.ok()) << tree_.error();
  }

  static std::string port(const std::string& rel) { return "class/infiniband/mlx5_0/ports/1/" + rel; }

  FakeSysfsTree tree_;
};

TEST_F(PortCountersTest, ReadsStateCountersAndHwCounters) {
  auto got = readPortCountersAt(tree_.root(), "mlx5_0", 1);
  ASSERT_TRUE(got.has_value()) << got.error().msg;
  EXPECT_EQ(got->device, "mlx5_0");
  EXPECT_EQ(got->port, 1U);
  EXPECT_EQ(got->state, 4U);
  EXPECT_THAT(got->counters, ElementsAre(Pair("link_downed", 0U), Pair("port_rcv_data", 18446744073709551615ULL),
                                         Pair("port_xmit_data", 250U), Pair("port_xmit_packets", 12U)));
  // lifespan is the hw counters' cache time, not a counter.
  EXPECT_THAT(got->hwCounters, ElementsAre(Pair("out_of_buffer", 7U)));
  EXPECT_THAT(got->skipped, IsEmpty());
}

TEST_F(PortCountersTest, ThisProcesssNetnsReadsTheSysfsRoot) {
  CounterSource source;
  source.sysfsRoot = tree_.root();
  auto got = readPortCounters("", "mlx5_0", 1, source);
  ASSERT_TRUE(got.has_value()) << got.error().msg;
  EXPECT_EQ(got->counters.at("port_xmit_data"), 250U);
}

TEST_F(PortCountersTest, MissingDeviceIsAnErrorNamingIt) {
  auto got = readPortCountersAt(tree_.root(), "mlx5_7", 1);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code, cni::Errc::kDeviceNotFound);
  EXPECT_THAT(got.error().msg, HasSubstr("\"mlx5_7\""));
  EXPECT_THAT(got.error().details, HasSubstr("ENOENT"));
}

TEST_F(PortCountersTest, MissingPortIsAnErrorNamingDeviceAndPort) {
  auto got = readPortCountersAt(tree_.root(), "mlx5_0", 2);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code, cni::Errc::kDeviceNotFound);
  EXPECT_THAT(got.error().msg, HasSubstr("port 2 of RDMA device \"mlx5_0\""));
}

TEST_F(PortCountersTest, DeviceNameThatIsNoSysfsNameIsRefused) {
  for (const std::string name : {"../mlx5_0", "", "..", "a/b"}) {
    auto got = readPortCountersAt(tree_.root(), name, 1);
    ASSERT_FALSE(got.has_value()) << name;
    EXPECT_EQ(got.error().code, cni::Errc::kInvalidConfig) << name;
  }
}

TEST_F(PortCountersTest, GarbageCounterFilesAreSkippedAndListed) {
  tree_.writeFile(port("counters/symbol_error"), "lots\n")
      .writeFile(port("counters/port_rcv_errors"), "")
      .writeFile(port("counters/port_rcv_packets"), "-1\n")
      .writeFile(port("counters/unicast_xmit_packets"), "18446744073709551616\n")  // 2^64
      .writeFile(port("counters/VL15_dropped"), "3 4\n")
      .makeDir(port("hw_counters/a_directory"));
  ASSERT_TRUE(tree_.ok()) << tree_.error();
  auto got = readPortCountersAt(tree_.root(), "mlx5_0", 1);
  ASSERT_TRUE(got.has_value()) << got.error().msg;
  EXPECT_THAT(got->skipped,
              ElementsAre("counters/VL15_dropped", "counters/port_rcv_errors", "counters/port_rcv_packets",
                          "counters/symbol_error", "counters/unicast_xmit_packets", "hw_counters/a_directory"));
  EXPECT_EQ(got->counters.size(), 4U);  // the good ones are still there
  EXPECT_FALSE(got->counters.contains("symbol_error"));
}

TEST_F(PortCountersTest, StateNotOfTheKernelsFormIsUnknown) {
  for (const char* text : {"ACTIVE\n", ": ACTIVE\n", "x4: ACTIVE\n"}) {
    tree_.writeFile(port("state"), text);
    auto got = readPortCountersAt(tree_.root(), "mlx5_0", 1);
    ASSERT_TRUE(got.has_value()) << got.error().msg;
    EXPECT_EQ(got->state, std::nullopt) << text;
  }
  tree_.removePath(port("state"));
  auto got = readPortCountersAt(tree_.root(), "mlx5_0", 1);
  ASSERT_TRUE(got.has_value()) << got.error().msg;
  EXPECT_EQ(got->state, std::nullopt);
}

TEST_F(PortCountersTest, DeviceWithoutPmaCountersHasHwCountersOnly) {
  // rxe: ports/1/hw_counters only (the kernel-lab shows it).
  tree_.addRdmaDevice("0000:00:06.0", "rxe0")
      .writeFile("class/infiniband/rxe0/ports/1/state", "4: ACTIVE\n")
      .writeFile("class/infiniband/rxe0/ports/1/hw_counters/sent_pkts", "42\n");
  ASSERT_TRUE(tree_.ok()) << tree_.error();
  auto got = readPortCountersAt(tree_.root(), "rxe0", 1);
  ASSERT_TRUE(got.has_value()) << got.error().msg;
  EXPECT_THAT(got->counters, IsEmpty());
  EXPECT_THAT(got->hwCounters, ElementsAre(Pair("sent_pkts", 42U)));
}

TEST(BytesOfDataCounter, IsFourBytesPerWord) {
  static_assert(bytesOfDataCounter(250) == 1000);
  EXPECT_EQ(bytesOfDataCounter(0), 0U);
  EXPECT_EQ(bytesOfDataCounter(1), 4U);
  EXPECT_EQ(bytesOfDataCounter(1ULL << 40), 1ULL << 42);
}

TEST_F(PortCountersTest, BatchKeepsTheOrderOfThePorts) {
  CounterSource source;
  source.sysfsRoot = tree_.root();
  auto got = readPortCountersBatch("", {{"mlx5_9", 1}, {"mlx5_0", 1}, {"mlx5_0", 3}}, source);
  ASSERT_EQ(got.size(), 3U);
  ASSERT_FALSE(got[0].has_value());
  EXPECT_THAT(got[0].error().msg, HasSubstr("mlx5_9"));
  ASSERT_TRUE(got[1].has_value());
  EXPECT_EQ(got[1]->counters.at("port_xmit_packets"), 12U);
  ASSERT_FALSE(got[2].has_value());
  EXPECT_THAT(got[2].error().msg, HasSubstr("port 3"));
}

TEST_F(PortCountersTest, NetnsThatIsGoneIsAnErrorForEveryPort) {
  CounterSource source;
  source.sysfsRoot = tree_.root();
  const std::string gone = tree_.root() + "/no-such-netns";
  auto got = readPortCountersBatch(gone, {{"mlx5_0", 1}, {"mlx5_1", 1}}, source);
  ASSERT_EQ(got.size(), 2U);
  for (const auto& r : got) {
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, cni::Errc::kNetnsFailure);
    EXPECT_THAT(r.error().msg, HasSubstr(gone));
  }
  // A file that is no network namespace.
  auto notNetns = readPortCounters(tree_.root() + "/" + port("state"), "mlx5_0", 1, source);
  ASSERT_FALSE(notNetns.has_value());
  EXPECT_EQ(notNetns.error().code, cni::Errc::kNetnsFailure);
}

TEST_F(PortCountersTest, ChildThatDoesNotAnswerInTimeIsKilled) {
  if (::ibcni::testing::nsIoctlUnsupported()) {
    GTEST_SKIP() << "NS_GET_NSTYPE answers ENOSYS (qemu-user): the arm64 kernel lab runs this natively";
  }
  // mlx5_5 is not in the host's tree: the netns child is asked, and given no time at all.
  CounterSource source;
  source.sysfsRoot = tree_.root();
  source.netnsSysfsRoot = tree_.root();
  source.mountFreshSysfs = false;
  source.timeout = std::chrono::milliseconds(0);
  auto got = readPortCounters("/proc/self/ns/net", "mlx5_5", 1, source);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code, cni::Errc::kIoFailure);
  EXPECT_THAT(got.error().details, HasSubstr("ETIMEDOUT"));
}

TEST(PortCountersCodec, RoundTrips) {
  PortCounters a;
  a.device = "mlx5_0";
  a.port = 2;
  a.state = 4;
  a.counters = {{"port_xmit_data", 18446744073709551615ULL}, {"link_downed", 1}};
  a.hwCounters = {{"out_of_buffer", 3}};
  a.skipped = {"counters/symbol_error"};
  PortCounters b;
  b.device = "rxe1";
  std::vector<cni::Result<PortCounters>> in{a, cni::fail(cni::Errc::kDeviceNotFound, "RDMA device \"x\" not found",
                                                          "open x: No such file (ENOENT)"),
                                            b};
  auto out = decodePortCounters(encodePortCounters(in));
  ASSERT_TRUE(out.has_value());
  ASSERT_EQ(out->size(), 3U);
  ASSERT_TRUE((*out)[0].has_value());
  EXPECT_EQ((*out)[0]->device, "mlx5_0");
  EXPECT_EQ((*out)[0]->port, 2U);
  EXPECT_EQ((*out)[0]->state, 4U);
  EXPECT_EQ((*out)[0]->counters, a.counters);
  EXPECT_EQ((*out)[0]->hwCounters, a.hwCounters);
  EXPECT_EQ((*out)[0]->skipped, a.skipped);
  ASSERT_FALSE((*out)[1].has_value());
  EXPECT_EQ((*out)[1].error().code, cni::Errc::kDeviceNotFound);
  EXPECT_EQ((*out)[1].error().msg, "RDMA device \"x\" not found");
  EXPECT_EQ((*out)[1].error().details, "open x: No such file (ENOENT)");
  ASSERT_TRUE((*out)[2].has_value());
  EXPECT_EQ((*out)[2]->state, std::nullopt);
  EXPECT_THAT((*out)[2]->counters, IsEmpty());
}

TEST(PortCountersCodec, RefusesWhatItDoesNotWrite) {
  const std::string good = "ok rxe0 1\nhw sent_pkts 5\nend\n";
  ASSERT_TRUE(decodePortCounters(good).has_value());
  for (const std::string bad : {"ok rxe0 1\nhw sent_pkts 5\n", "ok rxe0 1\nhw sent_pkts 5\nend",
                                "ok rxe0 1\nhw sent_pkts x\nend\n", "ok rxe0\nend\n", "what\n",
                                "ok rxe0 1\nhw sent_pkts 5\nhw sent_pkts 6\nend\n", "error x msg\nend\n",
                                "error 100 msg\nstate 4\nend\n"}) {
    EXPECT_FALSE(decodePortCounters(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace ibcni::rdma
