// SPDX-License-Identifier: Apache-2.0
// `ibcni doctor --config`: the verdict on a network config over the plugin's fakes. A node with an
// InfiniBand PF (ibp59s0, mlx5_0) and three VFs: VF 0 has a GUID, VF 1 has none, VF 2 is bound to
// vfio-pci; and an IPoIB parent ib0.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "plugin/doctor/config_check.h"
#include "plugin/doctor/doctor.h"
#include "fakes/fake_guid_pools.h"
#include "fakes/fake_verbs_probe.h"
#include "plugin/doctor/doctor_json.h"
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

constexpr const char* kPf = "0000:3b:00.0";
constexpr const char* kVf0 = "0000:3b:00.1";
constexpr const char* kVf1 = "0000:3b:00.2";
constexpr const char* kVf2 = "0000:3b:00.3";

class ConfigCheckTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    deps_.verbs = &verbs_;
    rdma_.setMode(rdma::NetnsMode::kExclusive);

    nl::Link pf = fakeIbLink("ibp59s0", "02:00:00:00:00:00:00:01", "ipoib");
    pf.mtu = 2044;
    pf.ipoib = nl::IpoibInfo{net::Pkey::fromWire(0xffff), nl::IpoibMode::kDatagram, false};
    pfIndex_ = nl_.addLink(host_, pf);
    const int v0 = addVfLink("ibp59s0v0", "02:00:00:00:00:00:aa:00");
    const int v1 = addVfLink("ibp59s0v1", "00:00:00:00:00:00:00:00");
    sysfs_.addPf(kPf, "ibp59s0", "mlx5_0", 3, pfIndex_)
        .addVf(kPf, 0, kVf0, "ibp59s0v0", "mlx5_1", v0)
        .addVf(kPf, 1, kVf1, "ibp59s0v1", "mlx5_2", v1)
        .addVf(kPf, 2, kVf2, "", "")
        .setDriver(kVf2, "vfio-pci");
    for (const char* d : {"mlx5_0", "mlx5_1", "mlx5_2"}) {
      sysfs_.setPkeys(d, 1, {"0xffff", "0x8123"});
    }
    ASSERT_TRUE(sysfs_.ok()) << sysfs_.error();
    std::vector<nl::VfInfo> vfs;
    for (std::uint64_t g : {0x020000000000aa00ULL, 0ULL, 0x020000000000aa02ULL}) {
      nl::VfInfo v;
      v.vf = static_cast<std::uint32_t>(vfs.size());
      v.linkState = nl::VfLinkState::kAuto;
      v.nodeGuid = net::Guid{g};
      v.portGuid = net::Guid{g};
      vfs.push_back(v);
    }
    nl_.setVfs(host_, pfIndex_, vfs);
    rdma_.addDevice(host_, "mlx5_0", pfIndex_, "ibp59s0");
    rdma_.addDevice(host_, "mlx5_1", v0, "ibp59s0v0");
    rdma_.addDevice(host_, "mlx5_2", v1, "ibp59s0v1");
    verbs_.result = FakeVerbsProbe::healthyIb("mlx5_1");
    for (const char* d : {"mlx5_0", "mlx5_1", "mlx5_2"}) {
      verbs_.byDevice[d] = FakeVerbsProbe::healthyIb(d);
      verbs_.byDevice[d].devices = {"mlx5_0", "mlx5_1", "mlx5_2"};
    }

    char tmpl[] = "/tmp/ibcni-cni-path-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    cniPath_ = tmpl;
  }
  void TearDown() override {
    std::filesystem::remove_all(cniPath_);
    PluginTest::TearDown();
  }

  int addVfLink(const std::string& name, const std::string& guid) {
    nl::Link vf = fakeIbLink(name, guid);
    vf.mtu = 2044;
    const int index = nl_.addLink(host_, vf);
    nl_.setMtuRange(host_, index, 68, 4092);
    return index;
  }

  void installIpamPlugin(const std::string& name) {
    const std::string path = cniPath_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\necho '{\"cniVersion\":\"1.1.0\"}'\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }

  /// The network config of a NAD whose device plugin hands out the VFs.
  json sriovConfig(const std::string& version = "1.1.0") const {
    json c = config(version);
    c.erase("device");
    c.erase("mtu");
    return c;
  }

  static std::string nad(const json& conf, const std::string& resource = "nvidia.com/mlx5_ib_vf") {
    json n = {{"apiVersion", "k8s.cni.cncf.io/v1"},
              {"kind", "NetworkAttachmentDefinition"},
              {"metadata", {{"name", "ibnet"}}},
              {"spec", {{"config", conf.dump()}}}};
    if (!resource.empty()) {
      n["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"] = resource;
    }
    return n.dump();
  }

  doctor::DoctorReport node() {
    doctor::DoctorInputs in{nl_, devices_, rdma_, &verbs_, host_, "/proc/self/ns/net", {}, {}, {}};
    in.listNetdevs = [this] {
      std::vector<std::string> names;
      for (const auto& l : nl_.links(host_)) {
        names.push_back(l.name);
      }
      return names;
    };
    in.listUverbs = [] { return std::vector<std::string>{"uverbs0"}; };
    return doctor::collect(in);
  }

  doctor::ConfigReport check(const std::string& text) {
    report_ = node();
    doctor::ConfigCheckInputs in{deps_, host_, report_, {cniPath_}, "/proc/self/ns/net"};
    in.clusterPools = clusterPools_;
    in.guidPools = guidPools_;
    in.libcurlProblem = libcurlProblem_;
    in.nodeNameFile = nodeNameFile_;
    report_.config = doctor::checkConfig(text, "ibnet.json", in);
    return *report_.config;
  }

  static std::string all(const doctor::ConfigReport& c) {
    std::string s;
    for (const auto& d : c.candidates) {
      s += d.device + (d.works ? " works" : " refused: " + d.problem) + "\n";
    }
    for (const auto& p : c.problems) {
      s += "problem: " + p.what + "\n";
    }
    return s;
  }

  FakeVerbsProbe verbs_;
  std::function<cni::Result<ipam::PoolReport>(const ipam::Request&)> clusterPools_;
  std::function<cni::Result<ipam::PoolReport>(const config::GuidPoolConf&, const std::string&)> guidPools_;
  std::function<std::string()> libcurlProblem_;
  std::string nodeNameFile_;
  std::string cniPath_;
  int pfIndex_ = 0;
  doctor::DoctorReport report_;
};

