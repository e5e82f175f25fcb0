// SPDX-License-Identifier: Apache-2.0
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

using DelTest = PluginTest;

TEST_F(DelTest, RestoresTheHostExactly) {
  const auto host = snapshot(host_);
  const auto pod = snapshot(pod_);
  add(config());
  auto out = run("DEL", config());
  ASSERT_EQ(out.exitCode, 0) << out.stdoutText;
  EXPECT_EQ(out.stdoutText, "") << "DEL prints nothing on success";
  EXPECT_EQ(snapshot(host_), host) << "name, MTU, up state and alias are back";
  EXPECT_EQ(snapshot(pod_), pod);
  EXPECT_TRUE(ipam_.allocations.empty());
  EXPECT_TRUE(records().empty());
}

TEST_F(DelTest, TwiceAndWithoutAddSucceed) {
  add(config());
  ASSERT_EQ(run("DEL", config()).exitCode, 0);
  auto calls = ipam_.calls.size();
  EXPECT_EQ(run("DEL", config()).exitCode, 0);
  EXPECT_EQ(ipam_.calls.size(), calls + 1) << "IPAM DEL runs every time";
  auto fresh = run("DEL", config(), {{"CNI_CONTAINERID", "never-added"}});
  EXPECT_EQ(fresh.exitCode, 0) << fresh.stdoutText;
}

TEST_F(DelTest, NetnsGoneStillReleasesIpamAndRecord) {
  add(config());
  // A virtual device dies with its namespace.
  nl_.removeLink(pod_, nl_.findLink(pod_, "net1")->index);
  netns_.removeNetns(kPodPath);
  auto out = run("DEL", config());
  EXPECT_EQ(out.exitCode, 0) << out.stdoutText;
  EXPECT_TRUE(ipam_.allocations.empty());
  EXPECT_TRUE(records().empty());
}

TEST_F(DelTest, EmptyNetnsStillReleasesIpamAndRestoresDeviceIfBack) {
  add(config());
  auto out = run("DEL", config(), {{"CNI_NETNS", ""}});
  EXPECT_EQ(out.exitCode, 0) << out.stdoutText;
  EXPECT_TRUE(ipam_.allocations.empty());
  // The record knows the pod's netns, so the device is brought back even without CNI_NETNS.
  EXPECT_TRUE(nl_.findLink(host_, "vf0"));
}

TEST_F(DelTest, DeviceReturnedByTheKernelUnderThePodNameIsRenamed) {
  const auto host = snapshot(host_);
  add(config());
  // The pod's namespace is destroyed: the kernel moves the physical device back to the host under
  // the name it had in the pod.
  ASSERT_TRUE(nl_.moveLink(pod_, nl_.findLink(pod_, "net1")->index, host_));
  netns_.removeNetns(kPodPath);
  ASSERT_EQ(run("DEL", config()).exitCode, 0);
  EXPECT_EQ(snapshot(host_), host);
}

TEST_F(DelTest, NoRecordButMarkedDeviceInPodIsRecovered) {
  add(config());
  std::filesystem::remove_all(stateDir_ + "/attachments");
  auto out = run("DEL", config());
  EXPECT_EQ(out.exitCode, 0) << out.stdoutText;
  auto back = nl_.findLink(host_, "vf0");
  ASSERT_TRUE(back) << "restored under the name its alias carries";
  EXPECT_FALSE(nl_.findLink(pod_, "net1"));
}

TEST_F(DelTest, CorruptRecordDoesNotBlockDel) {
  add(config());
  state::FileAttachmentStore store(stateDir_);
  std::ofstream(store.pathOf("ibnet", "c1", "net1"), std::ios::trunc) << "{garbage";
  EXPECT_EQ(run("DEL", config()).exitCode, 0);
  EXPECT_TRUE(nl_.findLink(host_, "vf0"));
  EXPECT_FALSE(std::filesystem::exists(store.pathOf("ibnet", "c1", "net1")));
}

TEST_F(DelTest, IpamFailureIsReportedAfterTheDeviceIsBackAndRetryWorks) {
  add(config());
  ipam_.failures["DEL"] = cni::Error{cni::Errc::kTryAgainLater, "ipam down", ""};
  auto e = errorOf(run("DEL", config()));
  EXPECT_EQ(e["code"], 11);
  EXPECT_TRUE(nl_.findLink(host_, "vf0")) << "the device is returned even though IPAM failed";
  EXPECT_EQ(records().size(), 1u) << "the record stays for the retry";
  ipam_.failures.clear();
  EXPECT_EQ(run("DEL", config()).exitCode, 0);
  EXPECT_TRUE(ipam_.allocations.empty());
  EXPECT_TRUE(records().empty());
}

TEST_F(DelTest, HostNameTakenKeepsDeviceInPodAndReportsIt) {
  add(config());
  nl::Link squatter;
  squatter.name = "vf0";
  nl_.addLink(host_, squatter);
  auto e = errorOf(run("DEL", config()));
  EXPECT_EQ(e["code"], 102);
  EXPECT_NE(e["msg"].get<std::string>().find("vf0"), std::string::npos) << e["msg"];
  EXPECT_TRUE(nl_.findLink(pod_, "net1")) << "not stranded in a temporary namespace";
  EXPECT_EQ(records().size(), 1u);
}

TEST_F(DelTest, RecordOfAnUnknownModeIsReportedNotGuessed) {
  add(config());
  state::FileAttachmentStore store(stateDir_);
  auto rec = *store.load("ibnet", "c1", "net1");
  rec->mode = "from-the-future";
  ASSERT_TRUE(store.save(*rec));
  auto e = errorOf(run("DEL", config()));
  EXPECT_EQ(e["code"], 106);
  EXPECT_NE(e["msg"].get<std::string>().find("from-the-future"), std::string::npos);
  EXPECT_TRUE(ipam_.allocations.empty()) << "IPAM is released all the same";
  EXPECT_EQ(records().size(), 1u) << "the record stays for the ibcni that understands it";
}

TEST_F(DelTest, TwoAttachmentsAreIndependent) {
  nl::Link vf1;
  vf1.name = "vf1";
  nl_.addLink(host_, vf1);
  add(config());
  auto second = config();
  second["device"] = "vf1";
  ipam_.result.ips[0].address = *net::IpPrefix::parse("10.1.2.4/24");
  ipam_.result.routes.clear();
  add(second, {{"CNI_IFNAME", "net2"}});
  ASSERT_EQ(run("DEL", config()).exitCode, 0);
  EXPECT_TRUE(nl_.findLink(pod_, "net2"));
  EXPECT_TRUE(ipam_.allocations.contains({"c1", "net2"}));
  EXPECT_EQ(records().size(), 1u);
}

}  // namespace
}  // namespace ibcni::testing
