// SPDX-License-Identifier: Apache-2.0
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

using AddTest = PluginTest;

TEST_F(AddTest, MovesRenamesConfiguresAndRecords) {
  auto r = add(config());
  auto link = nl_.findLink(pod_, "net1");
  ASSERT_TRUE(link) << "net1 is in the pod";
  EXPECT_TRUE(link->adminUp);
  EXPECT_EQ(link->mtu, 4000u);
  EXPECT_EQ(link->alias, "ibcni:vf0") << "the host name travels with the device";
  EXPECT_FALSE(nl_.findLink(host_, "vf0")) << "vf0 left the host";
  auto addrs = nl_.addresses(pod_);
  ASSERT_EQ(addrs.size(), 1u);
  EXPECT_EQ(addrs[0].prefix.toString(), "10.1.2.3/24");
  bool routed = false;
  for (const auto& rt : nl_.routes(pod_)) {
    routed |= rt.dst.toString() == "192.168.0.0/16" && rt.gw && rt.gw->toString() == "10.1.2.1";
  }
  EXPECT_TRUE(routed) << "a route without gw uses the gateway of its family";

  EXPECT_EQ(r["cniVersion"], "1.0.0");
  ASSERT_EQ(r["interfaces"].size(), 1u);
  EXPECT_EQ(r["interfaces"][0]["name"], "net1");
  EXPECT_EQ(r["interfaces"][0]["sandbox"], kPodPath);
  EXPECT_EQ(r["interfaces"][0]["mac"], link->mac.text);
  EXPECT_EQ(r["ips"][0]["address"], "10.1.2.3/24");
  EXPECT_EQ(r["ips"][0]["interface"], 0);

  auto recs = records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].hostName, "vf0");
  EXPECT_EQ(recs[0].hostAlias, "admin note");
  EXPECT_TRUE(recs[0].hostUp);
  EXPECT_EQ(recs[0].hostMtu, 1500u);
  EXPECT_EQ(recs[0].deviceKey, "netdev-vf0");
  EXPECT_EQ(ipam_.allocations.size(), 1u);
  int moves = 0;
  for (auto op : nl_.callOps()) {
    moves += op == FakeNetlink::Op::kMoveLink ? 1 : 0;
  }
  EXPECT_EQ(moves, 1) << "one namespace move: the kernel makes each one costly";
}

class AddPerVersion : public PluginTest, public ::testing::WithParamInterface<cni::SpecVersion> {};

TEST_P(AddPerVersion, ResultInTheRequestedFormat) {
  std::string v(cni::toString(GetParam()));
  auto r = add(config(v));
  EXPECT_EQ(r["cniVersion"], v);
  EXPECT_EQ(r["ips"][0].contains("version"), cni::hasIpVersionField(GetParam()));
  EXPECT_EQ(r["interfaces"][0].contains("mtu"), cni::hasV11Fields(GetParam()));
  if (cni::hasCheck(GetParam())) {
    auto check = config(v);
    check["prevResult"] = r;
    auto out = run("CHECK", check);
    EXPECT_EQ(out.exitCode, 0) << out.stdoutText;
  }
  EXPECT_EQ(run("DEL", config(v)).exitCode, 0);
  EXPECT_EQ(run("DEL", config(v)).exitCode, 0);
  EXPECT_TRUE(nl_.findLink(host_, "vf0"));
}

INSTANTIATE_TEST_SUITE_P(AllVersions, AddPerVersion, ::testing::ValuesIn(cni::kSupportedVersions),
                         [](const auto& p) {
                           std::string s(cni::toString(p.param));
                           std::replace(s.begin(), s.end(), '.', '_');
                           return "v" + s;
                         });

TEST_F(AddTest, ChainedPrevResultIsPassedThroughWithOurInterfaceAppended) {
  auto conf = config();
  conf["prevResult"] = {{"cniVersion", "1.0.0"},
                        {"interfaces", {{{"name", "eth0"}, {"sandbox", kPodPath}}}},
                        {"ips", {{{"address", "10.0.0.5/24"}, {"interface", 0}}}},
                        {"dns", {{"nameservers", {"10.0.0.10"}}}}};
  auto r = add(conf);
  ASSERT_EQ(r["interfaces"].size(), 2u);
  EXPECT_EQ(r["interfaces"][0]["name"], "eth0");
  EXPECT_EQ(r["interfaces"][1]["name"], "net1");
  ASSERT_EQ(r["ips"].size(), 2u);
  EXPECT_EQ(r["ips"][0]["interface"], 0);
  EXPECT_EQ(r["ips"][1]["interface"], 1);
  EXPECT_EQ(r["dns"]["nameservers"][0], "10.0.0.10");
}

