// SPDX-License-Identifier: Apache-2.0
// The nl::Netlink contract against FakeNetlink (label "unit": no root, no libnl), plus the
// fake's own test helpers: fault injection, the call log, set-up functions.

#include <cerrno>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fakes/fake_netlink.h"
#include "netlink_contract.h"

namespace ibcni::testing {

/// The contract's backend for FakeNetlink: three fake namespace handles.
class FakeBackend {
 public:
  os::SysResult<void> setUp() {
    for (int i = 0; i < 3; ++i) {
      namespaces_.push_back(os::Netns::fakeForTest("/fake/ns" + std::to_string(i),
                                                   static_cast<ino_t>(4026532000 + i)));
    }
    return {};
  }

  nl::Netlink& netlink() { return fake_; }
  const os::Netns& ns(int i) { return namespaces_.at(static_cast<std::size_t>(i)); }

  os::SysResult<void> addVeth(const os::Netns& a, const std::string& nameA, const os::Netns& b,
                              const std::string& nameB) {
    // The kernel registers the peer first, so in one namespace the peer has the lower index.
    fake_.addLink(b, fakeLink(nameB, "veth"));
    fake_.addLink(a, fakeLink(nameA, "veth"));
    return {};
  }

  bool renameUpAllowed() const { return true; }  // FakeNetlink's default, as Linux >= 6.2