TEST_F(ConfigCheckTest, EachVfTheDevicePluginCouldHandOutIsJudgedAsAddWouldJudgeIt) {
  installIpamPlugin("fake");
  auto c = check(nad(sriovConfig()));
  EXPECT_TRUE(c.works) << all(c);
  EXPECT_EQ(c.name, "ibnet");
  EXPECT_EQ(c.mode, "sriov");
  EXPECT_EQ(c.resourceName, "nvidia.com/mlx5_ib_vf");
  ASSERT_EQ(c.candidates.size(), 3u) << all(c);
  EXPECT_EQ(c.candidates[0].device, std::string(kVf0) + " (VF 0 of ibp59s0)");
  EXPECT_TRUE(c.candidates[0].works);
  EXPECT_FALSE(c.candidates[0].needsGuid);
  EXPECT_TRUE(c.candidates[1].works) << "accepted when the pod gives a GUID";
  EXPECT_TRUE(c.candidates[1].needsGuid);
  EXPECT_FALSE(c.candidates[2].works);
  EXPECT_NE(c.candidates[2].problem.find("bound to vfio-pci"), std::string::npos) << c.candidates[2].problem;
  // ADD would give it to a VM (vfio "auto"), and refuse this network's ipam there.
  EXPECT_NE(c.candidates[2].problem.find("ipam"), std::string::npos) << c.candidates[2].problem;
  EXPECT_NE(c.candidates[2].problem.find("[CNI error 7]"), std::string::npos) << c.candidates[2].problem;
  EXPECT_NE(std::find(c.ok.begin(), c.ok.end(), "2 of 3 VFs would be accepted"), c.ok.end()) << all(c);
  EXPECT_NE(std::find(c.ok.begin(), c.ok.end(), "IPAM fake is ready (STATUS)"), c.ok.end());
  EXPECT_EQ(doctor::exitStatus(report_), 0);
  for (auto op : nl_.callOps()) {
    EXPECT_TRUE(op == FakeNetlink::Op::kLinkByName || op == FakeNetlink::Op::kLinkByIndex ||
                op == FakeNetlink::Op::kVfInfo || op == FakeNetlink::Op::kListAddresses ||
                op == FakeNetlink::Op::kListRoutes)
        << "the check changes nothing, but called op " << static_cast<int>(op);
  }
  EXPECT_TRUE(sysfs_.driverWrites("mlx5_core", "bind").empty()) << "no rebind";

  const std::string text = doctor::renderText(report_);
  EXPECT_NE(text.find("Network config ibnet.json: ibnet (mode sriov) resource nvidia.com/mlx5_ib_vf would work"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(std::string(kVf1) + " (VF 1 of ibp59s0): works when the pod asks for a GUID"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("vf 1 " + std::string(kVf1) + " driver mlx5_core state auto"), std::string::npos)
      << "VF PCI in the node report";
  json j = json::parse(doctor::printDoctorReport(report_));
  EXPECT_EQ(j["config"]["works"], true);
  EXPECT_EQ(j["config"]["candidates"][1]["needsGuid"], true);
  EXPECT_EQ(j["config"]["candidates"][2]["works"], false);
  EXPECT_EQ(j["sriovPfs"][0]["vfs"][2]["pci"], kVf2);
}

TEST_F(ConfigCheckTest, RdmaIsolationOnASharedModeNodeRefusesEveryVfWithTheFix) {
  installIpamPlugin("fake");
  rdma_.setMode(rdma::NetnsMode::kShared);
  json conf = sriovConfig();
  conf["rdmaIsolation"] = true;
  auto c = check(nad(conf));
  EXPECT_FALSE(c.works) << all(c);
  ASSERT_EQ(c.candidates.size(), 3u);
  EXPECT_FALSE(c.candidates[0].works);
  EXPECT_NE(c.candidates[0].problem.find("rdma system set netns exclusive"), std::string::npos) << all(c);
  ASSERT_FALSE(c.problems.empty());
  EXPECT_NE(c.problems.back().what.find("no device would be accepted"), std::string::npos) << all(c);
  EXPECT_EQ(doctor::exitStatus(report_), 1);
}

TEST_F(ConfigCheckTest, APkeyMissingFromTheVfTablesIsNamed) {
  installIpamPlugin("fake");
  json conf = sriovConfig();
  conf["pkey"] = "0x0042";
  auto c = check(nad(conf));
  ASSERT_EQ(c.candidates.size(), 3u);
  EXPECT_FALSE(c.candidates[0].works);
  EXPECT_NE(c.candidates[0].problem.find("pkey = 0x0042: mlx5_1 port 1"), std::string::npos) << all(c);
  EXPECT_NE(c.candidates[0].problem.find("0xffff, 0x8123"), std::string::npos) << all(c);
  // VF 1 gets its GUID from the pod, and the subnet manager assigns partitions by GUID: ADD checks
  // its table only then, so the doctor only warns.
  EXPECT_TRUE(c.candidates[1].works) << all(c);
  ASSERT_EQ(c.candidates[1].warnings.size(), 2u) << "the pkey table, and the verbs check (warn) on the same";
  EXPECT_NE(c.candidates[1].warnings[0].find("ADD checks again once the pod's GUID is set"), std::string::npos);
  EXPECT_NE(c.candidates[1].warnings[1].find("pkey 0x0042 is not in the pkey table"), std::string::npos);

  conf["args"]["cni"]["guid"] = "02:00:00:00:00:00:bb:01";  // every VF gets a GUID from the config
  c = check(nad(conf));
  EXPECT_TRUE(c.candidates[0].works) << all(c);
  EXPECT_NE(c.candidates[0].warnings.at(0).find("ADD checks again"), std::string::npos);

  conf["args"].erase("cni");
  conf["pkey"] = "0x8123";
  EXPECT_TRUE(check(nad(conf)).works) << all(*report_.config);
}

TEST_F(ConfigCheckTest, VerbsCheckRequireRefusesAPortWithoutSubnetManagerAndWarnOnlyWarns) {
  installIpamPlugin("fake");
  for (auto& [name, r] : verbs_.byDevice) {
    r.port->state = 2;  // INIT: no subnet manager
    r.port->lid = 0;
    r.port->smLid = 0;
  }
  json conf = sriovConfig();
  conf["verbsCheck"] = {{"mode", "require"}};
  auto c = check(nad(conf));
  EXPECT_FALSE(c.works) << all(c);
  EXPECT_NE(c.candidates[0].problem.find("verbs check (verbsCheck.mode require) fails"), std::string::npos) << all(c);
  EXPECT_NE(c.candidates[0].problem.find("INIT, not ACTIVE"), std::string::npos) << all(c);
  EXPECT_NE(c.candidates[0].problem.find("[CNI error 109]"), std::string::npos) << all(c);

  conf["verbsCheck"] = {{"mode", "warn"}};
  c = check(nad(conf));
  EXPECT_TRUE(c.works) << all(c);
  ASSERT_FALSE(c.candidates[0].warnings.empty());
  EXPECT_NE(c.candidates[0].warnings[0].find("INIT"), std::string::npos);
  EXPECT_NE(doctor::renderText(report_).find("warning: mlx5_1 port 1 is INIT"), std::string::npos)
      << doctor::renderText(report_);

  conf["verbsCheck"] = {{"mode", "off"}};
  verbs_.requests.clear();
  c = check(nad(conf));
  EXPECT_TRUE(c.candidates[0].warnings.empty());
}

// The rule ADD applies to a device without an RDMA device (or one the pod cannot see), in doctor.
TEST_F(ConfigCheckTest, VerbsCheckRequireRefusesADeviceWithoutRdmaDeviceAsAddDoes) {
  installIpamPlugin("fake");
  const int v3 = addVfLink("ibp59s0v3", "02:00:00:00:00:00:aa:03");
  sysfs_.addVf(kPf, 3, "0000:3b:00.4", "ibp59s0v3", "", v3);
  ASSERT_TRUE(sysfs_.ok()) << sysfs_.error();
  json conf = sriovConfig();
  conf["deviceID"] = "0000:3b:00.4";
  conf["verbsCheck"] = {{"mode", "require"}};
  auto c = check(nad(conf));
  ASSERT_EQ(c.candidates.size(), 1u) << all(c);
  EXPECT_FALSE(c.works) << all(c);
  const std::string& p = c.candidates[0].problem;
  EXPECT_NE(p.find("verbs check (verbsCheck.mode require) fails: deviceID = \"0000:3b:00.4\" (netdev ibp59s0v3, "
                   "PCI 0000:3b:00.4, driver mlx5_core) has no RDMA device: it is a VF of PF 0000:3b:00.0"),
            std::string::npos)
      << all(c);
  EXPECT_NE(p.find("modprobe mlx5_ib"), std::string::npos) << p;
  EXPECT_NE(p.find("[CNI error 109]"), std::string::npos) << p;

  conf["verbsCheck"] = {{"mode", "warn"}};
  c = check(nad(conf));
  EXPECT_TRUE(c.works) << all(c);
  ASSERT_EQ(c.candidates.size(), 1u);
  ASSERT_FALSE(c.candidates[0].warnings.empty());
  EXPECT_NE(c.candidates[0].warnings.back().find("has no RDMA device"), std::string::npos);

  conf["verbsCheck"] = {{"mode", "off"}};
  c = check(nad(conf));
  EXPECT_TRUE(c.works) << all(c);
  for (const auto& w : c.candidates[0].warnings) {
    EXPECT_EQ(w.find("RDMA device"), std::string::npos) << w;
  }

  // Exclusive mode (the fixture's) with rdmaIsolation false: mlx5_1 would stay in the host.
  conf["deviceID"] = kVf0;
  conf["rdmaIsolation"] = false;
  conf["verbsCheck"] = {{"mode", "require"}};
  c = check(nad(conf));
  EXPECT_FALSE(c.works) << all(c);
  EXPECT_NE(c.candidates[0].problem.find("RDMA device mlx5_1 of deviceID = \"0000:3b:00.1\""), std::string::npos)
      << all(c);
  EXPECT_NE(c.candidates[0].problem.find("rdmaIsolation is false"), std::string::npos) << all(c);
  conf.erase("rdmaIsolation");
  c = check(nad(conf));
  EXPECT_TRUE(c.works) << all(c);
}

TEST_F(ConfigCheckTest, IpoibParentIsResolvedLikeAdd) {
  installIpamPlugin("fake");
  json conf = sriovConfig();
  conf["mode"] = "ipoib";
  conf["master"] = "ibp59s0";
  auto c = check(conf.dump());
  EXPECT_TRUE(c.works) << all(c);
  ASSERT_EQ(c.candidates.size(), 1u);
  EXPECT_EQ(c.candidates[0].device, "master ibp59s0");
  EXPECT_TRUE(c.resourceName.empty());

  conf["master"] = "vf0";  // the fixture's plain netdev
  c = check(conf.dump());
  EXPECT_FALSE(c.works);
  EXPECT_NE(c.candidates[0].problem.find("not an IPoIB interface"), std::string::npos) << all(c);

  conf["master"] = "ibp59s0";
  conf["mtu"] = 9000;
  c = check(conf.dump());
  EXPECT_FALSE(c.works);
  EXPECT_NE(c.candidates[0].problem.find("mtu"), std::string::npos) << all(c);
}

TEST_F(ConfigCheckTest, ConfigErrorsAreTheOnesAddWouldGive) {
  json conf = sriovConfig();
  conf["linkState"] = "sometimes";
  auto c = check(nad(conf));
  EXPECT_FALSE(c.works);
  ASSERT_EQ(c.problems.size(), 1u) << all(c);
  EXPECT_NE(c.problems[0].what.find("ADD would refuse the config: "), std::string::npos);
  EXPECT_NE(c.problems[0].what.find("linkState"), std::string::npos) << all(c);
  EXPECT_NE(c.problems[0].what.find("[CNI error 7]"), std::string::npos) << all(c);
  EXPECT_TRUE(c.candidates.empty());
}

TEST_F(ConfigCheckTest, NadConfigListAndForeignTypes) {
  installIpamPlugin("fake");
  json list = {{"cniVersion", "1.1.0"},
               {"name", "ibnet-list"},
               {"plugins", json::array({json{{"type", "tuning"}}, sriovConfig()})}};
  list["plugins"][1].erase("cniVersion");
  list["plugins"][1].erase("name");
  auto c = check(nad(list));
  EXPECT_TRUE(c.works) << all(c);
  EXPECT_EQ(c.name, "ibnet-list") << "the list's name, as libcni passes it";

  list["plugins"].erase(1);
  c = check(nad(list));
  EXPECT_FALSE(c.works);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].what.find("no plugin of type ibcni (it has tuning)"), std::string::npos) << all(c);

  c = check(json{{"cniVersion", "1.0.0"}, {"name", "x"}, {"type", "macvlan"}}.dump());
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].what.find("type = \"macvlan\""), std::string::npos);

  c = check("apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\n");
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].what.find("not a JSON object (YAML is not read)"), std::string::npos);
  EXPECT_NE(c.problems[0].fix.find("kubectl get net-attach-def NAME -o json"), std::string::npos);
}

