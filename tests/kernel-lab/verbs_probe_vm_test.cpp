// SPDX-License-Identifier: Apache-2.0
// DlopenVerbsProbe against a real verbs device (soft-RoCE rxe0 on eth0), inside the kernel-lab VM:
//   ../shared/kernel-lab/run.sh --nics 2 -- <build>/tests/kernel-lab/verbs_probe_vm_test
// Each test makes rxe0 on eth0 (shared RDMA netns mode, the default: every namespace sees it), gives
// eth0 the address 10.77.0.1/24, probes from a fresh network namespace, compares with
// `ibv_devinfo -d rxe0 -v`, and deletes rxe0 and the address afterwards.
// Outside the VM every test skips: the host's RDMA state is not ours to change.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "support/test_netns.h"
#include "plugin/verbs/dlopen_verbs_probe.h"
#include "vm_test_util.h"

namespace ibcni::verbs {
namespace {

using ::ibcni::testing::lab::inKernelLab;
using ::ibcni::testing::lab::Cmd;
using ::ibcni::testing::lab::sh;


/// ::ffff:10.77.0.1, the RoCE v2 GID of eth0's IPv4 address.
constexpr std::array<std::uint8_t, 16> kV4MappedGid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 77, 0, 1};

/// "fe80:0000:0000:0000:5054:00ff:fe12:3456", as ibv_devinfo prints a GID.
std::string gidText(const std::array<std::uint8_t, 16>& raw) {
  std::string out;
  for (std::size_t i = 0; i < raw.size(); i += 2) {
    std::array<char, 8> part{};
    std::snprintf(part.data(), part.size(), "%s%02x%02x", i == 0 ? "" : ":", raw[i], raw[i + 1]);
    out += part.data();
  }
  return out;
}

/// "5054:00ff:fe12:3456", as ibv_devinfo prints a GUID (host-order value).
std::string guidText(std::uint64_t guid) {
  std::array<char, 24> buf{};
  std::snprintf(buf.data(), buf.size(), "%04x:%04x:%04x:%04x", static_cast<unsigned>(guid >> 48) & 0xFFFFU,
                static_cast<unsigned>(guid >> 32) & 0xFFFFU, static_cast<unsigned>(guid >> 16) & 0xFFFFU,
                static_cast<unsigned>(guid) & 0xFFFFU);
  return buf.data();
}

std::string describe(const ProbeResult& r) {
  std::string out = "available=" + std::to_string(r.available) + " devices=[";
  for (const auto& d : r.devices) {
    out += d + " ";
  }
  out += "] opened=" + std::to_string(r.opened) + " openError='" + r.openError + "'";
  if (r.port) {
    const PortFacts& p = *r.port;
    out += " port " + p.device + "/" + std::to_string(p.port) + " state=" + std::to_string(p.state) +
           " phys=" + std::to_string(p.physState) + " linkLayer=" + std::to_string(static_cast<int>(p.linkLayer)) +
           " lid=" + std::to_string(p.lid) + " smLid=" + std::to_string(p.smLid) + " nodeGuid=" + guidText(p.nodeGuid) +
           " portGuid=" + guidText(p.portGuid) + " pkeys=" + std::to_string(p.pkeys.size());
    for (const Gid& g : p.gids) {
      out += "\n    GID[" + std::to_string(g.index) + "] " + gidText(g.raw) + " '" + g.type + "'";
    }
  }
  if (r.qpProbeOk) {
    out += "\n  qpProbe=" + std::string(*r.qpProbeOk ? "ok" : "FAILED: " + r.qpProbeError);
  }
  return out;
}

/// A test with rxe0 on eth0 (up, 10.77.0.1/24), and a fresh netns to probe from.
class VerbsProbeVmTest : public ::testing::Test {
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
    ASSERT_TRUE(sh("ip link set eth0 up").ok);
    const Cmd add = sh("rdma link add rxe0 type rxe netdev eth0");
    ASSERT_TRUE(add.ok) << add.out;
    made_ = true;
    const Cmd addr = sh("ip addr add 10.77.0.1/24 dev eth0");
    ASSERT_TRUE(addr.ok) << addr.out;
    addr_ = true;
    auto ns = testing::TestNetns::create("verbs-pod");
    ASSERT_TRUE(ns.has_value()) << ns.error().describe();
    ns_.emplace(std::move(*ns));
  }
  void TearDown() override {
    ns_.reset();
    if (addr_) {
      EXPECT_TRUE(sh("ip addr del 10.77.0.1/24 dev eth0").ok);
    }
    if (made_) {
      const Cmd del = sh("rdma link delete rxe0");
      EXPECT_TRUE(del.ok) << del.out;
    }
    sh("ip link set eth0 up");
  }

