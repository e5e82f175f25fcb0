// SPDX-License-Identifier: Apache-2.0
// `ibcni doctor`: what collect() finds on a healthy InfiniBand node and on nodes with the usual
// faults (no subnet manager, VFs without GUIDs, no RDMA device, no libibverbs), and how the text
// and JSON reports show it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "plugin/doctor/doctor.h"
#include "fakes/fake_netlink.h"
#include "fakes/fake_rdma_netlink.h"
#include "fakes/fake_sysfs_tree.h"
#include "fakes/fake_verbs_probe.h"
#include "fakes/ibv_devinfo_text.h"
#include "plugin/doctor/doctor_json.h"
#include "plugin/sysfs/sysfs_devices.h"

namespace ibcni::testing {
namespace {

using doctor::DoctorReport;
using nlohmann::json;

constexpr const char* kPfPci = "0000:3b:00.0";

std::string all(const DoctorReport& r) {
  std::string s;
  for (const auto& p : r.problems) {
    s += (p.informational ? "[info] " : "") + p.what + " | " + p.fix + "\n";
  }
  return s;
}

// The problems (informational notes left out) whose text contains `needle`.
std::vector<doctor::Problem> problemsWith(const DoctorReport& r, const std::string& needle) {
  std::vector<doctor::Problem> out;
  for (const auto& p : r.problems) {
    if (!p.informational && (p.what + " " + p.fix).find(needle) != std::string::npos) {
      out.push_back(p);
    }
  }
  return out;
}

/// A node with ConnectX port mlx5_0 (netdev ib0 on PF 0000:3b:00.0 with two VFs that have GUIDs),
/// an IPoIB child ib0.8123, exclusive RDMA netns mode, libibverbs and /dev/infiniband/uverbs0.
class DoctorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rdma.setMode(rdma::NetnsMode::kExclusive);
    nl::Link ib0;
    ib0.name = "ib0";
    ib0.kind = "ipoib";
    ib0.arpType = FakeNetlink::kArphrdInfiniband;
    ib0.mtu = 2044;
    ib0.adminUp = true;
    ib0.ipoib = nl::IpoibInfo{net::Pkey::fromWire(0xffff), nl::IpoibMode::kDatagram, false};
    ibIndex = netlink.addLink(host, ib0);
    ASSERT_TRUE(netlink.addIpoibChild(host, nl::IpoibChildSpec{ibIndex, "ib0.8123", net::Pkey::fromWire(0x0123),
                                                               nl::IpoibMode::kConnected, false}));
    rdma.addDevice(host, "mlx5_0", ibIndex, "ib0");
    tree.addPf(kPfPci, "ib0", "mlx5_0", 2, ibIndex)
        .addVf(kPfPci, 0, "0000:3b:00.1", "", "")
        .addVf(kPfPci, 1, "0000:3b:00.2", "", "");
    ASSERT_TRUE(tree.ok()) << tree.error();
    netlink.setVfs(host, ibIndex,
                   {vf(nl::VfLinkState::kAuto, 0x0011223344550001ULL), vf(nl::VfLinkState::kEnable, 0x0011223344550002ULL)});
    verbs.result = FakeVerbsProbe::healthyIb("mlx5_0");
    uverbs = {"uverbs0"};
  }

  static nl::VfInfo vf(nl::VfLinkState state, std::uint64_t guid) {
    nl::VfInfo v;
    v.linkState = state;
    v.nodeGuid = net::Guid{guid};
    v.portGuid = net::Guid{guid};
    return v;
  }

  DoctorReport run() {
    doctor::DoctorInputs in{netlink, devices, rdma, useVerbs ? &verbs : nullptr, host, "/proc/self/ns/net", {}, {}, {}};
    in.listNetdevs = [this] {
      std::vector<std::string> names;
      for (const auto& l : netlink.links(host)) {
        names.push_back(l.name);
      }
      return names;
    };
    in.listUverbs = [this] { return uverbs; };
    return doctor::collect(in);
  }

