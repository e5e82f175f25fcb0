// SPDX-License-Identifier: Apache-2.0
// The verbs check's decisions (each failure with its message and fix) and how ADD and CHECK use
// them in warn and require mode.
#include <gtest/gtest.h>

#include "plugin/modes/verbs_check.h"
#include "fakes/fake_verbs_probe.h"
#include "fakes/ibv_devinfo_text.h"
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

using plugin::evaluateVerbs;
using plugin::VerbsExpectations;

VerbsExpectations want(const std::string& device = "mlx5_3") {
  VerbsExpectations w;
  w.device = device;
  w.port = 1;
  return w;
}

std::string all(const std::vector<plugin::VerbsFinding>& f) {
  std::string s;
  for (const auto& x : f) {
    s += x.check + ": " + x.problem + " | " + x.fix + "\n";
  }
  return s;
}

TEST(EvaluateVerbs, AHealthyInfinibandPortPasses) {
  auto r = FakeVerbsProbe::healthyIb("mlx5_3");
  auto w = want();
  w.pkey = net::Pkey::fromWire(0x7fff);
  EXPECT_TRUE(evaluateVerbs(r, w).empty()) << all(evaluateVerbs(r, w));
  w.pkey = net::Pkey::fromWire(0x0123);
  EXPECT_TRUE(evaluateVerbs(r, w).empty()) << "0x8123 in the table is pkey 0x0123";
}

TEST(EvaluateVerbs, UnavailableLibibverbs) {
  verbs::ProbeResult r;
  r.available = false;
  r.unavailableReason = "libibverbs.so.1: cannot open shared object file";
  auto f = evaluateVerbs(r, want());
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].problem.find("verbs check unavailable"), std::string::npos);
  EXPECT_NE(f[0].fix.find("rdma-core"), std::string::npos);
}

TEST(EvaluateVerbs, DeviceNotVisibleOrNotOpened) {
  auto r = FakeVerbsProbe::healthyIb("mlx5_0");
  auto f = evaluateVerbs(r, want("mlx5_3"));
  ASSERT_EQ(f.size(), 1u) << all(f);
  EXPECT_NE(f[0].problem.find("not visible in the pod's network namespace (it sees mlx5_0)"), std::string::npos);
  EXPECT_NE(f[0].fix.find("rdmaIsolation"), std::string::npos);

  r = FakeVerbsProbe::healthyIb("mlx5_3");
  r.opened = false;
  r.port.reset();
  r.openError = "Permission denied";
  f = evaluateVerbs(r, want());
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].problem.find("cannot open mlx5_3: Permission denied"), std::string::npos);
  EXPECT_NE(f[0].fix.find("uverbs"), std::string::npos);
}

TEST(EvaluateVerbs, PortInInitMeansNoSubnetManager) {
  auto r = FakeVerbsProbe::healthyIb("mlx5_3");
  r.port->state = 2;
  r.port->lid = 0;
  r.port->smLid = 0;
  auto f = evaluateVerbs(r, want());
  ASSERT_EQ(f.size(), 3u) << all(f);
  EXPECT_NE(f[0].problem.find("INIT, not ACTIVE"), std::string::npos);
  EXPECT_NE(f[0].fix.find("subnet manager"), std::string::npos);
  EXPECT_EQ(f[1].check, "LID");
  EXPECT_EQ(f[2].check, "SM");
}

TEST(EvaluateVerbs, PortDownAndPhysicalState) {
  auto r = FakeVerbsProbe::healthyIb("mlx5_3");
  r.port->state = 1;
  r.port->physState = 3;
  auto f = evaluateVerbs(r, want());
  ASSERT_EQ(f.size(), 2u) << all(f);
  EXPECT_NE(f[0].problem.find("DOWN"), std::string::npos);
  EXPECT_NE(f[0].fix.find("linkState"), std::string::npos);
  EXPECT_NE(f[1].problem.find("Disabled, not LinkUp"), std::string::npos);
}

TEST(EvaluateVerbs, ZeroPortGuidAndMissingPkey) {
  auto r = FakeVerbsProbe::healthyIb("mlx5_3");
  r.port->portGuid = 0;
  auto w = want();
  w.pkey = net::Pkey::fromWire(0x0042);
  auto f = evaluateVerbs(r, w);
  ASSERT_EQ(f.size(), 2u) << all(f);
  EXPECT_EQ(f[0].check, "GUID");
  EXPECT_NE(f[1].problem.find("pkey 0x0042 is not in the pkey table of mlx5_3 port 1 (0xffff, 0x8123)"),
            std::string::npos);
  EXPECT_NE(f[1].fix.find("partitions.conf"), std::string::npos);
}