 private:
  std::vector<os::Netns> namespaces_;
  FakeNetlink fake_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(Fake, NetlinkContract, FakeBackend);

namespace {

using contract::pfx;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using Op = FakeNetlink::Op;

nl::Link upLink(const char* name) {
  nl::Link link = fakeLink(name);
  link.adminUp = true;
  return link;
}

class FakeNetlinkTest : public ::testing::Test {
 protected:
  os::Netns host_ = os::Netns::fakeForTest("/fake/host", 1001);
  os::Netns pod_ = os::Netns::fakeForTest("/fake/pod", 1002);
  FakeNetlink fake_;
};

TEST_F(FakeNetlinkTest, AddLinkFillsDefaultsAndAllocatesIndexes) {
  const int a = fake_.addLink(host_, fakeLink("ib0"));
  nl::Link ib1 = fakeLink("ib1", "ipoib");
  ib1.index = 7;
  ib1.mtu = 2044;
  ib1.arpType = 32;  // ARPHRD_INFINIBAND
  const int b = fake_.addLink(host_, ib1);
  EXPECT_EQ(a, 2);
  EXPECT_EQ(b, 7);
  auto links = fake_.links(host_);
  ASSERT_EQ(links.size(), 3u);
  EXPECT_EQ(links[0].name, "lo");
  EXPECT_EQ(links[1].name, "ib0");
  EXPECT_EQ(links[1].mtu, 1500u);
  EXPECT_EQ(links[1].arpType, 1);
  EXPECT_EQ(links[1].mac.length, 6u);
  EXPECT_EQ(links[2].index, 7);
  EXPECT_EQ(links[2].mtu, 2044u);
  EXPECT_EQ(links[2].mac.length, 0u);  // no default MAC for non-Ethernet links
  EXPECT_EQ(fake_.addLink(host_, fakeLink("ib2")), 3);
  EXPECT_FALSE(fake_.findLink(pod_, "ib0").has_value());
}

TEST_F(FakeNetlinkTest, AddLinkUpAddsPrefixRoutesOfLaterAddresses) {
  nl::Link net1 = fakeLink("net1");
  net1.adminUp = true;
  const int idx = fake_.addLink(pod_, net1);
  ASSERT_TRUE(fake_.addAddress(pod_, idx, pfx("10.1.0.2/24")).has_value());
  ASSERT_EQ(fake_.routes(pod_).size(), 1u);
  EXPECT_EQ(fake_.routes(pod_)[0].dst, pfx("10.1.0.0/24"));
  EXPECT_EQ(fake_.addresses(pod_).size(), 1u);
}

TEST_F(FakeNetlinkTest, FailOnFailsTheNthCallOnceAndChangesNothing) {
  const int idx = fake_.addLink(host_, fakeLink("ib0"));
  fake_.failOn(Op::kRenameLink, EBUSY, 2, "Device or resource busy");
  ASSERT_TRUE(fake_.renameLink(host_, idx, "a").has_value());
  auto second = fake_.renameLink(host_, idx, "b");
  ASSERT_FALSE(second.has_value());
  EXPECT_EQ(second.error().err, EBUSY);
  EXPECT_EQ(second.error().extAck, "Device or resource busy");
  EXPECT_EQ(second.error().op, "rename link 2 to \"b\" in netns /fake/host");
  EXPECT_EQ(fake_.linkByIndex(host_, idx)->name, "a");
  EXPECT_TRUE(fake_.renameLink(host_, idx, "c").has_value());  // fired once only
}

TEST_F(FakeNetlinkTest, FailOnWorksForEveryOperation) {
  const int idx = fake_.addLink(host_, upLink("ib0"));
  ASSERT_TRUE(fake_.addAddress(host_, idx, pfx("10.1.0.2/24")).has_value());
  const nl::Route route = contract::route("10.2.0.0/16").dev(idx);
  for (Op op :
       {Op::kLinkByName, Op::kLinkByIndex, Op::kSetLinkUp, Op::kRenameLink, Op::kSetMtu,
        Op::kSetAlias, Op::kSetHwAddress, Op::kMoveLink, Op::kListAddresses, Op::kAddAddress,
        Op::kDeleteAddress, Op::kListRoutes, Op::kAddRoute, Op::kDeleteRoute}) {
    fake_.failOn(op, EIO);
  }
  EXPECT_EQ(fake_.linkByName(host_, "ib0").error().err, EIO);
  EXPECT_EQ(fake_.linkByIndex(host_, idx).error().err, EIO);
  EXPECT_EQ(fake_.setLinkUp(host_, idx, false).error().err, EIO);
  EXPECT_EQ(fake_.renameLink(host_, idx, "x").error().err, EIO);
  EXPECT_EQ(fake_.setMtu(host_, idx, 2000).error().err, EIO);
  EXPECT_EQ(fake_.setAlias(host_, idx, "a").error().err, EIO);
  EXPECT_EQ(fake_.setHwAddress(host_, idx, *net::HwAddress::parse("02:00:00:00:00:09")).error().err,
            EIO);
  EXPECT_EQ(fake_.moveLink(host_, idx, pod_).error().err, EIO);
  EXPECT_EQ(fake_.listAddresses(host_, idx).error().err, EIO);
  EXPECT_EQ(fake_.addAddress(host_, idx, pfx("10.3.0.2/24")).error().err, EIO);
  EXPECT_EQ(fake_.deleteAddress(host_, idx, pfx("10.1.0.2/24")).error().err, EIO);
  EXPECT_EQ(fake_.listRoutes(host_, 0).error().err, EIO);
  EXPECT_EQ(fake_.addRoute(host_, route).error().err, EIO);
  EXPECT_EQ(fake_.deleteRoute(host_, route).error().err, EIO);

  // Nothing changed.
  auto link = fake_.linkByIndex(host_, idx);
  ASSERT_TRUE(link.has_value());
  EXPECT_EQ(link->name, "ib0");
  EXPECT_TRUE(link->adminUp);
  EXPECT_EQ(link->mtu, 1500u);
  EXPECT_EQ(fake_.addresses(host_).size(), 1u);
  EXPECT_EQ(fake_.routes(host_).size(), 1u);
  EXPECT_EQ(fake_.links(pod_).size(), 1u);
}

TEST_F(FakeNetlinkTest, CallLogRecordsEveryCallInOrder) {
  const int idx = fake_.addLink(host_, fakeLink("ib0"));
  (void)fake_.linkByName(host_, "ib0");
  (void)fake_.setLinkUp(host_, idx, false);
  (void)fake_.moveLink(host_, idx, pod_);
  (void)fake_.renameLink(pod_, idx, "net1");
  (void)fake_.setLinkUp(pod_, 42, true);  // fails, still recorded
  EXPECT_THAT(fake_.callLog(),
              ElementsAre("linkByName(/fake/host, ib0)", "setLinkUp(/fake/host, 2, down)",
                          "moveLink(/fake/host, 2, /fake/pod)", "renameLink(/fake/pod, 2, net1)",
                          "setLinkUp(/fake/pod, 42, up)"));
  EXPECT_THAT(fake_.callOps(), ElementsAre(Op::kLinkByName, Op::kSetLinkUp, Op::kMoveLink,
                                           Op::kRenameLink, Op::kSetLinkUp));
  fake_.clearCalls();
  EXPECT_THAT(fake_.calls(), IsEmpty());
}

TEST_F(FakeNetlinkTest, RenameOfAnUpLinkCanBeRefusedAsBeforeLinux62) {
  const int idx = fake_.addLink(host_, upLink("ib0"));
  fake_.setRenameUpAllowed(false);
  auto res = fake_.renameLink(host_, idx, "ib9");
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().err, EBUSY);
  ASSERT_TRUE(fake_.setLinkUp(host_, idx, false).has_value());
  EXPECT_TRUE(fake_.renameLink(host_, idx, "ib9").has_value());
}

TEST_F(FakeNetlinkTest, InvalidNetnsHandleIsEbadf) {
  EXPECT_EQ(fake_.linkByName(os::Netns(), "lo").error().err, EBADF);
  EXPECT_EQ(fake_.moveLink(host_, 1, os::Netns()).error().err, EBADF);
}

TEST_F(FakeNetlinkTest, RemoveLinkDropsItsAddressesAndRoutes) {
  const int idx = fake_.addLink(host_, upLink("ib0"));
  ASSERT_TRUE(fake_.addAddress(host_, idx, pfx("10.1.0.2/24")).has_value());
  EXPECT_TRUE(fake_.removeLink(host_, idx));
  EXPECT_FALSE(fake_.removeLink(host_, idx));
  EXPECT_THAT(fake_.addresses(host_), IsEmpty());
  EXPECT_THAT(fake_.routes(host_), IsEmpty());
}

TEST_F(FakeNetlinkTest, MtuRangeCanBeChanged) {
  nl::Link ib0 = fakeLink("ib0", "ipoib");
  ib0.arpType = 32;
  const int idx = fake_.addLink(host_, ib0);
  fake_.setMtuRange(host_, idx, 68, 4092);
  EXPECT_TRUE(fake_.setMtu(host_, idx, 4092).has_value());
  auto res = fake_.setMtu(host_, idx, 4093);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().extAck, "mtu greater than device maximum");
}

TEST_F(FakeNetlinkTest, LinksReportTheirMaxMtu) {
  const int veth = fake_.addLink(host_, fakeLink("veth0", "veth"));
  nl::Link ib0 = fakeLink("ib0", "ipoib");
  ib0.arpType = 32;
  ib0.maxMtu = 4092;
  const int ib = fake_.addLink(host_, ib0);
  EXPECT_EQ(fake_.linkByName(host_, "lo")->maxMtu, 0u);  // as the kernel reports "lo"
  EXPECT_EQ(fake_.linkByIndex(host_, veth)->maxMtu, 65535u);
  EXPECT_EQ(fake_.linkByIndex(host_, ib)->maxMtu, 4092u);
  EXPECT_EQ(fake_.setMtu(host_, ib, 4093).error().extAck, "mtu greater than device maximum");
  fake_.setMtuRange(host_, veth, 68, 9000);
  EXPECT_EQ(fake_.findLink(host_, "veth0")->maxMtu, 9000u);
  EXPECT_EQ(fake_.links(host_)[1].maxMtu, 9000u);
}

const net::Guid kNodeGuid{0x0011223344556677};
// A VF with nothing reported but its number.
nl::VfInfo vfNumber(std::uint32_t n) {
  nl::VfInfo vf;
  vf.vf = n;
  return vf;
}
const net::Guid kPortGuid{0x8899aabbccddeeff};

TEST_F(FakeNetlinkTest, VfTableIsReportedAndSettable) {
  const int pf = fake_.addLink(host_, fakeLink("ib0"));
  nl::VfInfo vf0;
  vf0.vf = 7;  // replaced by the position
  vf0.linkState = nl::VfLinkState::kAuto;
  fake_.setVfs(host_, pf, {vf0, nl::VfInfo{}, nl::VfInfo{}});

  auto first = fake_.vfInfo(host_, pf, 0);
  ASSERT_TRUE(first.has_value()) << first.error().describe();
  EXPECT_EQ(first->vf, 0u);
  EXPECT_EQ(first->linkState, nl::VfLinkState::kAuto);
  EXPECT_FALSE(first->nodeGuid.has_value());

  ASSERT_TRUE(fake_.setVfGuids(host_, pf, 1, kNodeGuid, kPortGuid).has_value());
  ASSERT_TRUE(fake_.setVfLinkState(host_, pf, 2, nl::VfLinkState::kDisable).has_value());
  auto vf1 = fake_.vf(host_, pf, 1);
  ASSERT_TRUE(vf1.has_value());
  EXPECT_EQ(vf1->vf, 1u);
  EXPECT_EQ(vf1->nodeGuid, kNodeGuid);
  EXPECT_EQ(vf1->portGuid, kPortGuid);
  EXPECT_FALSE(vf1->linkState.has_value());
  EXPECT_EQ(fake_.vfInfo(host_, pf, 1).value(), *vf1);
  EXPECT_EQ(fake_.vfInfo(host_, pf, 2)->linkState, nl::VfLinkState::kDisable);
  EXPECT_EQ(fake_.vf(host_, pf, 0)->linkState, nl::VfLinkState::kAuto);  // others untouched

  // The table goes with the link into another namespace.
  ASSERT_TRUE(fake_.moveLink(host_, pf, pod_).has_value());
  EXPECT_EQ(fake_.vf(pod_, pf, 1)->portGuid, kPortGuid);
  EXPECT_FALSE(fake_.vf(host_, pf, 1).has_value());
}

TEST_F(FakeNetlinkTest, LinkWithoutVfTableRefusesVfSettings) {
  const int idx = fake_.addLink(host_, fakeLink("veth0", "veth"));
  EXPECT_EQ(fake_.setVfGuids(host_, idx, 0, kNodeGuid, kPortGuid).error().err, EOPNOTSUPP);
  EXPECT_EQ(fake_.setVfLinkState(host_, idx, 0, nl::VfLinkState::kEnable).error().err,
            EOPNOTSUPP);
  EXPECT_EQ(fake_.vfInfo(host_, idx, 0).error().err, ENOENT);
  EXPECT_FALSE(fake_.vf(host_, idx, 0).has_value());
  // do_setvfinfo checks the VF number before looking for the driver hook.
  EXPECT_EQ(fake_.setVfLinkState(host_, idx, 0x7fffffff, nl::VfLinkState::kEnable).error().err,
            EINVAL);
  // No such link.
  EXPECT_EQ(fake_.setVfGuids(host_, 42, 0, kNodeGuid, kPortGuid).error().err, ENODEV);
  EXPECT_EQ(fake_.setVfLinkState(host_, 42, 0, nl::VfLinkState::kAuto).error().err, ENODEV);
  EXPECT_EQ(fake_.vfInfo(host_, 42, 0).error().err, ENODEV);
}

TEST_F(FakeNetlinkTest, VfNumberOutOfRange) {
  const int pf = fake_.addLink(host_, fakeLink("ib0"));
  fake_.setVfs(host_, pf, {nl::VfInfo{}, nl::VfInfo{}});
  EXPECT_EQ(fake_.setVfGuids(host_, pf, 2, kNodeGuid, kPortGuid).error().err, EINVAL);
  EXPECT_EQ(fake_.setVfLinkState(host_, pf, 2, nl::VfLinkState::kEnable).error().err, EINVAL);
  EXPECT_EQ(fake_.vfInfo(host_, pf, 2).error().err, ENOENT);
  EXPECT_EQ(fake_.vf(host_, pf, 0), nl::VfInfo{});
  EXPECT_EQ(fake_.vf(host_, pf, 1), vfNumber(1));

  // A PF with no VFs enabled lists none and takes no VF settings.
  fake_.setVfs(host_, pf, {});
  EXPECT_EQ(fake_.vfInfo(host_, pf, 0).error().err, ENOENT);
  EXPECT_EQ(fake_.setVfLinkState(host_, pf, 0, nl::VfLinkState::kEnable).error().err, EINVAL);
}

TEST_F(FakeNetlinkTest, VfOperationsAreLoggedAndFailOnDemand) {
  const int pf = fake_.addLink(host_, fakeLink("ib0"));
  fake_.setVfs(host_, pf, {nl::VfInfo{}, nl::VfInfo{}, nl::VfInfo{}});
  fake_.failOn(Op::kVfInfo, EIO);
  fake_.failOn(Op::kSetVfGuids, EBUSY, 1, "busy");
  fake_.failOn(Op::kSetVfLinkState, EPERM);
  EXPECT_EQ(fake_.vfInfo(host_, pf, 2).error().err, EIO);
  auto guids = fake_.setVfGuids(host_, pf, 2, kNodeGuid, kPortGuid);
  ASSERT_FALSE(guids.has_value());
  EXPECT_EQ(guids.error().err, EBUSY);
  EXPECT_EQ(guids.error().extAck, "busy");
  EXPECT_EQ(guids.error().op,
            "set node GUID 00:11:22:33:44:55:66:77 and port GUID 88:99:aa:bb:cc:dd:ee:ff of vf 2 "
            "on link 2 in netns /fake/host");
  EXPECT_EQ(fake_.setVfLinkState(host_, pf, 2, nl::VfLinkState::kEnable).error().err, EPERM);
  EXPECT_EQ(fake_.vf(host_, pf, 2), vfNumber(2));  // nothing changed

  EXPECT_TRUE(fake_.setVfLinkState(host_, pf, 2, nl::VfLinkState::kAuto).has_value());
  EXPECT_THAT(fake_.callLog(),
              ElementsAre("vfInfo(/fake/host, 2, vf 2)",
                          "setVfGuids(/fake/host, 2, vf 2, node 00:11:22:33:44:55:66:77, port "
                          "88:99:aa:bb:cc:dd:ee:ff)",
                          "setVfLinkState(/fake/host, 2, vf 2, enable)",
                          "setVfLinkState(/fake/host, 2, vf 2, auto)"));
  EXPECT_THAT(fake_.callOps(),
              ElementsAre(Op::kVfInfo, Op::kSetVfGuids, Op::kSetVfLinkState, Op::kSetVfLinkState));
}

// ---- IPoIB children ----

constexpr const char* kPortAddress = "80:00:00:48:fe:80:00:00:00:00:00:00:02:c9:03:00:00:00:00:01";

class FakeIpoibTest : public FakeNetlinkTest {
 protected:
  void SetUp() override {
    nl::Link ib0 = fakeLink("ib0", "ipoib");
    ib0.arpType = 32;
    ib0.mtu = 2044;
    ib0.mac = *net::HwAddress::parse(kPortAddress);
    parent_ = fake_.addLink(host_, ib0);
    fake_.setMtuRange(host_, parent_, 68, 4092);
  }