  os::Netns host = os::Netns::fakeForTest("/proc/self/ns/net", 4026531840);
  FakeNetlink netlink;
  FakeRdmaNetlink rdma;
  FakeSysfsTree tree;
  sysfs::SysfsDevices devices{tree.root()};
  FakeVerbsProbe verbs;
  bool useVerbs = true;
  std::vector<std::string> uverbs;
  int ibIndex = 0;
};

TEST_F(DoctorTest, AHealthyInfinibandNodeHasNoProblem) {
  DoctorReport r = run();
  EXPECT_TRUE(r.problems.empty()) << all(r);
  EXPECT_EQ(doctor::exitStatus(r), 0);
  EXPECT_EQ(r.rdmaNetnsMode, "exclusive");
  EXPECT_TRUE(r.verbsAvailable);
  EXPECT_EQ(r.uverbsDevices, std::vector<std::string>{"uverbs0"});

  ASSERT_EQ(r.devices.size(), 1u);
  const auto& d = r.devices[0];
  EXPECT_EQ(d.name, "mlx5_0");
  EXPECT_EQ(d.nodeGuid, "c2:11:22:33:44:55:66:00");
  ASSERT_EQ(d.ports.size(), 1u);
  const auto& p = d.ports[0];
  EXPECT_TRUE(p.queried);
  EXPECT_EQ(p.state, "ACTIVE");
  EXPECT_EQ(p.physState, "LinkUp");
  EXPECT_EQ(p.linkLayer, "InfiniBand");
  EXPECT_EQ(p.lid, 0x2a);
  EXPECT_EQ(p.smLid, 1);
  EXPECT_EQ(p.portGuid, "c2:11:22:33:44:55:66:77");
  EXPECT_EQ(p.pkeys, (std::vector<net::Pkey>{net::Pkey::fromWire(0xffff), net::Pkey::fromWire(0x8123)}));
  EXPECT_EQ(p.netdev, "ib0");
  EXPECT_EQ(p.netdevIndex, ibIndex);
  // The port was probed in the host netns.
  ASSERT_FALSE(verbs.requests.empty());
  EXPECT_EQ(verbs.requests.back().netnsPath, "/proc/self/ns/net");
  EXPECT_EQ(verbs.requests.back().device, "mlx5_0");
  EXPECT_EQ(verbs.requests.back().port, 1u);

  ASSERT_EQ(r.ipoibLinks.size(), 2u);
  EXPECT_EQ(r.ipoibLinks[0].name, "ib0");
  EXPECT_EQ(r.ipoibLinks[0].parentIndex, 0);
  EXPECT_EQ(r.ipoibLinks[1].name, "ib0.8123");
  EXPECT_EQ(r.ipoibLinks[1].parent, "ib0");
  EXPECT_EQ(r.ipoibLinks[1].pkey.wire(), 0x8123);
  EXPECT_EQ(r.ipoibLinks[1].mode, "connected");

  ASSERT_EQ(r.sriovPfs.size(), 1u);
  const auto& pf = r.sriovPfs[0];
  EXPECT_EQ(pf.pci, kPfPci);
  EXPECT_EQ(pf.netdev, "ib0");
  EXPECT_EQ(pf.driver, "mlx5_core");
  EXPECT_EQ(pf.rdmaDevices, std::vector<std::string>{"mlx5_0"});
  ASSERT_EQ(pf.vfs.size(), 2u);
  EXPECT_EQ(pf.vfs[1].vf, 1u);
  EXPECT_EQ(pf.vfs[1].linkState, "enable");
  EXPECT_EQ(pf.vfs[1].nodeGuid, "00:11:22:33:44:55:00:02");

  const std::string text = doctor::renderText(r);
  EXPECT_NE(text.find("RDMA netns mode: exclusive"), std::string::npos) << text;
  EXPECT_NE(text.find("mlx5_0 (index 0) node GUID c2:11:22:33:44:55:66:00"), std::string::npos) << text;
  EXPECT_NE(text.find("port 1: ACTIVE (LinkUp) InfiniBand LID 42 SM LID 1"), std::string::npos) << text;
  EXPECT_NE(text.find("ib0.8123 (index 3) child of ib0 pkey 0x8123 mode connected"), std::string::npos) << text;
  EXPECT_NE(text.find("vf 1 0000:3b:00.2 driver mlx5_core state enable"), std::string::npos) << text;
  EXPECT_NE(text.find("Problems: none"), std::string::npos) << text;

  json j = json::parse(doctor::printDoctorReport(r));
  EXPECT_EQ(j["rdmaNetnsMode"], "exclusive");
  EXPECT_EQ(j["libibverbs"]["available"], true);
  EXPECT_TRUE(j["libibverbs"]["reason"].is_null());
  EXPECT_EQ(j["devices"][0]["ports"][0]["state"], "ACTIVE");
  EXPECT_EQ(j["devices"][0]["ports"][0]["pkeys"], json({"0xffff", "0x8123"}));
  EXPECT_EQ(j["ipoibLinks"][1]["role"], "child");
  EXPECT_EQ(j["sriovPfs"][0]["vfs"].size(), 2u);
  EXPECT_EQ(j["problems"], json::array());
}