// A GUID the pool has just given is one the subnet manager may not have admitted to the partition.
TEST(EvaluateVerbs, AMissingPkeyOfAPoolGuidSaysTheSubnetManagerHasNotAdmittedIt) {
  auto r = FakeVerbsProbe::healthyIb("mlx5_3");
  auto w = want();
  w.pkey = net::Pkey::fromWire(0x0042);
  w.poolGuid = "02:00:00:00:00:00:01:00";
  w.guidPool = "gpool";
  auto f = evaluateVerbs(r, w);
  ASSERT_EQ(f.size(), 1u) << all(f);
  EXPECT_EQ(f[0].check, "pkey");
  EXPECT_NE(f[0].fix.find("GUID 02:00:00:00:00:00:01:00 came from guidPool gpool"), std::string::npos) << f[0].fix;
  EXPECT_NE(f[0].fix.find("not ranges"), std::string::npos) << f[0].fix;
}

TEST(EvaluateVerbs, RoceNeedsARoceV2GidForEachAddress) {
  verbs::ProbeResult r;
  r.devices = {"rxe0"};
  r.opened = true;
  verbs::PortFacts p;
  p.device = "rxe0";
  p.state = 4;
  p.physState = 5;
  p.linkLayer = verbs::LinkLayer::kEthernet;
  verbs::Gid g;
  g.index = 1;
  g.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 1};
  g.type = "RoCE v2";
  p.gids = {g};
  r.port = p;
  auto w = want("rxe0");
  w.ips = {net::IpPrefix::parse("10.77.0.1/24")->address};
  EXPECT_TRUE(evaluateVerbs(r, w).empty()) << "no LID/SM checks on Ethernet: " << all(evaluateVerbs(r, w));
  w.ips.push_back(net::IpPrefix::parse("10.77.0.2/24")->address);
  auto f = evaluateVerbs(r, w);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].problem.find("no RoCE v2 GID of rxe0 port 1 carries 10.77.0.2"), std::string::npos);
  r.port->gids[0].type = "IB/RoCE v1";
  EXPECT_EQ(evaluateVerbs(r, want("rxe0")).size(), 0u);
  w.ips.pop_back();
  EXPECT_EQ(evaluateVerbs(r, w).size(), 1u) << "a RoCE v1 GID does not count";
}

TEST(EvaluateVerbs, QpProbeFailure) {
  auto r = FakeVerbsProbe::healthyIb("mlx5_3");
  r.qpProbeOk = false;
  r.qpProbeError = "ibv_create_cq: Cannot allocate memory";
  auto w = want();
  w.qpProbe = true;
  auto f = evaluateVerbs(r, w);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].problem.find("did not reach RTS: ibv_create_cq"), std::string::npos);
  EXPECT_NE(f[0].fix.find("ulimit -l"), std::string::npos);
}

// The InfiniBand-only fields with the values of a real ConnectX-6 (tests/unit/verbs/testdata): mlx5_0
// port 1 on a fabric with a subnet manager passes; mlx5_1 port 1 (disabled, no LID, no SM) fails on
// each of them.
class RealMlx5Port : public ::testing::Test {
 protected:
  void SetUp() override {
    ports = loadIbvDevinfo(std::string(IBCNI_VERBS_TESTDATA) + "/mlx5_cx6_ib.ibv_devinfo_vv.txt");
    ASSERT_EQ(ports.size(), 2u);
  }
  verbs::ProbeResult answer(std::size_t i) {
    auto r = probeResultOf(ports[i], {"mlx5_0", "mlx5_1"});
    // 0xffff: not in ibv_devinfo's output, the default partition (testdata/README.md)
    r.port->pkeys = {net::Pkey::fromWire(0xffff)};
    return r;
  }
  std::vector<DevinfoPort> ports;
};