  nl::IpoibChildSpec spec(const char* name, std::uint16_t pkey,
                          nl::IpoibMode mode = nl::IpoibMode::kDatagram, bool umcast = false) const {
    return nl::IpoibChildSpec{parent_, name, net::Pkey::fromWire(pkey), mode, umcast};
  }

  int parent_ = 0;
};

TEST_F(FakeIpoibTest, AddIpoibChildMakesAChildOfTheParent) {
  ASSERT_TRUE(fake_.addIpoibChild(host_, spec("ib0.8001", 0x0001, nl::IpoibMode::kConnected, true))
                  .has_value());
  auto child = fake_.linkByName(host_, "ib0.8001");
  ASSERT_TRUE(child.has_value()) << child.error().describe();
  EXPECT_EQ(child->kind, "ipoib");
  EXPECT_EQ(child->arpType, 32);
  EXPECT_FALSE(child->adminUp);
  EXPECT_EQ(child->mtu, 2044u);
  EXPECT_EQ(child->maxMtu, 4092u);
  EXPECT_EQ(child->parentIndex, parent_);
  ASSERT_TRUE(child->ipoib.has_value());
  EXPECT_EQ(*child->ipoib, (nl::IpoibInfo{net::Pkey::fromWire(0x8001), nl::IpoibMode::kConnected, true}));
  // The parent's address with another QP number: byte 0 (flags) and the GID stay.
  ASSERT_EQ(child->mac.length, 20u);
  const std::string parentText = kPortAddress;
  EXPECT_EQ(child->mac.text.substr(0, 2), parentText.substr(0, 2));
  EXPECT_EQ(child->mac.text.substr(12), parentText.substr(12));
  EXPECT_NE(child->mac.text.substr(3, 8), parentText.substr(3, 8));

  // A second child, also with pkey 0x8001 (the kernel allows that for netlink-made children),
  // gets its own QP number and index.
  ASSERT_TRUE(fake_.addIpoibChild(host_, spec("ib0.8001b", 0x8001)).has_value());
  auto second = fake_.linkByName(host_, "ib0.8001b");
  ASSERT_TRUE(second.has_value());
  EXPECT_NE(second->index, child->index);
  EXPECT_NE(second->mac, child->mac);
  EXPECT_EQ(*second->ipoib, (nl::IpoibInfo{net::Pkey::fromWire(0x8001), nl::IpoibMode::kDatagram, false}));
  EXPECT_EQ(fake_.linkByIndex(host_, parent_)->parentIndex, 0);  // the parent is untouched
}

TEST_F(FakeIpoibTest, AddIpoibChildRefusesAsTheKernelDoes) {
  constexpr net::Pkey kPkey8003 = net::Pkey::fromWire(0x8003);
  auto err = [this](const nl::IpoibChildSpec& sp) {
    auto res = fake_.addIpoibChild(host_, sp);
    return res ? 0 : res.error().err;
  };
  nl::Link veth = fakeLink("veth0", "veth");
  const int vethIdx = fake_.addLink(host_, veth);
  ASSERT_TRUE(fake_.addIpoibChild(host_, spec("child0", 0x8002)).has_value());
  const int childIdx = fake_.findLink(host_, "child0")->index;
  nl::Link noCm = fakeLink("ib1", "ipoib");
  noCm.arpType = 32;
  noCm.mac = *net::HwAddress::parse("00:00:00:48:fe:80:00:00:00:00:00:00:02:c9:03:00:00:00:00:02");
  const int noCmIdx = fake_.addLink(host_, noCm);
  const std::size_t before = fake_.links(host_).size();

  EXPECT_EQ(err(spec("child0", 0x8003)), EEXIST);           // name taken
  EXPECT_EQ(err(spec("ib0", 0x8003)), EEXIST);              // even the parent's own name
  EXPECT_EQ(err(spec("", 0x8003)), EINVAL);                 // not an interface name
  EXPECT_EQ(err(spec("much.too.long.name", 0x8003)), EINVAL);
  EXPECT_EQ(err({42, "c1", kPkey8003, nl::IpoibMode::kDatagram, false}), ENODEV);        // no parent
  EXPECT_EQ(err({vethIdx, "c1", kPkey8003, nl::IpoibMode::kDatagram, false}), ENODEV);   // not IB
  EXPECT_EQ(err({1, "c1", kPkey8003, nl::IpoibMode::kDatagram, false}), ENODEV);         // lo
  EXPECT_EQ(err({childIdx, "c1", kPkey8003, nl::IpoibMode::kDatagram, false}), EINVAL);  // a child
  EXPECT_EQ(err(spec("c1", 0x0000)), EINVAL);
  EXPECT_EQ(err(spec("c1", 0x8000)), EINVAL);
  EXPECT_EQ(err({noCmIdx, "c1", kPkey8003, nl::IpoibMode::kConnected, false}), EINVAL);  // no RC
  EXPECT_EQ(fake_.links(host_).size(), before);  // nothing was left behind
  EXPECT_TRUE(fake_.addIpoibChild(host_, {noCmIdx, "c1", kPkey8003, nl::IpoibMode::kDatagram, false}).has_value());
}

TEST_F(FakeIpoibTest, DeleteLinkRemovesChildrenAndVirtualLinksOnly) {
  ASSERT_TRUE(fake_.addIpoibChild(host_, spec("ib0.8001", 0x8001)).has_value());
  const int child = fake_.findLink(host_, "ib0.8001")->index;
  ASSERT_TRUE(fake_.setLinkUp(host_, child, true).has_value());
  ASSERT_TRUE(fake_.addAddress(host_, child, pfx("10.9.0.2/24")).has_value());
  const int veth = fake_.addLink(host_, fakeLink("veth0", "veth"));
  const int eth = fake_.addLink(host_, fakeLink("eth0"));

  EXPECT_TRUE(fake_.deleteLink(host_, child).has_value());
  EXPECT_FALSE(fake_.findLink(host_, "ib0.8001").has_value());
  EXPECT_THAT(fake_.addresses(host_), IsEmpty());
  EXPECT_THAT(fake_.routes(host_), IsEmpty());
  EXPECT_EQ(fake_.deleteLink(host_, child).error().err, ENODEV);
  EXPECT_TRUE(fake_.deleteLink(host_, veth).has_value());
  EXPECT_FALSE(fake_.findLink(host_, "veth0").has_value());
  EXPECT_EQ(fake_.deleteLink(host_, eth).error().err, EOPNOTSUPP);  // physical: no dellink
  EXPECT_EQ(fake_.deleteLink(host_, 1).error().err, EOPNOTSUPP);    // lo
  // An IPoIB port: ipoib_del_child_link ignores it, the kernel answers success.
  EXPECT_TRUE(fake_.deleteLink(host_, parent_).has_value());
  EXPECT_TRUE(fake_.findLink(host_, "ib0").has_value());
}

TEST_F(FakeIpoibTest, ChildKeepsItsParentIndexWhenMoved) {
  ASSERT_TRUE(fake_.addIpoibChild(host_, spec("ib0.8001", 0x8001)).has_value());
  const int child = fake_.findLink(host_, "ib0.8001")->index;
  ASSERT_TRUE(fake_.moveLink(host_, child, pod_).has_value());
  auto moved = fake_.linkByName(pod_, "ib0.8001");
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->parentIndex, parent_);
  EXPECT_EQ(moved->ipoib->pkey.wire(), 0x8001);
  EXPECT_TRUE(fake_.deleteLink(pod_, moved->index).has_value());
  EXPECT_EQ(fake_.links(pod_).size(), 1u);
}