TEST_F(AddTest, NoIpamMeansLayer2Only) {
  auto conf = config();
  conf["ipam"] = json::object();
  auto r = add(conf);
  EXPECT_FALSE(r.contains("ips"));
  EXPECT_TRUE(ipam_.calls.empty());
  EXPECT_TRUE(nl_.addresses(pod_).empty());
}

TEST_F(AddTest, DeviceIdResolvesThroughSysfs) {
  nl::Link vf;
  vf.name = "ib2";
  int idx = nl_.addLink(host_, vf);
  sysfs_.addPciNetdev("0000:af:06.1", "ib2", idx);
  auto conf = config("1.1.0");
  conf.erase("device");
  conf["runtimeConfig"] = {{"deviceID", "0000:AF:06.1"}};
  auto r = add(conf);
  EXPECT_EQ(r["interfaces"][0]["pciID"], "0000:af:06.1");
  EXPECT_TRUE(nl_.findLink(pod_, "net1"));
  EXPECT_EQ(records().at(0).deviceKey, "pci-0000:af:06.1");
}

TEST_F(AddTest, DeviceIdProblemsAre100) {
  sysfs_.addPciFunction("0000:af:06.2");
  sysfs_.addPciNetdev("0000:af:06.3", "a0", 50).addPciNetdev("0000:af:06.3", "a1", 51);
  for (const auto& [id, words] : std::vector<std::pair<std::string, std::string>>{
           {"0000:af:07.1", "no such PCI function"},
           {"0000:af:06.2", "has no network interface"},
           {"0000:af:06.3", "several network interfaces"}}) {
    auto conf = config();
    conf.erase("device");
    conf["deviceID"] = id;
    auto e = errorOf(run("ADD", conf));
    EXPECT_EQ(e["code"], 100) << id;
    EXPECT_NE(e["msg"].get<std::string>().find(words), std::string::npos) << e["msg"];
    EXPECT_NE(e["msg"].get<std::string>().find(id), std::string::npos) << e["msg"];
  }
  EXPECT_TRUE(ipam_.calls.empty());
}

TEST_F(AddTest, MissingDeviceIs100AndAttachedDeviceIs101) {
  auto conf = config();
  conf["device"] = "nosuch";
  EXPECT_EQ(errorOf(run("ADD", conf))["code"], 100);
  add(config());
  auto again = errorOf(run("ADD", config(), {{"CNI_CONTAINERID", "c2"}}));
  EXPECT_EQ(again["code"], 101);
  EXPECT_NE(again["msg"].get<std::string>().find("attached to container c1"), std::string::npos) << again["msg"];
}

TEST_F(AddTest, NameClashInPodIs103AndChangesNothing) {
  nl::Link other;
  other.name = "net1";
  nl_.addLink(pod_, other);
  const auto host = snapshot(host_);
  const auto pod = snapshot(pod_);
  auto e = errorOf(run("ADD", config()));
  EXPECT_EQ(e["code"], 103);
  EXPECT_EQ(snapshot(host_), host);
  EXPECT_EQ(snapshot(pod_), pod);
  EXPECT_TRUE(records().empty());
}

TEST_F(AddTest, AddTwiceIs103AndOneDelCleansUp) {
  add(config());
  EXPECT_EQ(errorOf(run("ADD", config()))["code"], 103);
  EXPECT_EQ(ipam_.allocations.size(), 1u);
  EXPECT_EQ(run("DEL", config()).exitCode, 0);
  EXPECT_TRUE(ipam_.allocations.empty());
  EXPECT_TRUE(nl_.findLink(host_, "vf0"));
}

TEST_F(AddTest, MacCapabilityOnEthernetAndRefusedOnInfiniband) {
  auto conf = config();
  conf["runtimeConfig"] = {{"mac", "0a:58:0a:01:02:03"}};
  auto r = add(conf);
  EXPECT_EQ(nl_.findLink(pod_, "net1")->mac.text, "0a:58:0a:01:02:03");
  EXPECT_EQ(r["interfaces"][0]["mac"], "0a:58:0a:01:02:03");
  ASSERT_EQ(run("DEL", config()).exitCode, 0);
  EXPECT_NE(nl_.findLink(host_, "vf0")->mac.text, "0a:58:0a:01:02:03") << "DEL restores the MAC";

  nl::Link ib;
  ib.name = "ib1";
  ib.arpType = 32;
  ib.mac = *net::HwAddress::parse("00:00:01:07:fe:80:00:00:00:00:00:00:c2:11:22:33:44:55:66:77");
  nl_.addLink(host_, ib);
  conf["device"] = "ib1";
  const auto before = snapshot(host_);
  auto e = errorOf(run("ADD", conf, {{"CNI_CONTAINERID", "c9"}}));
  EXPECT_EQ(e["code"], 7);
  EXPECT_NE(e["msg"].get<std::string>().find("infinibandGUID"), std::string::npos);
  EXPECT_EQ(snapshot(host_), before);
}