TEST_F(DoctorTest, AVfBoundToVfioPciIsListedAsAVmsVf) {
  tree.setDriver("0000:3b:00.2", "vfio-pci");
  ASSERT_TRUE(tree.ok()) << tree.error();
  DoctorReport r = run();
  ASSERT_EQ(r.sriovPfs.size(), 1u);
  ASSERT_EQ(r.sriovPfs[0].vfs.size(), 2u);
  EXPECT_EQ(r.sriovPfs[0].vfs[1].driver, "vfio-pci");
  const std::string text = doctor::renderText(r);
  EXPECT_NE(text.find("vf 1 0000:3b:00.2 driver vfio-pci (for a VM"), std::string::npos) << text;
  json j = json::parse(doctor::printDoctorReport(r));
  EXPECT_EQ(j["sriovPfs"][0]["vfs"][1]["driver"], "vfio-pci");
}

TEST_F(DoctorTest, SharedModeIsOnlyANote) {
  rdma.setMode(rdma::NetnsMode::kShared);
  DoctorReport r = run();
  ASSERT_EQ(r.problems.size(), 1u) << all(r);
  EXPECT_TRUE(r.problems[0].informational);
  EXPECT_NE(r.problems[0].fix.find("rdma system set netns exclusive"), std::string::npos);
  EXPECT_EQ(doctor::exitStatus(r), 0);
  EXPECT_NE(doctor::renderText(r).find("note: RDMA netns mode is shared"), std::string::npos);
  EXPECT_EQ(json::parse(doctor::printDoctorReport(r))["problems"][0]["informational"], true);
}

TEST_F(DoctorTest, PortInInitNamesTheSubnetManager) {
  verbs.result.port->state = 2;
  verbs.result.port->lid = 0;
  verbs.result.port->smLid = 0;
  DoctorReport r = run();
  EXPECT_EQ(doctor::exitStatus(r), 1);
  ASSERT_EQ(r.problems.size(), 1u) << all(r);  // INIT says it all; no separate SM LID 0 entry
  EXPECT_NE(r.problems[0].what.find("mlx5_0 port 1 is INIT, not ACTIVE"), std::string::npos) << all(r);
  EXPECT_NE(r.problems[0].what.find("subnet manager"), std::string::npos);
  EXPECT_NE(r.problems[0].fix.find("opensm"), std::string::npos);
  EXPECT_EQ(r.devices[0].ports[0].state, "INIT");
  EXPECT_NE(doctor::renderText(r).find("is INIT, not ACTIVE"), std::string::npos);
}

TEST_F(DoctorTest, ActiveInfinibandPortWithoutSmLid) {
  verbs.result.port->smLid = 0;
  DoctorReport r = run();
  auto p = problemsWith(r, "SM LID 0");
  ASSERT_EQ(p.size(), 1u) << all(r);
  EXPECT_NE(p[0].fix.find("subnet manager"), std::string::npos);
}