TEST_F(FakeIpoibTest, IpoibOperationsAreLoggedAndFailOnDemand) {
  fake_.failOn(Op::kAddIpoibChild, ENOMEM, 1, "no memory");
  fake_.failOn(Op::kDeleteLink, EBUSY);
  auto add = fake_.addIpoibChild(host_, spec("ib0.8001", 0x0001, nl::IpoibMode::kConnected, true));
  ASSERT_FALSE(add.has_value());
  EXPECT_EQ(add.error().err, ENOMEM);
  EXPECT_EQ(add.error().extAck, "no memory");
  EXPECT_EQ(add.error().op,
            "add ipoib child \"ib0.8001\" of link 2 pkey 1 mode connected umcast 1 in netns "
            "/fake/host");
  EXPECT_FALSE(fake_.findLink(host_, "ib0.8001").has_value());  // nothing changed
  ASSERT_TRUE(fake_.addIpoibChild(host_, spec("ib0.8001", 0x8001)).has_value());
  const int child = fake_.findLink(host_, "ib0.8001")->index;
  EXPECT_EQ(fake_.deleteLink(host_, child).error().err, EBUSY);
  EXPECT_TRUE(fake_.findLink(host_, "ib0.8001").has_value());  // nothing changed
  EXPECT_TRUE(fake_.deleteLink(host_, child).has_value());
  EXPECT_THAT(fake_.callLog(),
              ElementsAre("addIpoibChild(/fake/host, 2, ib0.8001, pkey 0x0001, connected, umcast 1)",
                          "addIpoibChild(/fake/host, 2, ib0.8001, pkey 0x8001, datagram, umcast 0)",
                          "deleteLink(/fake/host, 3)", "deleteLink(/fake/host, 3)"));
  EXPECT_THAT(fake_.callOps(), ElementsAre(Op::kAddIpoibChild, Op::kAddIpoibChild,
                                           Op::kDeleteLink, Op::kDeleteLink));
  EXPECT_STREQ(FakeNetlink::opName(Op::kAddIpoibChild), "addIpoibChild");
  EXPECT_STREQ(FakeNetlink::opName(Op::kDeleteLink), "deleteLink");
}

}  // namespace
}  // namespace ibcni::testing