TEST_F(AddTest, LockHeldElsewhereIs11) {
  auto held = os::FileLock::acquire(stateDir_ + "/locks/netdev-vf0.lock", std::chrono::milliseconds(10));
  ASSERT_TRUE(held);
  auto e = errorOf(run("ADD", config()));
  EXPECT_EQ(e["code"], 11);
  EXPECT_TRUE(nl_.findLink(host_, "vf0"));
}

// Every mutation of ADD failing in turn: the host, the pod and the IPAM end exactly as they began.
struct FailPoint {
  FakeNetlink::Op op;
  int nth;
  const char* name;
};

class AddRollback : public PluginTest, public ::testing::WithParamInterface<FailPoint> {};

TEST_P(AddRollback, FailureLeavesEverythingAsItWas) {
  const auto host = snapshot(host_);
  const auto pod = snapshot(pod_);
  nl_.failOn(GetParam().op, EBUSY, GetParam().nth, "injected");
  auto conf = config();
  conf["runtimeConfig"] = {{"mac", "0a:58:0a:01:02:03"}};
  auto out = run("ADD", conf);
  ASSERT_EQ(out.exitCode, 1) << "the injected failure must fail ADD";
  auto e = errorOf(out);
  EXPECT_GE(e["code"].get<int>(), 100) << out.stdoutText;
  EXPECT_NE(e["details"].get<std::string>().find("EBUSY"), std::string::npos) << out.stdoutText;
  EXPECT_EQ(snapshot(host_), host);
  EXPECT_EQ(snapshot(pod_), pod);
  EXPECT_TRUE(ipam_.allocations.empty());
  EXPECT_TRUE(records().empty());
  EXPECT_EQ(run("DEL", config()).exitCode, 0) << "the runtime's DEL after a failed ADD succeeds";
  EXPECT_EQ(snapshot(host_), host);
}

INSTANTIATE_TEST_SUITE_P(
    EveryStep, AddRollback,
    ::testing::Values(FailPoint{FakeNetlink::Op::kSetLinkUp, 1, "hostDown"},
                      FailPoint{FakeNetlink::Op::kSetAlias, 1, "alias"},
                      FailPoint{FakeNetlink::Op::kRenameLink, 1, "renameToTemporary"},
                      FailPoint{FakeNetlink::Op::kMoveLink, 1, "moveToPod"},
                      FailPoint{FakeNetlink::Op::kRenameLink, 2, "renameInPod"},
                      FailPoint{FakeNetlink::Op::kSetMtu, 1, "mtu"},
                      FailPoint{FakeNetlink::Op::kSetHwAddress, 1, "mac"},
                      FailPoint{FakeNetlink::Op::kSetLinkUp, 2, "podUp"},
                      FailPoint{FakeNetlink::Op::kAddAddress, 1, "address"},
                      FailPoint{FakeNetlink::Op::kAddRoute, 1, "route"}),
    [](const auto& p) { return std::string(p.param.name); });

TEST_F(AddTest, IpamFailureRollsBackTheDevice) {
  const auto host = snapshot(host_);
  ipam_.failures["ADD"] = cni::Error{cni::Errc::kTryAgainLater, "pool busy", ""};
  auto e = errorOf(run("ADD", config()));
  EXPECT_EQ(e["code"], 11) << "the IPAM plugin's code is kept";
  EXPECT_EQ(snapshot(host_), host);
  EXPECT_TRUE(records().empty());
}

TEST_F(AddTest, RecordWriteFailureRollsBackEverything) {
  const auto host = snapshot(host_);
  struct FailingStore : state::AttachmentStore {
    explicit FailingStore(const std::string& dir) : real(dir) {}
    os::SysResult<void> save(const state::AttachmentRecord&) override { return os::sysFail(ENOSPC, "write"); }
    os::SysResult<std::optional<state::AttachmentRecord>> load(const std::string& n, const std::string& c,
                                                               const std::string& i) override {
      return real.load(n, c, i);
    }
    os::SysResult<void> remove(const std::string& n, const std::string& c, const std::string& i) override {
      return real.remove(n, c, i);
    }
    os::SysResult<std::vector<state::AttachmentRecord>> list(const std::string& n) override { return real.list(n); }
    state::FileAttachmentStore real;
  };
  deps_.makeStore = [](const std::string& dir) -> std::unique_ptr<state::AttachmentStore> {
    return std::make_unique<FailingStore>(dir);
  };
  auto e = errorOf(run("ADD", config()));
  EXPECT_EQ(e["code"], 106);
  EXPECT_NE(e["details"].get<std::string>().find("ENOSPC"), std::string::npos);
  EXPECT_EQ(snapshot(host_), host);
  EXPECT_TRUE(ipam_.allocations.empty());
}

}  // namespace
}  // namespace ibcni::testing