TEST_F(ConfigCheckTest, IpamPluginMissingOrOlderConfigVersions) {
  auto c = check(nad(sriovConfig()));
  EXPECT_FALSE(c.works) << "ipam.type fake is not in CNI_PATH";
  EXPECT_NE(all(c).find("ipam.type = \"fake\" is not installed in CNI_PATH"), std::string::npos) << all(c);

  c = check(nad(sriovConfig("0.4.0")));
  EXPECT_FALSE(c.works);
  EXPECT_NE(all(c).find("is not installed in CNI_PATH (" + cniPath_ + ")"), std::string::npos) << all(c);
  installIpamPlugin("fake");
  c = check(nad(sriovConfig("0.4.0")));
  EXPECT_TRUE(c.works) << all(c);
  EXPECT_NE(std::find(c.ok.begin(), c.ok.end(),
                      "IPAM plugin fake is installed (its STATUS is not asked: cniVersion 0.4.0 predates STATUS)"),
            c.ok.end());
}

TEST_F(ConfigCheckTest, NoVfsOnTheNodeAndNoResourceName) {
  installIpamPlugin("fake");
  nl_.setVfs(host_, pfIndex_, {});
  auto c = check(nad(sriovConfig()));
  EXPECT_FALSE(c.works);
  EXPECT_NE(all(c).find("no SR-IOV VF on this node for a device plugin to hand out as nvidia.com/mlx5_ib_vf"),
            std::string::npos)
      << all(c);

  nl_.setVfs(host_, pfIndex_, {nl::VfInfo{}});
  c = check(nad(sriovConfig(), ""));
  bool note = false;
  for (const auto& p : c.problems) {
    note = note || (p.informational && p.what.find("no resourceName annotation") != std::string::npos);
  }
  EXPECT_TRUE(note) << all(c);
}