TEST_F(RealMlx5Port, TheFixtureReadsAsIbvDevinfoPrintsIt) {
  const auto& a = ports[0].facts;
  EXPECT_EQ(ports[0].device, "mlx5_0");
  EXPECT_EQ(a.state, 4);
  EXPECT_EQ(a.physState, 5);
  EXPECT_EQ(a.linkLayer, verbs::LinkLayer::kInfiniband);
  EXPECT_EQ(a.lid, 4);
  EXPECT_EQ(a.smLid, 1);
  EXPECT_EQ(a.nodeGuid, 0x88e9a4ffff25a462ULL);
  EXPECT_EQ(a.portGuid, 0x88e9a4ffff25a462ULL);
  const auto& b = ports[1].facts;
  EXPECT_EQ(ports[1].device, "mlx5_1");
  EXPECT_EQ(b.state, 1);
  EXPECT_EQ(b.physState, 3);
  EXPECT_EQ(b.lid, 0xffff);
  EXPECT_EQ(b.smLid, 0);
  EXPECT_EQ(b.portGuid, 0x88e9a4ffff25a463ULL);
}

TEST_F(RealMlx5Port, AnActivePortWithASubnetManagerPasses) {
  auto w = want("mlx5_0");
  w.pkey = net::Pkey::fromWire(0x7fff);
  auto f = evaluateVerbs(answer(0), w);
  EXPECT_TRUE(f.empty()) << all(f);
}

TEST_F(RealMlx5Port, ADisabledPortWithoutLidOrSubnetManagerFailsOnEach) {
  auto w = want("mlx5_1");
  w.pkey = net::Pkey::fromWire(0x0042);
  auto f = evaluateVerbs(answer(1), w);
  ASSERT_EQ(f.size(), 5u) << all(f);
  EXPECT_EQ(f[0].check, "port state");
  EXPECT_NE(f[0].problem.find("mlx5_1 port 1 is DOWN, not ACTIVE"), std::string::npos);
  EXPECT_EQ(f[1].check, "physical state");
  EXPECT_NE(f[1].problem.find("Disabled, not LinkUp"), std::string::npos);
  EXPECT_NE(f[1].fix.find("enable it"), std::string::npos);
  EXPECT_EQ(f[2].check, "LID");
  EXPECT_NE(f[2].problem.find("LID 65535: no subnet manager has assigned it"), std::string::npos);
  EXPECT_EQ(f[3].check, "SM");
  EXPECT_NE(f[3].problem.find("SM LID 0"), std::string::npos);
  EXPECT_EQ(f[4].check, "pkey");
  EXPECT_NE(f[4].problem.find("pkey 0x0042 is not in the pkey table of mlx5_1 port 1 (0xffff)"), std::string::npos);
}

TEST_F(RealMlx5Port, TheDeviceOfAnotherPodIsNotVisible) {
  auto r = answer(0);
  r.devices = {"mlx5_0"};
  auto f = evaluateVerbs(r, want("mlx5_1"));
  ASSERT_EQ(f.size(), 1u) << all(f);
  EXPECT_NE(f[0].problem.find("RDMA device mlx5_1 is not visible in the pod's network namespace (it sees mlx5_0)"),
            std::string::npos);
}

// ---- no RDMA device behind the interface: the rule (judgeRdmaPresence) ----

using plugin::judgeRdmaPresence;
using plugin::RdmaFacts;

RdmaFacts vfFacts() {
  RdmaFacts f;
  f.subject = "deviceID = \"0000:3b:00.3\"";
  f.netdev = "ibp59s0v2";
  f.infiniband = true;
  f.pciAddress = net::PciAddress::parse("0000:3b:00.3");
  f.driver = "mlx5_core";
  f.pfPci = net::PciAddress::parse("0000:3b:00.0");
  f.pfInfiniband = true;
  f.pfRdmaDevices = {"mlx5_0"};
  f.rdmaDevice = "mlx5_3";
  f.netnsMode = rdma::NetnsMode::kShared;
  return f;
}

TEST(JudgeRdmaPresence, AnRdmaDeviceThePodSeesIsLeftToTheProbe) {
  auto f = vfFacts();
  EXPECT_FALSE(judgeRdmaPresence(f)) << "shared mode: every pod sees it";
  f.netnsMode = rdma::NetnsMode::kExclusive;
  f.rdmaMoved = true;
  EXPECT_FALSE(judgeRdmaPresence(f)) << "exclusive mode, moved with the interface";
  f.netnsMode.reset();
  f.rdmaMoved = false;
  EXPECT_FALSE(judgeRdmaPresence(f)) << "mode unknown: the probe tells";
}

