// SPDX-License-Identifier: Apache-2.0
// readPortCounters against rxe devices of a real kernel, inside the kernel-lab VM:
//   ../shared/kernel-lab/run.sh --nics 2 -- <build>/tests/kernel-lab/rdma_counters_vm_test
// rxe0 on eth0 and rxe1 on eth1 (one emulated segment) exchange RC traffic over their IPv6
// link-local GIDs (index 0): with IPv4 addresses on one subnet both are local addresses of the
// VM, the kernel routes them through lo, and the QP cannot reach RTR. What rxe shows (kernel 6.1):
// ports/1/state and ports/1/hw_counters (sent_pkts, rcvd_pkts, ...) only, no ports/1/counters
// (no PMA, so no port_xmit_data): the traffic check uses port_xmit_data when there is one, else
// sent_pkts times the active MTU. Outside the VM every test skips.
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>

#include "plugin/rdma/port_counters.h"
#include "vm_test_util.h"

namespace ibcni::rdma {
namespace {

using ::ibcni::testing::lab::Cmd;
using ::ibcni::testing::lab::inKernelLab;
using ::ibcni::testing::lab::sh;
using ::testing::HasSubstr;

constexpr const char* kPod = "ibcni-counters-pod";
constexpr std::uint64_t kIters = 50;
constexpr std::uint64_t kSize = 4096;

bool isUp(const std::string& dev) {
  return sh("ip -o link show dev " + dev + " | grep -q '[<,]UP[,>]'").ok;
}

/// Waits (up to 15 s) until `dev` has a link-local IPv6 address that passed DAD.
bool linkLocalReady(const std::string& dev, const std::string& netnsPrefix = "") {
  for (int i = 0; i < 75; ++i) {
    if (sh(netnsPrefix + "ip -6 addr show dev " + dev + " scope link -tentative | grep -q inet6").ok) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

std::string describe(const PortCounters& p) {
  std::string out = p.device + "/" + std::to_string(p.port) + " state=" +
                    (p.state ? std::to_string(*p.state) : std::string("?")) + " counters={";
  for (const auto& [name, value] : p.counters) {
    out += " " + name + "=" + std::to_string(value);
  }
  out += " } hw_counters={";
  for (const auto& [name, value] : p.hwCounters) {
    out += " " + name + "=" + std::to_string(value);
  }
  return out + " }";
}

/// rxe0 on eth0 and rxe1 on eth1, both up; everything put back as found afterwards.
class RdmaCountersVmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!inKernelLab()) {
      GTEST_SKIP() << "not in the kernel-lab VM (KERNEL_LAB=1 unset): run it with "
                      "../shared/kernel-lab/run.sh --nics 2 -- <this binary>";
    }
    const Cmd mode = sh("rdma system show");
    if (mode.out.find("netns shared") == std::string::npos) {
      GTEST_SKIP() << "RDMA netns mode is not shared: " << mode.out;
    }
    eth0Up_ = isUp("eth0");
    eth1Up_ = isUp("eth1");
    ASSERT_TRUE(sh("ip link set eth0 up && ip link set eth1 up").ok);
    for (const char* link : {"rxe0 type rxe netdev eth0", "rxe1 type rxe netdev eth1"}) {
      const Cmd add = sh(std::string("rdma link add ") + link);
      ASSERT_TRUE(add.ok) << add.out;
    }
  }
  void TearDown() override {
    if (!inKernelLab()) {
      return;
    }
    sh("rdma link delete rxe0; rdma link delete rxe1");
    sh(std::string("if [ -e /run/netns/") + kPod + " ]; then ip -n " + kPod + " link set eth1 netns 1; ip netns del " +
       kPod + "; fi");
    sh(std::string("ip link set eth0 ") + (eth0Up_ ? "up" : "down"));
    sh(std::string("ip link set eth1 ") + (eth1Up_ ? "up" : "down"));
  }

  /// The device's counters, read in this process's netns; fails the test when it cannot.
  static PortCounters read(const std::string& device) {
    auto got = readPortCounters("", device, 1);
    EXPECT_TRUE(got.has_value()) << (got ? "" : got.error().msg + " / " + got.error().details);
    return got ? *got : PortCounters{};
  }