  [[nodiscard]] ProbeRequest request(std::string device = "rxe0", bool qp = false) const {
    ProbeRequest req;
    req.netnsPath = ns_->path();
    req.device = std::move(device);
    req.qpProbe = qp;
    req.timeout = std::chrono::milliseconds(20'000);  // emulated VM: everything is slow
    return req;
  }

  /// Probes until `done` holds (at most 20 s); the last result.
  ProbeResult probeUntil(const ProbeRequest& req, const std::function<bool(const ProbeResult&)>& done) {
    ProbeResult last;
    for (int i = 0; i < 40; ++i) {
      auto res = probe_.probe(req);
      EXPECT_TRUE(res.has_value()) << res.error().describe();
      if (!res) {
        return last;
      }
      last = std::move(*res);
      if (done(last)) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return last;
  }

  static const Gid* v4Gid(const ProbeResult& r) {
    if (!r.port) {
      return nullptr;
    }
    auto it = std::find_if(r.port->gids.begin(), r.port->gids.end(),
                           [](const Gid& g) { return g.raw == kV4MappedGid && g.type == "RoCE v2"; });
    return it == r.port->gids.end() ? nullptr : &*it;
  }

  DlopenVerbsProbe probe_;
  std::optional<testing::TestNetns> ns_;
  bool made_ = false;
  bool addr_ = false;
};

TEST_F(VerbsProbeVmTest, ActivePortFactsFromAFreshNetnsMatchIbvDevinfo) {
  const ProbeResult r = probeUntil(request("rxe0", true), [](const ProbeResult& res) {
    return res.port && res.port->state == 4 && v4Gid(res) != nullptr;
  });
  std::cout << "[ lab      ] " << describe(r) << "\n";
  ASSERT_TRUE(r.available) << r.unavailableReason;
  EXPECT_NE(std::find(r.devices.begin(), r.devices.end(), "rxe0"), r.devices.end());
  ASSERT_TRUE(r.opened) << r.openError;
  ASSERT_TRUE(r.port.has_value()) << r.openError;
  const PortFacts& p = *r.port;
  EXPECT_EQ(p.device, "rxe0");
  EXPECT_EQ(p.port, 1u);
  EXPECT_EQ(p.state, 4);      // IBV_PORT_ACTIVE
  EXPECT_EQ(p.physState, 5);  // LinkUp
  EXPECT_EQ(p.linkLayer, LinkLayer::kEthernet);
  EXPECT_NE(p.nodeGuid, 0u);
  EXPECT_EQ(p.portGuid, 0u) << "port GUID is for InfiniBand link layer only";
  EXPECT_FALSE(p.pkeys.empty());
  if (!p.pkeys.empty()) {
    EXPECT_EQ(p.pkeys.front().wire(), 0xFFFF);
  }
  const Gid* v4 = v4Gid(r);
  ASSERT_NE(v4, nullptr) << "no RoCE v2 GID ::ffff:10.77.0.1";
  ASSERT_TRUE(r.qpProbeOk.has_value());
  EXPECT_TRUE(*r.qpProbeOk) << r.qpProbeError;

  const Cmd devinfo = sh("ibv_devinfo -d rxe0 -v");
  std::cout << "[ lab      ] ibv_devinfo -d rxe0 -v:\n" << devinfo.out;
  ASSERT_TRUE(devinfo.ok) << devinfo.out;
  EXPECT_NE(devinfo.out.find("node_guid:\t\t\t" + guidText(p.nodeGuid)), std::string::npos)
      << "node GUID " << guidText(p.nodeGuid);
  EXPECT_NE(devinfo.out.find("PORT_ACTIVE (4)"), std::string::npos);
  EXPECT_NE(devinfo.out.find("LINK_UP (5)"), std::string::npos);
  EXPECT_NE(devinfo.out.find("link_layer:\t\tEthernet"), std::string::npos);
  for (const Gid& g : p.gids) {
    // ibv_devinfo writes GIDs with inet_ntop and a v1 type as "RoCE v1".
    std::array<char, INET6_ADDRSTRLEN> text{};
    ASSERT_NE(::inet_ntop(AF_INET6, g.raw.data(), text.data(), text.size()), nullptr);
    const std::string type = g.type == "IB/RoCE v1" ? "RoCE v1" : g.type;
    EXPECT_NE(devinfo.out.find(std::string(text.data()) + ", " + type), std::string::npos)
        << "GID[" << g.index << "] " << gidText(g.raw) << " " << g.type << " not in ibv_devinfo";
  }
}

TEST_F(VerbsProbeVmTest, EmptyDeviceNamePicksTheOnlyDevice) {
  auto r = probe_.probe(request(""));
  ASSERT_TRUE(r.has_value()) << r.error().describe();
  std::cout << "[ lab      ] " << describe(*r) << "\n";
  if (r->devices.size() != 1) {
    GTEST_SKIP() << "more than one verbs device in the VM";
  }
  EXPECT_TRUE(r->opened) << r->openError;
  ASSERT_TRUE(r->port.has_value());
  EXPECT_EQ(r->port->device, "rxe0");
}

TEST_F(VerbsProbeVmTest, PortGoesDownWithItsNetdev) {
  const ProbeRequest req = request();
  const ProbeResult up = probeUntil(req, [](const ProbeResult& res) { return res.port && res.port->state == 4; });
  ASSERT_TRUE(up.port.has_value()) << describe(up);
  ASSERT_EQ(up.port->state, 4);
  ASSERT_TRUE(sh("ip link set eth0 down").ok);
  const ProbeResult down = probeUntil(req, [](const ProbeResult& res) { return res.port && res.port->state == 1; });
  std::cout << "[ lab      ] eth0 down: " << describe(down) << "\n";
  ASSERT_TRUE(down.port.has_value()) << describe(down);
  EXPECT_EQ(down.port->state, 1);  // IBV_PORT_DOWN
  const Cmd devinfo = sh("ibv_devinfo -d rxe0");
  EXPECT_NE(devinfo.out.find("PORT_DOWN (1)"), std::string::npos) << devinfo.out;
  EXPECT_TRUE(sh("ip link set eth0 up").ok);
}

TEST_F(VerbsProbeVmTest, DeviceThatDoesNotExistIsNotOpened) {
  auto r = probe_.probe(request("rxe_nope", true));
  ASSERT_TRUE(r.has_value()) << r.error().describe();
  EXPECT_TRUE(r->available);
  EXPECT_NE(std::find(r->devices.begin(), r->devices.end(), "rxe0"), r->devices.end());
  EXPECT_FALSE(r->opened);
  EXPECT_TRUE(r->openError.empty()) << r->openError;
  EXPECT_FALSE(r->port.has_value());
  EXPECT_FALSE(r->qpProbeOk.has_value());
}

}  // namespace
}  // namespace ibcni::verbs
