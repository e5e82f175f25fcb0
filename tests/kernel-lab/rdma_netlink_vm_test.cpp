// SPDX-License-Identifier: Apache-2.0
// MnlRdmaNetlink against a real kernel's RDMA netlink, inside the kernel-lab VM:
//   ../shared/kernel-lab/run.sh --nics 2 -- <build>/tests/kernel-lab/rdma_netlink_vm_test
// The VM's kernel has ib_core and rdma_rxe; each test that needs a device makes rxe0 on eth0 with
// `rdma link add` and deletes it afterwards. The RDMA netns mode can only change while no netns
// but the initial one exists, so a global environment switches the node to exclusive mode before
// any test makes a namespace, and puts the starting mode back at the end. Namespaces are made with
// unshare(CLONE_NEWNET) (os::Netns::createAnonymous) and freed when their handle closes.
// Outside the VM every test skips: the host's RDMA state is not ours to change.
#include <gtest/gtest.h>
#include <net/if.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "plugin/rdma/mnl_rdma_netlink.h"
#include "vm_test_util.h"

namespace ibcni::rdma {
namespace {

using ::ibcni::testing::lab::inKernelLab;
using ::ibcni::testing::lab::Cmd;
using ::ibcni::testing::lab::sh;


/// The mode as `rdma system show` prints it ("netns shared copy-on-fork on").
std::optional<NetnsMode> modeFromRdmaTool() {
  const Cmd c = sh("rdma system show");
  if (c.out.find("netns exclusive") != std::string::npos) {
    return NetnsMode::kExclusive;
  }
  if (c.out.find("netns shared") != std::string::npos) {
    return NetnsMode::kShared;
  }
  return std::nullopt;
}

/// `rdma system set netns MODE`. The kernel answers EBUSY while another netns exists, and a netns
/// whose last handle was closed is freed asynchronously (cleanup_net), so this retries for 20 s.
bool setMode(NetnsMode mode) {
  const std::string cmd =
      std::string("rdma system set netns ") + (mode == NetnsMode::kShared ? "shared" : "exclusive");
  for (int i = 0; i < 100; ++i) {
    if (sh(cmd).ok) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::cerr << cmd << " kept failing: " << sh(cmd).out;
  return false;
}

/// Puts the node in exclusive mode before any test runs (no namespace exists yet) and back in the
/// mode it started in at the end.
class ExclusiveModeEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (!inKernelLab()) {
      return;
    }
    initial_ = modeFromRdmaTool();
    std::cout << "[ lab      ] RDMA netns mode at start: "
              << (!initial_ ? "unknown" : *initial_ == NetnsMode::kShared ? "shared" : "exclusive") << "\n";
    exclusive_ = setMode(NetnsMode::kExclusive);
  }
  void TearDown() override {
    if (initial_ && inKernelLab()) {
      (void)setMode(*initial_);
    }
  }
  static bool exclusive() { return exclusive_; }

 private:
  std::optional<NetnsMode> initial_;
  static inline bool exclusive_ = false;
};

[[maybe_unused]] const ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new ExclusiveModeEnvironment);

class RdmaNetlinkVm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!inKernelLab()) {
      GTEST_SKIP() << "not in the kernel-lab VM (KERNEL_LAB=1 is unset): run "
                      "../shared/kernel-lab/run.sh --nics 2 -- <this test>";
    }
    auto host = os::Netns::current();
    ASSERT_TRUE(host) << host.error().describe();
    host_ = std::move(*host);
  }

  MnlRdmaNetlink nl_;
  os::Netns host_;
};