TEST(JudgeRdmaPresence, AVfOfAnInfinibandPfWithoutRdmaDeviceNeedsItsDriver) {
  auto f = vfFacts();
  f.rdmaDevice.clear();
  f.driver = "vfio-pci";
  auto v = judgeRdmaPresence(f);
  ASSERT_TRUE(v);
  EXPECT_NE(v->problem.find("deviceID = \"0000:3b:00.3\" (netdev ibp59s0v2, PCI 0000:3b:00.3, driver vfio-pci) has "
                            "no RDMA device: it is a VF of PF 0000:3b:00.0, which is InfiniBand (RDMA device mlx5_0)"),
            std::string::npos)
      << v->problem;
  EXPECT_NE(v->fix.find("modprobe mlx5_ib"), std::string::npos) << v->fix;
  EXPECT_NE(v->fix.find("it is bound to vfio-pci"), std::string::npos) << v->fix;
  // An Ethernet netdev whose PF only has an RDMA device (RoCE PF) is the same cause.
  f.infiniband = false;
  f.pfInfiniband = false;
  v = judgeRdmaPresence(f);
  ASSERT_TRUE(v);
  EXPECT_NE(v->problem.find("which is RDMA-capable (RDMA device mlx5_0)"), std::string::npos) << v->problem;
  EXPECT_NE(v->fix.find("mlx5_ib"), std::string::npos);
}

TEST(JudgeRdmaPresence, AFunctionWithNothingRdmaIsTheWrongResource) {
  RdmaFacts f;
  f.subject = "deviceID = \"0000:00:04.0\"";
  f.netdev = "eth1";
  f.pciAddress = net::PciAddress::parse("0000:00:04.0");
  f.driver = "virtio-pci";
  f.netnsMode = rdma::NetnsMode::kShared;
  auto v = judgeRdmaPresence(f);
  ASSERT_TRUE(v);
  EXPECT_NE(v->problem.find("(netdev eth1, PCI 0000:00:04.0, driver virtio-pci) is not an RDMA-capable device: it "
                            "has no RDMA device"),
            std::string::npos)
      << v->problem;
  EXPECT_NE(v->fix.find("resourceName"), std::string::npos) << v->fix;
  EXPECT_NE(v->fix.find("\"isRdma\": true"), std::string::npos) << v->fix;
  // A VF whose PF has nothing RDMA either (an Ethernet NIC's VF).
  f.pfPci = net::PciAddress::parse("0000:00:03.0");
  v = judgeRdmaPresence(f);
  ASSERT_TRUE(v);
  EXPECT_NE(v->problem.find("and neither has its PF 0000:00:03.0"), std::string::npos) << v->problem;
  // No PCI function at all (a veth, named by device).
  RdmaFacts veth;
  veth.subject = "device = \"vf0\"";
  veth.netdev = "vf0";
  v = judgeRdmaPresence(veth);
  ASSERT_TRUE(v);
  EXPECT_NE(v->problem.find("device = \"vf0\" (netdev vf0, no PCI function) is not an RDMA-capable device"),
            std::string::npos)
      << v->problem;
}

TEST(JudgeRdmaPresence, ExclusiveModeWithoutIsolationHidesTheDevice) {
  auto f = vfFacts();
  f.netnsMode = rdma::NetnsMode::kExclusive;
  auto v = judgeRdmaPresence(f);
  ASSERT_TRUE(v);
  EXPECT_NE(v->problem.find("RDMA device mlx5_3 of deviceID"), std::string::npos) << v->problem;
  EXPECT_NE(v->problem.find("exclusive netns mode"), std::string::npos) << v->problem;
  EXPECT_NE(v->problem.find("rdmaIsolation is false"), std::string::npos) << v->problem;
  EXPECT_NE(v->fix.find("set rdmaIsolation to \"auto\" (the default) or true"), std::string::npos) << v->fix;
  EXPECT_NE(v->fix.find("rdma system set netns shared"), std::string::npos) << v->fix;
}

TEST(JudgeRdmaPresence, Ipoib) {
  RdmaFacts f;
  f.mode = config::Mode::kIpoib;
  f.subject = "the IPoIB parent master = \"ibp59s0\"";
  f.netdev = "ibp59s0";
  f.infiniband = true;
  f.pciAddress = net::PciAddress::parse("0000:3b:00.0");
  f.driver = "mlx5_core";
  f.rdmaDevice = "mlx5_0";
  f.netnsMode = rdma::NetnsMode::kShared;
  EXPECT_FALSE(judgeRdmaPresence(f)) << "the parent's HCA, seen from every pod";
  f.netnsMode = rdma::NetnsMode::kExclusive;
  auto v = judgeRdmaPresence(f);
  ASSERT_TRUE(v);
  EXPECT_NE(v->problem.find("an IPoIB child cannot take its HCA's device along"), std::string::npos) << v->problem;
  EXPECT_NE(v->fix.find("rdma system set netns shared"), std::string::npos) << v->fix;
  f.rdmaDevice.clear();
  v = judgeRdmaPresence(f);
  ASSERT_TRUE(v);
  EXPECT_NE(v->problem.find("has no RDMA device ibcni can find"), std::string::npos) << v->problem;
  EXPECT_NE(v->fix.find("set rdmaDevice and port"), std::string::npos) << v->fix;
}