namespace {

// An IPoIB config on the fixture's parent whose ipam is ibcni-ipam in cluster mode.
json clusterConfig(const json& cluster, const std::string& stateDir) {
  return json{{"cniVersion", "1.1.0"}, {"name", "ibnet"},  {"type", "ibcni"}, {"mode", "ipoib"},
              {"master", "ibp59s0"},  {"stateDir", stateDir},
              {"ipam", {{"type", "ibcni-ipam"}, {"ranges", json::array({json::array({{{"subnet", "10.56.0.0/24"}}})})},
                        {"cluster", cluster}}}};
}

ipam::PoolBlockRow row(const std::string& cidr, const std::string& holder, bool mine, const std::string& ledger) {
  ipam::PoolBlockRow r;
  r.cidr = cidr;
  r.key = cidr.substr(0, cidr.find('/')) + "-" + cidr.substr(cidr.find('/') + 1);
  r.set = 0;
  r.holder = holder;
  r.mine = mine;
  r.size = 16;
  r.ledgerState = ledger;
  return r;
}

std::string okLines(const doctor::ConfigReport& c) {
  std::string s;
  for (const auto& o : c.ok) {
    s += o + "\n";
  }
  return s;
}

}  // namespace

TEST_F(ConfigCheckTest, ClusterPoolReachedAndThisNodesBlocksAgree) {
  installIpamPlugin("fake");
  ipam::Request const* seen = nullptr;
  std::string seenPool;
  clusterPools_ = [&](const ipam::Request& r) -> cni::Result<ipam::PoolReport> {
    seen = &r;
    seenPool = (*r.settings)->cluster->pool;
    ipam::PoolReport p;
    p.pool = "ib-pool";
    p.backend = "etcd";
    p.endpoint = "http://10.0.0.1:2379";
    p.blockSize = 16;
    p.totalBlocks = "16";
    p.claimedBlocks = 3;
    p.freeBlocks = "13";
    p.perNode = {{"node-7", 2}, {"node-8", 1}};
    p.listTime = std::chrono::milliseconds(12);
    p.blocks = {row("10.56.0.0/28", "node-7", true, "owned"), row("10.56.0.16/28", "node-8", false, ""),
                row("10.56.0.32/28", "node-7", true, "owned")};
    return p;
  };
  libcurlProblem_ = [] { return std::string(); };
  auto c = check(clusterConfig({{"backend", "etcd"}, {"pool", "ib-pool"}, {"nodeName", "node-7"},
                                {"etcd", {{"endpoints", {"http://10.0.0.1:2379"}}}}}, stateDir_)
                     .dump());
  EXPECT_TRUE(c.works) << all(c);
  ASSERT_NE(seen, nullptr);
  EXPECT_EQ(seenPool, "ib-pool");
  const std::string ok = okLines(c);
  EXPECT_NE(ok.find("claims blocks as \"node-7\" (from ipam.cluster.nodeName)"), std::string::npos) << ok;
  EXPECT_NE(ok.find("libcurl loads"), std::string::npos) << ok;
  EXPECT_NE(ok.find("reaches http://10.0.0.1:2379: the pool's blocks listed in 12 ms (16 blocks of 16, 3 claimed by 2 "
                    "node(s), 13 free)"),
            std::string::npos)
      << ok;
  EXPECT_NE(ok.find("holds 2 block(s): 10.56.0.0/28, 10.56.0.32/28 (its ledger and the backend agree)"),
            std::string::npos)
      << ok;
  ASSERT_TRUE(c.cluster);
  EXPECT_TRUE(c.cluster->reachable);
  EXPECT_TRUE(c.cluster->agree);
  EXPECT_EQ(c.cluster->listMs, 12);
  EXPECT_EQ(c.cluster->backendBlocks, (std::vector<std::string>{"10.56.0.0/28", "10.56.0.32/28"}));
  EXPECT_EQ(c.cluster->ledgerBlocks, c.cluster->backendBlocks);

  // The JSON report carries the same, under config.cluster.
  auto j = json::parse(doctor::printDoctorReport(report_));
  const auto& k = j["config"]["cluster"];
  EXPECT_EQ(k["node"], "node-7");
  EXPECT_EQ(k["nodeSource"], "ipam.cluster.nodeName");
  EXPECT_EQ(k["libcurl"], "loads");
  EXPECT_EQ(k["reachable"], true);
  EXPECT_EQ(k["listMs"], 12);
  EXPECT_EQ(k["backendBlocks"], json({"10.56.0.0/28", "10.56.0.32/28"}));
  EXPECT_EQ(k["agree"], true);
  EXPECT_TRUE(k["kubeconfig"].is_null());
}