/// A test with rxe0 on eth0, made for it and deleted after it.
class RdmaNetlinkRxeVm : public RdmaNetlinkVm {
 protected:
  void SetUp() override {
    RdmaNetlinkVm::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    eth0Index_ = static_cast<int>(::if_nametoindex("eth0"));
    ASSERT_NE(eth0Index_, 0) << "no eth0: run the VM with --nics 2";
    ASSERT_TRUE(sh("ip link set eth0 up").ok);
    const Cmd add = sh("rdma link add rxe0 type rxe netdev eth0");
    ASSERT_TRUE(add.ok) << add.out;
    created_ = true;
    // "0: rxe0: node_type ca fw 0.0.0 ..." : the device index comes first.
    const Cmd show = sh("rdma dev show rxe0");
    ASSERT_TRUE(show.ok) << show.out;
    rxeIndex_ = static_cast<std::uint32_t>(std::stoul(show.out));
  }
  void TearDown() override {
    if (created_) {
      const Cmd del = sh("rdma link delete rxe0");
      EXPECT_TRUE(del.ok) << del.out;
    }
  }

  /// The ports of rxe0 in `ports`.
  static std::vector<Port> rxe0In(const std::vector<Port>& ports) {
    std::vector<Port> out;
    std::copy_if(ports.begin(), ports.end(), std::back_inserter(out),
                 [](const Port& p) { return p.deviceName == "rxe0"; });
    return out;
  }

  bool created_ = false;
  int eth0Index_ = 0;
  std::uint32_t rxeIndex_ = 0;
};

TEST_F(RdmaNetlinkVm, NetnsModeAgreesWithRdmaSystemShow) {
  auto mode = nl_.netnsMode(host_);
  ASSERT_TRUE(mode) << mode.error().describe();
  const auto tool = modeFromRdmaTool();
  ASSERT_TRUE(tool) << sh("rdma system show").out;
  EXPECT_EQ(*mode, *tool);
  EXPECT_EQ(*mode, ExclusiveModeEnvironment::exclusive() ? NetnsMode::kExclusive : NetnsMode::kShared);
  std::cout << "[ lab      ] netnsMode(): " << (*mode == NetnsMode::kShared ? "shared" : "exclusive")
            << "; rdma system show: " << sh("rdma system show").out;
}

TEST_F(RdmaNetlinkRxeVm, HostSeesRxe0Port1OnEth0) {
  auto ports = nl_.ports(host_);
  ASSERT_TRUE(ports) << ports.error().describe();
  const auto rxe = rxe0In(*ports);
  ASSERT_EQ(rxe.size(), 1u) << sh("rdma link show").out;
  EXPECT_EQ(rxe[0], (Port{.deviceIndex = rxeIndex_, .deviceName = "rxe0", .port = 1,
                          .netdevIndex = eth0Index_, .netdevName = "eth0"}));
}

TEST_F(RdmaNetlinkRxeVm, MovingRxeInExclusiveModeIsEopnotsupp) {
  ASSERT_TRUE(ExclusiveModeEnvironment::exclusive()) << "the node could not be put in exclusive mode";
  auto pod = os::Netns::createAnonymous();
  ASSERT_TRUE(pod) << pod.error().describe();
  auto moved = nl_.moveDevice(host_, rxeIndex_, *pod);
  ASSERT_FALSE(moved) << "rxe0 moved: rxe is not expected to support it";
  EXPECT_EQ(moved.error().err, EOPNOTSUPP) << moved.error().describe();
  const std::string text = moved.error().describe();
  std::cout << "[ lab      ] moveDevice(rxe0): " << text << "\n";
  EXPECT_NE(text.find("RDMA device index " + std::to_string(rxeIndex_)), std::string::npos) << text;
  EXPECT_NE(text.find("exclusive netns mode"), std::string::npos) << text;
  EXPECT_NE(text.find("EOPNOTSUPP"), std::string::npos) << text;
  // Still where it was.
  auto ports = nl_.ports(host_);
  ASSERT_TRUE(ports) << ports.error().describe();
  EXPECT_EQ(rxe0In(*ports).size(), 1u);
}