// ---- ... and in ADD/CHECK, over the fakes: a netdev with no RDMA device at all ----

class NoRdmaDeviceTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    deps_.verbs = &verbs_;
    logFile_ = stateDir_ + "-ibcni.log";
  }
  void TearDown() override {
    std::filesystem::remove(logFile_);
    PluginTest::TearDown();
  }
  json conf(const std::string& mode) const {
    json c = config();
    c["verbsCheck"] = {{"mode", mode}};
    c["logFile"] = logFile_;
    c["logLevel"] = "info";
    return c;
  }
  std::string log() const {
    std::ifstream in(logFile_);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  FakeVerbsProbe verbs_;
  std::string logFile_;
};

TEST_F(NoRdmaDeviceTest, RequireFailsAddWith109AndRollsBack) {
  const std::string before = snapshot(host_) + snapshot(pod_);
  auto out = run("ADD", conf("require"));
  EXPECT_EQ(out.exitCode, 1);
  EXPECT_EQ(errorOf(out)["code"], 109) << out.stdoutText;
  const std::string msg = errorOf(out)["msg"];
  EXPECT_NE(msg.find("device = \"vf0\" (netdev vf0, no PCI function) is not an RDMA-capable device"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("isRdma"), std::string::npos) << msg;
  EXPECT_EQ(snapshot(host_) + snapshot(pod_), before) << "vf0 is back in the host as it was";
  EXPECT_TRUE(nl_.findLink(host_, "vf0").has_value());
  EXPECT_TRUE(ipam_.allocations.empty());
  EXPECT_TRUE(records().empty());
  EXPECT_TRUE(verbs_.requests.empty()) << "nothing to probe";
}

TEST_F(NoRdmaDeviceTest, WarnLogsTheSameTextAndCheckRequireIs109) {
  json c = conf("warn");
  auto result = add(c);
  ASSERT_EQ(records().size(), 1u);
  EXPECT_NE(log().find("[warning]"), std::string::npos) << log();
  EXPECT_NE(log().find("verbs check: device = \"vf0\" (netdev vf0, no PCI function) is not an RDMA-capable "
                       "device"),
            std::string::npos)
      << log();
  c["prevResult"] = result;
  EXPECT_EQ(run("CHECK", c).exitCode, 0) << "warn: CHECK passes";
  c["verbsCheck"]["mode"] = "require";
  auto out = run("CHECK", c);
  EXPECT_EQ(errorOf(out)["code"], 109) << out.stdoutText;
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("is not an RDMA-capable device"), std::string::npos)
      << out.stdoutText;
  EXPECT_TRUE(nl_.findLink(pod_, "net1").has_value()) << "CHECK changes nothing";
}

TEST_F(NoRdmaDeviceTest, OffIsSilent) {
  add(conf("off"));
  EXPECT_EQ(log().find("verbs check"), std::string::npos) << log();
  EXPECT_TRUE(verbs_.requests.empty());
}

TEST_F(NoRdmaDeviceTest, AVirtioPciNicIsNotRdmaCapable) {
  const int idx = nl_.findLink(host_, "vf0")->index;
  sysfs_.addVirtioNetdev("0000:00:04.0", 1, "vf0", idx);
  ASSERT_TRUE(sysfs_.ok()) << sysfs_.error();
  json c = conf("require");
  c.erase("device");
  c["deviceID"] = "0000:00:04.0";
  const std::string before = snapshot(host_) + snapshot(pod_);
  auto out = run("ADD", c);
  EXPECT_EQ(errorOf(out)["code"], 109) << out.stdoutText;
  const std::string msg = errorOf(out)["msg"];
  EXPECT_NE(msg.find("deviceID = \"0000:00:04.0\" (netdev vf0, PCI 0000:00:04.0, driver virtio-pci) is not an "
                     "RDMA-capable device"),
            std::string::npos)
      << msg;
  EXPECT_EQ(snapshot(host_) + snapshot(pod_), before);
  EXPECT_TRUE(records().empty());
}

}  // namespace
}  // namespace ibcni::testing