TEST_F(DoctorTest, PortDownWithPollingPointsAtTheCable) {
  verbs.result.port->state = 1;
  verbs.result.port->physState = 2;
  DoctorReport r = run();
  auto p = problemsWith(r, "is DOWN (physical state Polling)");
  ASSERT_EQ(p.size(), 1u) << all(r);
  EXPECT_NE(p[0].fix.find("cable"), std::string::npos);
}

TEST_F(DoctorTest, VfWithZeroGuidSaysHowToAssignOne) {
  nl::VfInfo zero = vf(nl::VfLinkState::kAuto, 0);
  netlink.setVfs(host, ibIndex, {vf(nl::VfLinkState::kAuto, 0x0011223344550001ULL), zero});
  DoctorReport r = run();
  EXPECT_EQ(doctor::exitStatus(r), 1);
  ASSERT_EQ(r.problems.size(), 1u) << all(r);
  EXPECT_NE(r.problems[0].what.find("VF 1 of ib0 (0000:3b:00.0): its node and port GUIDs are all zero"),
            std::string::npos)
      << all(r);
  EXPECT_NE(r.problems[0].fix.find("ip link set ib0 vf 1 node_guid"), std::string::npos);
  EXPECT_NE(r.problems[0].fix.find("port_guid"), std::string::npos);
  EXPECT_NE(r.problems[0].fix.find("infinibandGUID"), std::string::npos);
  EXPECT_EQ(r.sriovPfs[0].vfs[1].nodeGuid, "00:00:00:00:00:00:00:00");
  json j = json::parse(doctor::printDoctorReport(r));
  EXPECT_EQ(j["sriovPfs"][0]["vfs"][1]["portGuid"], "00:00:00:00:00:00:00:00");
  EXPECT_EQ(j["problems"].size(), 1u);
}

TEST_F(DoctorTest, NoRdmaDeviceAtAll) {
  FakeRdmaNetlink empty;
  empty.setMode(rdma::NetnsMode::kShared);
  verbs.result = verbs::ProbeResult{};
  uverbs.clear();
  doctor::DoctorInputs in{netlink, devices, empty, &verbs, host, "/proc/self/ns/net", {}, {}, {}};
  in.listNetdevs = [] { return std::vector<std::string>{"lo"}; };
  in.listUverbs = [] { return std::vector<std::string>{}; };
  DoctorReport r = doctor::collect(in);
  EXPECT_TRUE(r.devices.empty());
  EXPECT_EQ(doctor::exitStatus(r), 1);
  auto p = problemsWith(r, "no RDMA devices");
  ASSERT_EQ(p.size(), 1u) << all(r);
  EXPECT_NE(p[0].fix.find("rdma link show"), std::string::npos);
  EXPECT_TRUE(problemsWith(r, "uverbs").empty()) << "no device: a missing uverbs is no news";
  EXPECT_TRUE(r.ipoibLinks.empty());
  EXPECT_TRUE(r.sriovPfs.empty());
  EXPECT_NE(doctor::renderText(r).find("RDMA devices: none"), std::string::npos);

  empty.setPresent(false);
  r = doctor::collect(in);
  EXPECT_EQ(r.rdmaNetnsMode, "unknown");
  ASSERT_EQ(problemsWith(r, "ib_core is not loaded").size(), 1u) << all(r);
  json j = json::parse(doctor::printDoctorReport(r));
  EXPECT_EQ(j["devices"], json::array());
  EXPECT_EQ(j["rdmaNetnsMode"], "unknown");
}

TEST_F(DoctorTest, NoUverbsDevices) {
  uverbs.clear();
  DoctorReport r = run();
  auto p = problemsWith(r, "/dev/infiniband/uverbs");
  ASSERT_EQ(p.size(), 1u) << all(r);
  EXPECT_NE(p[0].fix.find("modprobe ib_uverbs"), std::string::npos);
}