TEST_F(ConfigCheckTest, ClusterBackendDownIsAProblemNamingTheEndpoint) {
  installIpamPlugin("fake");
  clusterPools_ = [](const ipam::Request&) -> cni::Result<ipam::PoolReport> {
    return cni::fail(cni::Errc::kTryAgainLater,
                     "listing the blocks of pool \"ibnet\" (ipam.cluster.backend etcd): unreachable: "
                     "http://10.0.0.1:2379: connection refused");
  };
  auto c = check(clusterConfig({{"backend", "etcd"}, {"nodeName", "node-7"},
                                {"etcd", {{"endpoints", {"http://10.0.0.1:2379"}}}}}, stateDir_)
                     .dump());
  EXPECT_FALSE(c.works);
  ASSERT_TRUE(c.cluster);
  EXPECT_FALSE(c.cluster->reachable);
  EXPECT_EQ(c.cluster->listMs, -1);
  bool named = false;
  for (const auto& p : c.problems) {
    if (p.what.find("cannot list cluster pool \"ibnet\"") != std::string::npos && !p.informational) {
      named = p.what.find("[CNI error 11]") != std::string::npos &&
              p.fix.find("http://10.0.0.1:2379 is reachable from this node") != std::string::npos;
    }
  }
  EXPECT_TRUE(named) << all(c);
}

