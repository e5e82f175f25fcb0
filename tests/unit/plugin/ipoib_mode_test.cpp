// SPDX-License-Identifier: Apache-2.0
// ipoib mode through the plugin's verbs over the fake netlink: an IPoIB parent, children created,
// moved, named, checked and deleted, and every failure undone.
#include <gtest/gtest.h>

#include "plugin_fixture.h"

namespace ibcni::testing {
namespace {

using Op = FakeNetlink::Op;

class IpoibModeTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    nl::Link ib0 = fakeLink("ib0", "ipoib");
    ib0.arpType = 32;
    ib0.mtu = 2044;
    ib0.mac = *net::HwAddress::parse("80:00:00:48:fe:80:00:00:00:00:00:00:02:00:00:00:00:00:00:01");
    ib0.ipoib = nl::IpoibInfo{0xffff, nl::IpoibMode::kDatagram, false};
    parent_ = nl_.addLink(host_, ib0);
    ASSERT_TRUE(nl_.setLinkUp(host_, parent_, true));
    nl_.clearCalls();
  }

  json ipoibConfig(const std::string& version = "1.0.0") const {
    json c = config(version);
    c.erase("device");
    c.erase("mtu");
    c["mode"] = "ipoib";
    c["master"] = "ib0";
    return c;
  }
  int countOps(Op op) {
    auto ops = nl_.callOps();
    return static_cast<int>(std::count(ops.begin(), ops.end(), op));
  }
  /// IPoIB links left in the host other than the parent.
  int hostChildren() {
    int n = 0;
    for (const auto& l : nl_.links(host_)) {
      n += (l.kind == "ipoib" && l.name != "ib0") ? 1 : 0;
    }
    return n;
  }

  int parent_ = 0;
};

TEST_F(IpoibModeTest, AddCreatesAChildInThePodInheritingPkeyAndModeAndDelDeletesIt) {
  auto result = add(ipoibConfig());
  ASSERT_TRUE(result.is_object());
  auto child = nl_.findLink(pod_, "net1");
  ASSERT_TRUE(child);
  EXPECT_EQ(child->kind, "ipoib");
  ASSERT_TRUE(child->ipoib);
  EXPECT_EQ(child->ipoib->pkey, 0xffff);
  EXPECT_EQ(child->ipoib->mode, nl::IpoibMode::kDatagram);
  EXPECT_TRUE(child->adminUp);
  EXPECT_EQ(hostChildren(), 0) << "nothing left in the host";
  EXPECT_EQ(result["interfaces"][0]["mac"].get<std::string>().size(), 59u) << "the 20-byte IPoIB address";
  EXPECT_EQ(result["interfaces"][0]["mac"], child->mac.text);
  ASSERT_EQ(records().size(), 1u);
  EXPECT_EQ(records()[0].mode, "ipoib");
  EXPECT_EQ(records()[0].pkey, 0x7fffu);

  json c = ipoibConfig();
  c["prevResult"] = result;
  EXPECT_EQ(run("CHECK", c).exitCode, 0);
  auto out = run("DEL", c);
  ASSERT_EQ(out.exitCode, 0) << out.stdoutText;
  EXPECT_FALSE(nl_.findLink(pod_, "net1"));
  EXPECT_TRUE(records().empty());
  EXPECT_TRUE(ipam_.allocations.empty());
  EXPECT_EQ(run("DEL", c).exitCode, 0) << "DEL twice";
}

TEST_F(IpoibModeTest, PkeyModeUmcastAndMtuAsConfigured) {
  json c = ipoibConfig();
  c["pkey"] = "0x1234";
  c["ipoibMode"] = "connected";
  c["umcast"] = true;
  c["mtu"] = 65520;
  add(c);
  auto child = nl_.findLink(pod_, "net1");
  ASSERT_TRUE(child && child->ipoib);
  EXPECT_EQ(child->ipoib->pkey, 0x9234) << "sent with the full-membership bit";
  EXPECT_EQ(child->ipoib->mode, nl::IpoibMode::kConnected);
  EXPECT_TRUE(child->ipoib->umcast);
  EXPECT_EQ(child->mtu, 65520u);
}