TEST_F(DoctorTest, LibibverbsUnavailable) {
  verbs.result = verbs::ProbeResult{};
  verbs.result.available = false;
  verbs.result.unavailableReason = "libibverbs.so.1: cannot open shared object file: No such file or directory";
  tree.setPkeys("mlx5_0", 1, {"0xffff", "0x0000", "0x8123"});
  ASSERT_TRUE(tree.ok()) << tree.error();
  DoctorReport r = run();
  EXPECT_FALSE(r.verbsAvailable);
  EXPECT_EQ(doctor::exitStatus(r), 1);
  auto p = problemsWith(r, "libibverbs is not loadable: libibverbs.so.1: cannot open shared object file");
  ASSERT_EQ(p.size(), 1u) << all(r);
  EXPECT_NE(p[0].fix.find("rdma-core"), std::string::npos);
  EXPECT_EQ(r.problems.size(), 1u) << all(r);
  EXPECT_EQ(verbs.requests.size(), 1u) << "no per-port probe once libibverbs is known missing";
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_FALSE(r.devices[0].ports[0].queried);
  EXPECT_EQ(r.devices[0].ports[0].pkeys,
            (std::vector<net::Pkey>{net::Pkey::fromWire(0xffff), net::Pkey::fromWire(0x8123)}))
      << "from sysfs";
  EXPECT_NE(doctor::renderText(r).find("state unknown"), std::string::npos);
  json j = json::parse(doctor::printDoctorReport(r));
  EXPECT_EQ(j["libibverbs"]["available"], false);
  EXPECT_TRUE(j["devices"][0]["ports"][0]["state"].is_null());

  useVerbs = false;
  r = run();
  EXPECT_EQ(problemsWith(r, "libibverbs is not loadable").size(), 1u) << all(r);
}

