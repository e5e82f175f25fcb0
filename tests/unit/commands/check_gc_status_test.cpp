// SPDX-License-Identifier: Apache-2.0
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

class CheckTest : public PluginTest {
 protected:
  json checkConf() {
    auto c = config();
    c["prevResult"] = result_;
    return c;
  }
  void SetUp() override {
    PluginTest::SetUp();
    result_ = add(config());
  }
  json result_;
};

TEST_F(CheckTest, PassesRightAfterAdd) {
  auto out = run("CHECK", checkConf());
  EXPECT_EQ(out.exitCode, 0) << out.stdoutText;
  EXPECT_EQ(out.stdoutText, "");
  EXPECT_EQ(ipam_.calls.back(), "CHECK c1 net1");
}

TEST_F(CheckTest, NeedsPrevResult) {
  auto e = errorOf(run("CHECK", config()));
  EXPECT_EQ(e["code"], 7);
  EXPECT_NE(e["msg"].get<std::string>().find("prevResult"), std::string::npos);
}

TEST_F(CheckTest, DetectsEachKindOfDrift) {
  const int idx = nl_.findLink(pod_, "net1")->index;
  ASSERT_TRUE(nl_.deleteAddress(pod_, idx, *net::IpPrefix::parse("10.1.2.3/24")));
  auto e = errorOf(run("CHECK", checkConf()));
  EXPECT_EQ(e["code"], 107);
  EXPECT_NE(e["msg"].get<std::string>().find("10.1.2.3/24"), std::string::npos) << e["msg"];
}

TEST_F(CheckTest, DetectsDownLinkAndMtuChange) {
  const int idx = nl_.findLink(pod_, "net1")->index;
  ASSERT_TRUE(nl_.setMtu(pod_, idx, 1500));
  EXPECT_NE(errorOf(run("CHECK", checkConf()))["msg"].get<std::string>().find("mtu"), std::string::npos);
  ASSERT_TRUE(nl_.setMtu(pod_, idx, 4000));
  ASSERT_TRUE(nl_.setLinkUp(pod_, idx, false));
  auto e = errorOf(run("CHECK", checkConf()));
  EXPECT_EQ(e["code"], 107);
}

TEST_F(CheckTest, DetectsMissingRoute) {
  const int idx = nl_.findLink(pod_, "net1")->index;
  nl::Route r;
  r.dst = *net::IpPrefix::parse("192.168.0.0/16");
  r.ifIndex = idx;
  ASSERT_TRUE(nl_.deleteRoute(pod_, r));
  auto e = errorOf(run("CHECK", checkConf()));
  EXPECT_EQ(e["code"], 107);
  EXPECT_NE(e["msg"].get<std::string>().find("192.168.0.0/16"), std::string::npos);
}

TEST_F(CheckTest, DetectsMissingInterfaceAndMissingRecord) {
  auto other = checkConf();
  auto e = errorOf(run("CHECK", other, {{"CNI_CONTAINERID", "c2"}}));
  EXPECT_EQ(e["code"], 107) << "no record for c2";
  nl_.removeLink(pod_, nl_.findLink(pod_, "net1")->index);
  auto gone = errorOf(run("CHECK", checkConf()));
  EXPECT_EQ(gone["code"], 107);
  EXPECT_NE(gone["msg"].get<std::string>().find("missing"), std::string::npos);
}

TEST_F(CheckTest, FindsOurInterfaceByNameNotPosition) {
  auto c = checkConf();
  c["prevResult"]["interfaces"].insert(c["prevResult"]["interfaces"].begin(),
                                      json::object({{"name", "eth0"}, {"sandbox", kPodPath}}));
  c["prevResult"]["ips"][0]["interface"] = 1;
  EXPECT_EQ(run("CHECK", c).exitCode, 0);
}

TEST_F(CheckTest, IpamCheckFailureIsReported) {
  ipam_.allocations.clear();
  EXPECT_EQ(run("CHECK", checkConf()).exitCode, 1);
}

using GcTest = PluginTest;

TEST_F(GcTest, ReleasesOnlyStaleAttachments) {
  nl::Link vf1;
  vf1.name = "vf1";
  nl_.addLink(host_, vf1);
  add(config("1.1.0"));
  auto second = config("1.1.0");
  second["device"] = "vf1";
  netns_.addNetns("/var/run/netns/pod2");
  add(second, {{"CNI_CONTAINERID", "c2"}, {"CNI_NETNS", "/var/run/netns/pod2"}});
  auto gc = config("1.1.0");
  gc["cni.dev/valid-attachments"] = {{{"containerID", "c1"}, {"ifname", "net1"}}};
  auto out = run("GC", gc, {{"CNI_CONTAINERID", ""}, {"CNI_NETNS", ""}, {"CNI_IFNAME", ""}});
  ASSERT_EQ(out.exitCode, 0) << out.stdoutText;
  EXPECT_TRUE(nl_.findLink(host_, "vf1")) << "c2's device is back";
  EXPECT_TRUE(nl_.findLink(pod_, "net1")) << "c1 is untouched";
  auto recs = records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].containerId, "c1");
  EXPECT_EQ(ipam_.calls.back(), "GC  ") << "GC is passed on to IPAM";
}

TEST_F(GcTest, NoListMeansEverythingIsStale) {
  add(config("1.1.0"));
  ASSERT_EQ(run("GC", config("1.1.0")).exitCode, 0);
  EXPECT_TRUE(nl_.findLink(host_, "vf0"));
  EXPECT_TRUE(records().empty());
}

TEST_F(GcTest, IpamGcErrorIsReportedAfterCleanup) {
  add(config("1.1.0"));
  ipam_.failures["GC"] = cni::Error{cni::Errc::kIpamFailure, "gc failed", ""};
  auto e = errorOf(run("GC", config("1.1.0")));
  EXPECT_EQ(e["code"], 104);
  EXPECT_TRUE(records().empty()) << "stale attachments were still released";
}

using StatusTest = PluginTest;

TEST_F(StatusTest, ReadyWhenDeviceStateDirAndIpamAreThere) {
  char tmpl[] = "/tmp/ibcni-cnipath-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string bin = std::string(tmpl) + "/fake";
  std::ofstream(bin) << "#!/bin/sh\n";
  ::chmod(bin.c_str(), 0755);
  auto out = run("STATUS", config("1.1.0"), {{"CNI_PATH", tmpl}});
  EXPECT_EQ(out.exitCode, 0) << out.stdoutText;
  EXPECT_EQ(ipam_.calls.back(), "STATUS  ") << "STATUS is passed on to IPAM";
  ipam_.failures["STATUS"] = cni::Error{cni::Errc::kPluginNotAvailable, "pool empty", ""};
  EXPECT_EQ(errorOf(run("STATUS", config("1.1.0"), {{"CNI_PATH", tmpl}}))["code"], 50);
  std::filesystem::remove_all(tmpl);
}

TEST_F(StatusTest, MissingPiecesAre50) {
  auto conf = config("1.1.0");
  conf["ipam"] = json::object();
  conf["device"] = "nosuch";
  auto e = errorOf(run("STATUS", conf));
  EXPECT_EQ(e["code"], 50);
  EXPECT_NE(e["msg"].get<std::string>().find("nosuch"), std::string::npos);
  conf["device"] = "vf0";
  conf["stateDir"] = "/proc/ibcni-not-writable";
  EXPECT_EQ(errorOf(run("STATUS", conf))["code"], 50);
}

}  // namespace
}  // namespace ibcni::testing