TEST_F(IpoibModeTest, FullMembershipPkeyIsNormalised) {
  json c = ipoibConfig();
  c["pkey"] = 0x8001;
  add(c);
  EXPECT_EQ(nl_.findLink(pod_, "net1")->ipoib->pkey, 0x8001);
  EXPECT_EQ(records()[0].pkey, 0x0001u);
}

TEST_F(IpoibModeTest, MtuIsValidatedForTheMode) {
  json c = ipoibConfig();
  c["mtu"] = 4092;  // above the datagram parent's 2044
  auto out = run("ADD", c);
  EXPECT_EQ(errorOf(out)["code"], 7);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("2044"), std::string::npos) << out.stdoutText;
  c["ipoibMode"] = "connected";
  c["mtu"] = 65521;
  out = run("ADD", c);
  EXPECT_EQ(errorOf(out)["code"], 7);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("65520"), std::string::npos) << out.stdoutText;
  EXPECT_EQ(countOps(Op::kAddIpoibChild), 0);
}

TEST_F(IpoibModeTest, ANonIpoibParentIsRefusedBeforeAnythingIsSent) {
  nl_.addLink(host_, fakeLink("veth0", "veth"));
  json c = ipoibConfig();
  c["master"] = "veth0";
  auto out = run("ADD", c);
  EXPECT_EQ(errorOf(out)["code"], 7);
  const std::string msg = errorOf(out)["msg"];
  EXPECT_NE(msg.find("a veth link of type ether"), std::string::npos) << msg;
  EXPECT_EQ(countOps(Op::kAddIpoibChild), 0);

  c["master"] = "ib9";
  EXPECT_EQ(errorOf(run("ADD", c))["code"], 100);
}

TEST_F(IpoibModeTest, ParentFoundByRdmaDeviceAndPort) {
  // The parent's name differs per node; its RDMA device and port do not.
  nl_.renameLink(host_, parent_, "ibP257p0s0").value();
  sysfs_.addPf("0101:00:00.0", "ibP257p0s0", "mlx5_an0", 0, parent_);
  ASSERT_TRUE(sysfs_.ok()) << sysfs_.error();
  json c = ipoibConfig();
  c.erase("master");
  c["rdmaDevice"] = "mlx5_an0";
  c["port"] = 1;
  add(c);
  EXPECT_TRUE(nl_.findLink(pod_, "net1"));
  c["rdmaDevice"] = "mlx5_9";
  auto out = run("ADD", c, {{"CNI_CONTAINERID", "c2"}});
  EXPECT_EQ(errorOf(out)["code"], 100);
  EXPECT_NE(errorOf(out)["msg"].get<std::string>().find("rdmaDevice = \"mlx5_9\""), std::string::npos);
}

TEST_F(IpoibModeTest, ConfigErrors) {
  auto expect7 = [&](json c, const std::string& text) {
    auto out = run("ADD", c);
    EXPECT_EQ(errorOf(out)["code"], 7) << c.dump();
    EXPECT_NE(errorOf(out)["msg"].get<std::string>().find(text), std::string::npos) << out.stdoutText;
  };
  json c = ipoibConfig();
  c["rdmaDevice"] = "mlx5_0";
  expect7(c, "one way only");
  c = ipoibConfig();
  c.erase("master");
  expect7(c, "master");
  c = ipoibConfig();
  c["ipoibMode"] = "cm";
  expect7(c, "ipoibMode");
  c = ipoibConfig();
  c["umcast"] = "yes";
  expect7(c, "umcast");
  c = ipoibConfig();
  c["port"] = 1;
  expect7(c, "port");
  for (auto bad : {json("0x0000"), json("0x8000"), json(65536), json("0x1ffff")}) {
    c = ipoibConfig();
    c["pkey"] = bad;
    expect7(c, "pkey");
  }
}