TEST_F(ConfigCheckTest, ClusterNodeNameFileLibcurlAndKubeconfigProblems) {
  installIpamPlugin("fake");
  nodeNameFile_ = cniPath_ + "/node-name";
  std::ofstream(nodeNameFile_) << "worker-3\n";
  libcurlProblem_ = [] { return std::string("cannot load libcurl.so.4: not found"); };
  int calls = 0;
  clusterPools_ = [&](const ipam::Request&) -> cni::Result<ipam::PoolReport> {
    ++calls;
    ipam::PoolReport p;
    p.endpoint = "https://10.0.0.1:6443";
    p.totalBlocks = "16";
    p.freeBlocks = "15";
    p.claimedBlocks = 1;
    p.blocks = {row("10.56.0.0/28", "worker-3", true, "")};
    p.disagreements = {{"10.56.0.0-28", "absent", "this node"}};
    return p;
  };
  auto c = check(clusterConfig({{"kubernetes", {{"kubeconfig", cniPath_ + "/missing.kubeconfig"}}}}, stateDir_).dump());
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(c.cluster);
  EXPECT_EQ(c.cluster->node, "worker-3");
  EXPECT_EQ(c.cluster->nodeSource, nodeNameFile_);
  EXPECT_EQ(c.cluster->backend, "kubernetes");
  EXPECT_NE(c.cluster->kubeconfig.find("missing.kubeconfig"), std::string::npos) << c.cluster->kubeconfig;
  EXPECT_FALSE(c.cluster->agree);
  std::string problems = all(c);
  EXPECT_NE(problems.find("libcurl cannot be loaded: cannot load libcurl.so.4"), std::string::npos) << problems;
  EXPECT_NE(problems.find("problem: ipam.cluster.kubernetes.kubeconfig: kubeconfig \"" + cniPath_ +
                          "/missing.kubeconfig\": no such file"),
            std::string::npos)
      << problems;
  // The ledger lacking a block the backend gives this node is a note (the next pass adopts it).
  bool note = false;
  for (const auto& p : c.problems) {
    note = note || (p.informational && p.what.find("ledger says absent, the backend says this node") != std::string::npos);
  }
  EXPECT_TRUE(note) << problems;
  EXPECT_FALSE(c.works);  // libcurl and the kubeconfig are real problems
}