// The values of a real ConnectX-6 (tests/unit/verbs/testdata): mlx5_0 port 1 ACTIVE on a fabric with a
// subnet manager, mlx5_1 port 1 disabled. The doctor shows both as ibv_devinfo does and flags the
// second only.
TEST_F(DoctorTest, RealMlx5PortsAsIbvDevinfoShowsThem) {
  auto ports = loadIbvDevinfo(std::string(IBCNI_VERBS_TESTDATA) + "/mlx5_cx6_ib.ibv_devinfo_vv.txt");
  ASSERT_EQ(ports.size(), 2u);
  nl::Link ib1;
  ib1.name = "ib1";
  ib1.kind = "ipoib";
  ib1.arpType = FakeNetlink::kArphrdInfiniband;
  ib1.mtu = 2044;
  ib1.ipoib = nl::IpoibInfo{net::Pkey::fromWire(0xffff), nl::IpoibMode::kDatagram, false};
  const int ib1Index = netlink.addLink(host, ib1);
  rdma.addDevice(host, "mlx5_1", ib1Index, "ib1");
  for (const auto& p : ports) {
    verbs.byDevice[p.device] = probeResultOf(p, {"mlx5_0", "mlx5_1"});
    // 0xffff: not in ibv_devinfo's output (testdata/README.md)
    verbs.byDevice[p.device].port->pkeys = {net::Pkey::fromWire(0xffff)};
  }

  DoctorReport r = run();
  ASSERT_EQ(r.devices.size(), 2u);
  const auto& a = r.devices[0];
  EXPECT_EQ(a.name, "mlx5_0");
  EXPECT_EQ(a.nodeGuid, "88:e9:a4:ff:ff:25:a4:62");
  ASSERT_EQ(a.ports.size(), 1u);
  EXPECT_EQ(a.ports[0].state, "ACTIVE");
  EXPECT_EQ(a.ports[0].physState, "LinkUp");
  EXPECT_EQ(a.ports[0].lid, 4);
  EXPECT_EQ(a.ports[0].smLid, 1);
  EXPECT_EQ(a.ports[0].portGuid, "88:e9:a4:ff:ff:25:a4:62");
  const auto& b = r.devices[1];
  EXPECT_EQ(b.name, "mlx5_1");
  ASSERT_EQ(b.ports.size(), 1u);
  EXPECT_EQ(b.ports[0].state, "DOWN");
  EXPECT_EQ(b.ports[0].physState, "Disabled");
  EXPECT_EQ(b.ports[0].lid, 0xffff);
  EXPECT_EQ(b.ports[0].smLid, 0);
  EXPECT_EQ(b.ports[0].netdev, "ib1");

  EXPECT_EQ(doctor::exitStatus(r), 1);
  ASSERT_EQ(r.problems.size(), 1u) << all(r);
  EXPECT_NE(r.problems[0].what.find("mlx5_1 port 1 is DOWN (physical state Disabled)"), std::string::npos) << all(r);
  EXPECT_NE(r.problems[0].fix.find("administratively disabled"), std::string::npos);
  const std::string text = doctor::renderText(r);
  EXPECT_NE(text.find("port 1: ACTIVE (LinkUp) InfiniBand LID 4 SM LID 1 port GUID 88:e9:a4:ff:ff:25:a4:62 netdev ib0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("port 1: DOWN (Disabled) InfiniBand LID 65535 SM LID 0"), std::string::npos) << text;
}

// GPUDirect RDMA needs nvidia_peermem beside the NVIDIA driver (AKS and GPU Operator users lose
// most of NCCL's bandwidth without it).
TEST_F(DoctorTest, GpuDirectNeedsNvidiaPeermem) {
  std::set<std::string> loaded = {"nvidia"};
  doctor::DoctorInputs in{netlink, devices, rdma, &verbs, host, "/proc/self/ns/net", {}, {}, {}};
  in.listNetdevs = [] { return std::vector<std::string>{}; };
  in.listUverbs = [this] { return uverbs; };
  in.moduleLoaded = [&loaded](const std::string& m) { return loaded.contains(m); };
  DoctorReport r = doctor::collect(in);
  EXPECT_EQ(r.gpuDirect, "disabled");
  auto p = problemsWith(r, "nvidia_peermem is not");
  ASSERT_EQ(p.size(), 1u) << all(r);
  EXPECT_NE(p[0].fix.find("modprobe nvidia-peermem"), std::string::npos);
  EXPECT_EQ(doctor::exitStatus(r), 1);
  EXPECT_NE(doctor::renderText(r).find("GPUDirect RDMA: disabled"), std::string::npos);
  EXPECT_EQ(json::parse(doctor::printDoctorReport(r))["gpuDirect"], "disabled");

  loaded.insert("nvidia_peermem");
  r = doctor::collect(in);
  EXPECT_EQ(r.gpuDirect, "enabled");
  EXPECT_TRUE(problemsWith(r, "peermem").empty()) << all(r);

  loaded.clear();
  r = doctor::collect(in);
  EXPECT_EQ(r.gpuDirect, "no NVIDIA driver");
  EXPECT_TRUE(problemsWith(r, "peermem").empty()) << "a node without GPUs needs no peermem";
  in.moduleLoaded = nullptr;
  EXPECT_EQ(doctor::collect(in).gpuDirect, "unknown");
}

TEST(DoctorListDirectory, FiltersByPrefixAndToleratesMissingDirectories) {
  FakeSysfsTree tree;
  tree.writeFile("dev/infiniband/uverbs1", "").writeFile("dev/infiniband/uverbs0", "").writeFile("dev/infiniband/rdma_cm", "");
  ASSERT_TRUE(tree.ok()) << tree.error();
  EXPECT_EQ(doctor::listDirectory(tree.root() + "/dev/infiniband", "uverbs"),
            (std::vector<std::string>{"uverbs0", "uverbs1"}));
  EXPECT_TRUE(doctor::listDirectory(tree.root() + "/nonexistent", "").empty());
}

}  // namespace
}  // namespace ibcni::testing