TEST_F(RdmaNetlinkRxeVm, FreshNetnsInExclusiveModeDoesNotSeeRxe0) {
  ASSERT_TRUE(ExclusiveModeEnvironment::exclusive()) << "the node could not be put in exclusive mode";
  auto pod = os::Netns::createAnonymous();
  ASSERT_TRUE(pod) << pod.error().describe();
  auto ports = nl_.ports(*pod);
  ASSERT_TRUE(ports) << ports.error().describe();
  EXPECT_TRUE(rxe0In(*ports).empty());
  std::cout << "[ lab      ] exclusive mode, fresh netns: " << ports->size() << " port(s)\n";
  // The mode itself is node-wide: a socket in the fresh netns reads the same.
  auto mode = nl_.netnsMode(*pod);
  ASSERT_TRUE(mode) << mode.error().describe();
  EXPECT_EQ(*mode, NetnsMode::kExclusive);
}

TEST_F(RdmaNetlinkRxeVm, MovingFromANetnsThatDoesNotSeeRxe0IsEnodev) {
  ASSERT_TRUE(ExclusiveModeEnvironment::exclusive()) << "the node could not be put in exclusive mode";
  auto pod = os::Netns::createAnonymous();
  ASSERT_TRUE(pod) << pod.error().describe();
  auto moved = nl_.moveDevice(*pod, rxeIndex_, host_);
  ASSERT_FALSE(moved);
  std::cout << "[ lab      ] moveDevice(rxe0 from a fresh netns): " << moved.error().describe() << "\n";
  EXPECT_EQ(moved.error().err, ENODEV) << moved.error().describe();
}

TEST_F(RdmaNetlinkRxeVm, FreshNetnsInSharedModeSeesRxe0WithoutItsNetdev) {
  // The namespaces of the tests above must be gone before the mode can change (setMode retries).
  ASSERT_TRUE(setMode(NetnsMode::kShared));
  auto mode = nl_.netnsMode(host_);
  ASSERT_TRUE(mode) << mode.error().describe();
  ASSERT_EQ(*mode, NetnsMode::kShared);
  {
    auto pod = os::Netns::createAnonymous();
    ASSERT_TRUE(pod) << pod.error().describe();
    auto ports = nl_.ports(*pod);
    ASSERT_TRUE(ports) << ports.error().describe();
    const auto rxe = rxe0In(*ports);
    ASSERT_EQ(rxe.size(), 1u);
    // eth0 is in the initial netns, so the kernel leaves NDEV_INDEX/NDEV_NAME out.
    EXPECT_EQ(rxe[0], (Port{.deviceIndex = rxeIndex_, .deviceName = "rxe0", .port = 1,
                            .netdevIndex = 0, .netdevName = ""}));
    std::cout << "[ lab      ] shared mode, fresh netns: rxe0 port " << rxe[0].port << " netdev index "
              << rxe[0].netdevIndex << " name '" << rxe[0].netdevName << "'\n";
    // Moving is refused in shared mode too.
    auto moved = nl_.moveDevice(host_, rxeIndex_, *pod);
    ASSERT_FALSE(moved);
    EXPECT_EQ(moved.error().err, EOPNOTSUPP) << moved.error().describe();
  }
  if (ExclusiveModeEnvironment::exclusive()) {
    EXPECT_TRUE(setMode(NetnsMode::kExclusive));  // as the environment left it for later tests
  }
}

TEST_F(RdmaNetlinkVm, MovingAnUnknownDeviceFails) {
  auto pod = os::Netns::createAnonymous();
  ASSERT_TRUE(pod) << pod.error().describe();
  auto moved = nl_.moveDevice(host_, 0x7ffffff0, *pod);
  ASSERT_FALSE(moved);
  std::cout << "[ lab      ] moveDevice(unknown index): " << moved.error().describe() << "\n";
  EXPECT_EQ(moved.error().err, ENODEV) << moved.error().describe();
}

}  // namespace
}  // namespace ibcni::rdma
