// SPDX-License-Identifier: Apache-2.0
// The port counter reader's netns child for real (needs root: label netns): it joins a fresh
// network namespace, mounts a sysfs there in a mount namespace of its own and answers over a pipe;
// this process's namespaces and mounts stay as they were, and every child is reaped.
#include <sys/wait.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <optional>
#include <sstream>
#include <string>

#include "fakes/fake_sysfs_tree.h"
#include "ibcni/os/file_io.h"
#include "ibcni/os/netns.h"
#include "plugin/rdma/port_counters.h"
#include "support/test_netns.h"

namespace ibcni::rdma {
namespace {

using ::ibcni::testing::FakeSysfsTree;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::ElementsAre;

bool noChildren() {
  errno = 0;
  return ::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD;
}

/// The sysfs mounts of this process's mount namespace (only those: netns tests running beside
/// this one bind-mount namespace files).
std::string sysfsMounts() {
  auto text = os::readFile("/proc/self/mountinfo", 1U << 20);
  if (!text) {
    return "unreadable: " + text.error().describe();
  }
  std::string out;
  std::istringstream lines(*text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" - sysfs ") != std::string::npos) {
      out += line + "\n";
    }
  }
  return out;
}

class PortCountersNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ns = testing::TestNetns::create("counters");
    if (!ns) {
      if (testing::isPermissionError(ns.error())) {
        GTEST_SKIP() << ns.error().describe();
      }
      FAIL() << ns.error().describe();
    }
    ns_.emplace(std::move(*ns));
    ASSERT_TRUE(noChildren());
    mountsBefore_ = sysfsMounts();
  }
  void TearDown() override {
    EXPECT_TRUE(noChildren()) << "a counters child was not reaped";
    if (ns_) {
      EXPECT_EQ(sysfsMounts(), mountsBefore_) << "the reader mounted a sysfs in this process's mount namespace";
    }
  }

  std::optional<testing::TestNetns> ns_;
  std::string mountsBefore_;
};

TEST_F(PortCountersNetnsTest, DeviceOnlyTheNetnsShowsIsReadByTheChild) {
  FakeSysfsTree host;   // what this process sees: no mlx5_4 (it was moved, exclusive mode)
  FakeSysfsTree inPod;  // what a sysfs mounted in the pod's netns shows
  inPod.addRdmaDevice("0000:3b:00.2", "mlx5_4")
      .writeFile("class/infiniband/mlx5_4/ports/1/state", "4: ACTIVE\n")
      .writeFile("class/infiniband/mlx5_4/ports/1/counters/port_xmit_data", "1000\n")
      .writeFile("class/infiniband/mlx5_4/ports/1/hw_counters/out_of_buffer", "2\n");
  ASSERT_TRUE(inPod.ok() && host.ok()) << inPod.error() << host.error();
  CounterSource source;
  source.sysfsRoot = host.root();
  source.netnsSysfsRoot = inPod.root();
  source.mountFreshSysfs = false;  // read the fake tree in the child
  auto got = readPortCounters(ns_->path(), "mlx5_4", 1, source);
  ASSERT_TRUE(got.has_value()) << got.error().msg << " / " << got.error().details;
  EXPECT_EQ(got->state, 4U);
  EXPECT_THAT(got->counters, ElementsAre(Pair("port_xmit_data", 1000U)));
  EXPECT_THAT(got->hwCounters, ElementsAre(Pair("out_of_buffer", 2U)));
}

TEST_F(PortCountersNetnsTest, ChildMountsTheNetnsSysfsAndNamesAMissingDevice) {
  // A real sysfs mounted in the fresh netns has no RDMA device of that name (and, on this host,
  // none at all): the child's answer is kDeviceNotFound naming it, not a mount failure.
  auto got = readPortCounters(ns_->path(), "ibcni_nodev0", 1);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code, cni::Errc::kDeviceNotFound) << got.error().msg << " / " << got.error().details;
  EXPECT_THAT(got.error().msg, HasSubstr("\"ibcni_nodev0\" not found in /sys/class/infiniband"));
}

TEST_F(PortCountersNetnsTest, BatchAsksOneChildAndKeepsTheOrder) {
  FakeSysfsTree host;
  FakeSysfsTree inPod;
  host.addRdmaDevice("0000:3b:00.0", "mlx5_0").writeFile("class/infiniband/mlx5_0/ports/1/hw_counters/a", "1\n");
  inPod.addRdmaDevice("0000:3b:00.2", "mlx5_4").writeFile("class/infiniband/mlx5_4/ports/1/hw_counters/b", "2\n");
  ASSERT_TRUE(inPod.ok() && host.ok()) << inPod.error() << host.error();
  CounterSource source;
  source.sysfsRoot = host.root();
  source.netnsSysfsRoot = inPod.root();
  source.mountFreshSysfs = false;
  auto got = readPortCountersBatch(ns_->path(), {{"mlx5_4", 1}, {"mlx5_0", 1}, {"mlx5_9", 1}}, source);
  ASSERT_EQ(got.size(), 3U);
  ASSERT_TRUE(got[0].has_value()) << got[0].error().msg;
  EXPECT_THAT(got[0]->hwCounters, ElementsAre(Pair("b", 2U)));  // from the netns's sysfs
  ASSERT_TRUE(got[1].has_value()) << got[1].error().msg;
  EXPECT_THAT(got[1]->hwCounters, ElementsAre(Pair("a", 1U)));  // from the host's
  ASSERT_FALSE(got[2].has_value());
  EXPECT_THAT(got[2].error().msg, HasSubstr("mlx5_9"));
}

}  // namespace
}  // namespace ibcni::rdma