// Each step after the child exists fails in turn: the child is deleted wherever it is, IPAM is
// released, nothing is recorded, and the parent is untouched.
TEST_F(IpoibModeTest, EveryFailureDeletesTheChildWhereverItIs) {
  const std::string host = snapshot(host_);
  const std::string pod = snapshot(pod_);
  for (auto op : {Op::kAddIpoibChild, Op::kMoveLink, Op::kRenameLink, Op::kSetLinkUp, Op::kAddAddress}) {
    nl_.failOn(op, EBUSY, 1, "injected");
    auto out = run("ADD", ipoibConfig());
    EXPECT_EQ(out.exitCode, 1) << FakeNetlink::opName(op);
    EXPECT_EQ(snapshot(host_), host) << "host after a failed " << FakeNetlink::opName(op);
    EXPECT_EQ(snapshot(pod_), pod) << "pod after a failed " << FakeNetlink::opName(op);
    EXPECT_TRUE(ipam_.allocations.empty());
    EXPECT_TRUE(records().empty());
    nl_.clearFailures();
  }
  json c = ipoibConfig();
  c["mtu"] = 1500;
  nl_.failOn(Op::kSetMtu, EINVAL, 1, "mtu greater than device maximum");
  auto out = run("ADD", c);
  EXPECT_EQ(errorOf(out)["code"], 102);
  EXPECT_NE(out.stdoutText.find("mtu greater than device maximum"), std::string::npos)
      << "the kernel's extended ACK reaches the user: " << out.stdoutText;
  EXPECT_EQ(snapshot(pod_), pod);
}

TEST_F(IpoibModeTest, ConcurrentAttachmentsOnOneParentGetTheirOwnChildren) {
  os::Netns pod2 = netns_.addNetns("/var/run/netns/pod2");
  add(ipoibConfig());
  add(ipoibConfig(), {{"CNI_CONTAINERID", "c2"}, {"CNI_NETNS", "/var/run/netns/pod2"}});
  auto a = nl_.findLink(pod_, "net1");
  auto b = nl_.findLink(pod2, "net1");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->ipoib->pkey, b->ipoib->pkey) << "one partition, two children";
  EXPECT_NE(a->mac, b->mac);
  EXPECT_EQ(records().size(), 2u);
}

TEST_F(IpoibModeTest, ATemporaryNameInUseIsDrawnAgain) {
  nl_.failOn(Op::kAddIpoibChild, EEXIST);
  add(ipoibConfig());
  EXPECT_EQ(countOps(Op::kAddIpoibChild), 2);
  EXPECT_TRUE(nl_.findLink(pod_, "net1"));
}

TEST_F(IpoibModeTest, DelWhenTheNetnsOrTheChildIsGone) {
  add(ipoibConfig());
  nl_.removeLink(pod_, nl_.findLink(pod_, "net1")->index);  // the child dies with its namespace
  netns_.removeNetns(kPodPath);
  EXPECT_EQ(run("DEL", ipoibConfig()).exitCode, 0);
  EXPECT_TRUE(records().empty());
  EXPECT_TRUE(ipam_.allocations.empty());
}

TEST_F(IpoibModeTest, DelWithoutARecordDeletesTheChild) {
  add(ipoibConfig());
  std::filesystem::remove_all(stateDir_ + "/attachments");
  EXPECT_EQ(run("DEL", ipoibConfig()).exitCode, 0);
  EXPECT_FALSE(nl_.findLink(pod_, "net1"));
}

TEST_F(IpoibModeTest, CheckFindsAChildThatChanged) {
  json c = ipoibConfig();
  c["prevResult"] = add(ipoibConfig());
  ASSERT_EQ(run("CHECK", c).exitCode, 0);
  ASSERT_TRUE(nl_.setLinkUp(pod_, nl_.findLink(pod_, "net1")->index, false));
  EXPECT_EQ(errorOf(run("CHECK", c))["code"], 107);
}

}  // namespace
}  // namespace ibcni::testing