  bool eth0Up_ = false;
  bool eth1Up_ = false;
};

TEST_F(RdmaCountersVmTest, RcTrafficMovesTheTransmitAndReceiveCounters) {
  ASSERT_TRUE(linkLocalReady("eth0") && linkLocalReady("eth1")) << sh("ip -6 addr").out;
  const PortCounters tx0 = read("rxe0");
  const PortCounters rx0 = read("rxe1");
  std::cout << "before: " << describe(tx0) << "\n        " << describe(rx0) << "\n";
  EXPECT_EQ(tx0.state, 4U);
  ASSERT_TRUE(tx0.hwCounters.contains("sent_pkts") || tx0.counters.contains("port_xmit_data")) << describe(tx0);
  EXPECT_FALSE(tx0.hwCounters.contains("lifespan"));

  const auto t0 = std::chrono::steady_clock::now();
  const std::string args = " -g 0 -s " + std::to_string(kSize) + " -n " + std::to_string(kIters);
  // The server is bounded too: a client that never connects must not leave `wait` hanging.
  const Cmd pingpong = sh("timeout 120 ibv_rc_pingpong -d rxe1" + args + " >/tmp/ibcni-counters-server.log 2>&1 & "
                          "for i in 1 2 3 4 5 6; do sleep 1; timeout 60 ibv_rc_pingpong -d rxe0" + args +
                          " localhost && ok=1 && break; done; wait; cat /tmp/ibcni-counters-server.log; "
                          "rm -f /tmp/ibcni-counters-server.log; test -n \"$ok\"");
  ASSERT_TRUE(pingpong.ok) << pingpong.out;
  std::cout << "ibv_rc_pingpong (" << kIters << " x " << kSize << " bytes each way) took "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()
            << " ms\n";
  const PortCounters tx1 = read("rxe0");
  const PortCounters rx1 = read("rxe1");
  std::cout << "after:  " << describe(tx1) << "\n        " << describe(rx1) << "\n";

  const std::uint64_t bytesSent = kIters * kSize;
  if (tx1.counters.contains("port_xmit_data")) {  // a PMA: 4-byte words
    EXPECT_GE(bytesOfDataCounter(tx1.counters.at("port_xmit_data") - tx0.counters.at("port_xmit_data")), bytesSent);
    EXPECT_GE(bytesOfDataCounter(rx1.counters.at("port_rcv_data") - rx0.counters.at("port_rcv_data")), bytesSent);
    return;
  }
  // rxe: packets only; a packet carries at most the active MTU of payload.
  const Cmd devinfo = sh("ibv_devinfo -d rxe0 | sed -n 's/.*active_mtu:[[:space:]]*\\([0-9]*\\).*/\\1/p'");
  const std::uint64_t mtu = std::stoull(devinfo.ok && !devinfo.out.empty() ? devinfo.out : "4096");
  const std::uint64_t minPackets = (bytesSent + mtu - 1) / mtu;
  EXPECT_GE(tx1.hwCounters.at("sent_pkts") - tx0.hwCounters.at("sent_pkts"), minPackets) << "active MTU " << mtu;
  EXPECT_GE(rx1.hwCounters.at("rcvd_pkts") - rx0.hwCounters.at("rcvd_pkts"), minPackets) << "active MTU " << mtu;
}

TEST_F(RdmaCountersVmTest, ReadThroughThePodNetnsItsNetdevWasMovedTo) {
  // Moving eth1 unregisters rxe1; made again from inside, it still belongs to the initial netns
  // and, in shared mode, shows in the host's sysfs with its hw_counters.
  const std::string pod = std::string("/run/netns/") + kPod;
  ASSERT_TRUE(sh(std::string("ip netns add ") + kPod + " && ip link set eth1 netns " + kPod).ok);
  const Cmd add = sh(std::string("ip netns exec ") + kPod + " sh -c 'ip link set eth1 up && "
                     "rdma link add rxe1 type rxe netdev eth1'");
  ASSERT_TRUE(add.ok) << add.out;
  auto viaPod = readPortCounters(pod, "rxe1", 1);
  ASSERT_TRUE(viaPod.has_value()) << viaPod.error().msg << " / " << viaPod.error().details;
  std::cout << "through " << pod << ": " << describe(*viaPod) << "\n";
  EXPECT_TRUE(viaPod->hwCounters.contains("sent_pkts")) << describe(*viaPod);

  // The same device through the netns child, as for a device only the pod's netns shows
  // (exclusive mode): a host view without it sends the read to a sysfs mounted in the pod's netns.
  const std::string emptyHost = ::testing::TempDir() + "/ibcni-counters-empty-sysfs";
  std::filesystem::create_directories(emptyHost);
  CounterSource source;
  source.sysfsRoot = emptyHost;
  auto viaChild = readPortCounters(pod, "rxe1", 1, source);
  std::filesystem::remove_all(emptyHost);
  ASSERT_TRUE(viaChild.has_value()) << viaChild.error().msg << " / " << viaChild.error().details;
  std::cout << "through a sysfs mounted in " << pod << ": " << describe(*viaChild) << "\n";
  EXPECT_TRUE(viaChild->state.has_value());

  // The pod is gone: an error naming its netns, for every port.
  ASSERT_TRUE(sh(std::string("ip -n ") + kPod + " link set eth1 netns 1 && ip netns del " + kPod).ok);
  auto gone = readPortCounters(pod, "rxe1", 1);
  ASSERT_FALSE(gone.has_value());
  EXPECT_EQ(gone.error().code, cni::Errc::kNetnsFailure);
  EXPECT_THAT(gone.error().msg, HasSubstr(pod));
}

}  // namespace
}  // namespace ibcni::rdma