TEST_F(ConfigCheckTest, NodeLocalIpamHasNoClusterCheck) {
  installIpamPlugin("fake");
  int calls = 0;
  clusterPools_ = [&](const ipam::Request&) -> cni::Result<ipam::PoolReport> {
    ++calls;
    return ipam::PoolReport{};
  };
  json conf = clusterConfig({}, stateDir_);
  conf["ipam"].erase("cluster");
  auto c = check(conf.dump());
  EXPECT_EQ(calls, 0);
  EXPECT_FALSE(c.cluster);
}

// ---- guidPool ----

json guidPoolConfig(const std::string& stateDir, const json& cluster = nullptr) {
  json c = {{"cniVersion", "1.1.0"}, {"name", "ibnet"}, {"type", "ibcni"}, {"mode", "sriov"}, {"stateDir", stateDir},
            {"guidPool", {{"range", "02:00:00:00:00:00:aa:00-02:00:00:00:00:00:aa:ff"}, {"pool", "gpool"}}}};
  if (!cluster.is_null()) {
    c["guidPool"]["cluster"] = cluster;
  }
  return c;
}

// The pool is described, a VF without a GUID is accepted without one being asked for (the pool
// gives it), and each VF attached with a pool GUID is checked against its record and the pool.
TEST_F(ConfigCheckTest, GuidPoolIsDescribedAndEachVfCarryingAPoolGuidIsChecked) {
  FakeGuidPools guids;
  deps_.guids = &guids;
  config::GuidPoolConf pool;
  pool.pool = "gpool";
  state::AttachmentRecord rec;
  rec.network = "ibnet";
  rec.containerId = "c1";
  rec.ifName = "net1";
  rec.hostName = "ibp59s0v0";
  rec.pfPci = net::PciAddress::parse(kPf);
  rec.vfIndex = 0;
  rec.guid = "02:00:00:00:00:00:aa:00";  // VF 0's GUID in the PF's table
  rec.guidPool = "gpool";
  rec.guidPoolDir = guids.storeDirOf(pool);
  ASSERT_TRUE(state::FileAttachmentStore(stateDir_).save(rec));
  guids.stores[rec.guidPoolDir][{"ibnet", "c1", "net1"}] = *net::Guid::parse(rec.guid);

  auto c = check(nad(guidPoolConfig(stateDir_)));
  const std::string ok = okLines(c);
  EXPECT_NE(ok.find("guidPool \"gpool\": GUIDs 02:00:00:00:00:00:aa:00-02:00:00:00:00:00:aa:ff in blocks of 256, "
                    "assigned when-unset, node-local, this node's store /run/ibcni-ipam/.guid/gpool"),
            std::string::npos)
      << ok;
  EXPECT_NE(ok.find("VF 0 of PF 0000:3b:00.0 (c1/net1) carries GUID 02:00:00:00:00:00:aa:00 of guidPool gpool"),
            std::string::npos)
      << ok;
  for (const auto& d : c.candidates) {
    if (d.device.find(kVf1) != std::string::npos) {
      EXPECT_TRUE(d.works && !d.needsGuid) << d.device << ": the pool gives the VF without a GUID one";
    }
  }
  ASSERT_TRUE(c.guidPool);
  ASSERT_EQ(c.guidPool->vfs.size(), 1u);
  EXPECT_TRUE(c.guidPool->vfs[0].ok);
  EXPECT_EQ(json::parse(doctor::printDoctorReport(report_))["config"]["guidPool"]["vfs"][0]["portGuid"],
            "02:00:00:00:00:00:aa:00");

  // The VF's GUID changed behind ibcni's back, and the pool lost its allocation: both are named.
  guids.stores[rec.guidPoolDir].clear();
  std::vector<nl::VfInfo> vfs;
  for (std::uint32_t i = 0; i < 3; ++i) {
    vfs.push_back(*nl_.vf(host_, pfIndex_, i));
  }
  vfs[0].portGuid = net::Guid{0x020000000000bb00ULL};
  nl_.setVfs(host_, pfIndex_, vfs);
  c = check(nad(guidPoolConfig(stateDir_)));
  EXPECT_FALSE(c.works);
  const std::string problems = all(c);
  EXPECT_NE(problems.find("VF 0 of PF 0000:3b:00.0 (c1/net1) has port GUID 02:00:00:00:00:00:bb:00, but its record "
                          "says 02:00:00:00:00:00:aa:00 (from guidPool gpool)"),
            std::string::npos)
      << problems;
  EXPECT_NE(problems.find("guidPool gpool holds no GUID for c1/net1"), std::string::npos) << problems;
}

TEST_F(ConfigCheckTest, AClusterGuidPoolIsCheckedAsIpamClusterIs) {
  FakeGuidPools guids;
  deps_.guids = &guids;
  std::string seenPool;
  guidPools_ = [&](const config::GuidPoolConf& pool, const std::string&) -> cni::Result<ipam::PoolReport> {
    seenPool = pool.pool;
    return cni::fail(cni::Errc::kTryAgainLater, "etcd http://10.0.0.1:2379 is unreachable");
  };
  auto c = check(nad(guidPoolConfig(
      stateDir_, {{"backend", "etcd"}, {"nodeName", "node-7"}, {"etcd", {{"endpoints", {"http://10.0.0.1:2379"}}}}})));
  EXPECT_EQ(seenPool, "gpool");
  const std::string ok = okLines(c);
  EXPECT_NE(ok.find("GUID pool \"gpool\" (etcd): this node claims blocks as \"node-7\" (from guidPool.cluster.nodeName)"),
            std::string::npos)
      << ok;
  EXPECT_NE(all(c).find("this node cannot list GUID pool \"gpool\" (etcd)'s blocks"), std::string::npos) << all(c);
  ASSERT_TRUE(c.guidPool && c.guidPool->cluster);
  EXPECT_FALSE(c.guidPool->cluster->reachable);
}

}  // namespace
}  // namespace ibcni::testing
