// SPDX-License-Identifier: Apache-2.0
// LibnlNetlink's IPoIB child calls against a kernel that has ib_ipoib, inside the kernel-lab VM:
//   ../shared/kernel-lab/run.sh --nics 2 -- <build>/tests/kernel-lab/ipoib_netlink_vm_test
// The VM's kernel loads ib_ipoib, but its only RDMA device is rdma_rxe (RoCE: Ethernet link
// layer), so no IPoIB port (ARPHRD_INFINIBAND netdev) exists to be a parent. What can be checked
// is the kernel's answer to our request: with ib_ipoib loaded the "ipoib" kind is known, and a
// veth or dummy parent is refused by ipoib_new_child_link without leaving a link behind. Each
// error, with its extended-ACK text if any, is printed. The IPoIB-parent case runs only where
// such a parent exists (it skips here with the reason).
// Outside the VM every test skips: loading modules on the host is not ours to do.
#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "netlink/libnl_netlink.h"
#include "support/test_netns.h"
#include "vm_test_util.h"

namespace ibcni::testing {
namespace {

using ::ibcni::testing::lab::inKernelLab;
using ::ibcni::testing::lab::Cmd;
using ::ibcni::testing::lab::sh;


std::string describe(const os::SysError& e) {
  return std::string(std::strerror(e.err)) + " (errno " + std::to_string(e.err) + "), ext-ack \"" +
         e.extAck + "\"";
}

/// The links of `ns` as `ip -o link show` lists them (name and index; the state parts that may
/// change on their own, such as carrier, are cut off).
std::vector<std::string> linkList(const os::Netns& ns) {
  std::vector<std::string> out;
  auto text = runIp(ns, {"-o", "link", "show"});
  EXPECT_TRUE(text.has_value()) << (text ? "" : text.error().describe());
  if (!text) {
    return out;
  }
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    // "3: d0: <BROADCAST,NOARP> mtu 1500 ...": keep "3: d0:".
    const auto second = line.find(':', line.find(':') + 1);
    out.push_back(line.substr(0, second));
  }
  return out;
}

class IpoibNetlinkVmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!inKernelLab()) {
      GTEST_SKIP() << "runs only inside the kernel-lab VM (KERNEL_LAB=1): it loads ib_ipoib";
    }
    const Cmd mod = sh("modprobe ib_ipoib");
    ASSERT_TRUE(mod.ok) << "modprobe ib_ipoib: " << mod.out;
    auto ns = TestNetns::create("ipoib-vm");
    ASSERT_TRUE(ns.has_value()) << ns.error().describe();
    ns_.emplace(std::move(*ns));
    ASSERT_TRUE(createVethPair(ns_->netns(), "vparent0", ns_->netns(), "vpeer0").has_value());
    auto dummy = runIp(ns_->netns(), {"link", "add", "dparent0", "type", "dummy"});
    ASSERT_TRUE(dummy.has_value()) << dummy.error().describe();
  }

  int indexOf(const std::string& name) {
    auto link = nl_.linkByName(ns_->netns(), name);
    EXPECT_TRUE(link.has_value()) << name << ": " << (link ? "" : link.error().describe());
    return link ? link->index : 0;
  }

  /// Asks for a child of `parent`; expects the kernel to refuse and nothing to be left behind.
  os::SysError refused(int parent, std::uint16_t pkey, nl::IpoibMode mode, const char* what) {
    const auto before = linkList(ns_->netns());
    auto res = nl_.addIpoibChild(ns_->netns(), {parent, "ibchild0", pkey, mode, false});
    EXPECT_FALSE(res.has_value()) << what << ": the kernel made a child";
    if (res.has_value()) {
      (void)nl_.deleteLink(ns_->netns(), indexOf("ibchild0"));
      return {};
    }
    std::cout << "[ kernel  ] addIpoibChild, " << what << ": " << describe(res.error()) << "\n"
              << "            op: " << res.error().op << std::endl;
    EXPECT_EQ(linkList(ns_->netns()), before) << what << ": a link was left behind";
    EXPECT_EQ(nl_.linkByName(ns_->netns(), "ibchild0").error().err, ENODEV);
    return res.error();
  }

  nl::LibnlNetlink nl_;
  std::optional<TestNetns> ns_;
};

TEST_F(IpoibNetlinkVmTest, VethParentIsRefusedAndLeavesNothing) {
  const int veth = indexOf("vparent0");
  ASSERT_GT(veth, 0);
  for (auto mode : {nl::IpoibMode::kDatagram, nl::IpoibMode::kConnected}) {
    const os::SysError e = refused(veth, 0x8001, mode, "veth parent");
    // ipoib_new_child_link: a parent that is not ARPHRD_INFINIBAND is ENODEV.
    EXPECT_EQ(e.err, ENODEV);
  }
}

TEST_F(IpoibNetlinkVmTest, DummyParentIsRefusedAndLeavesNothing) {
  const int dummy = indexOf("dparent0");
  ASSERT_GT(dummy, 0);
  EXPECT_EQ(refused(dummy, 0x8001, nl::IpoibMode::kDatagram, "dummy parent").err, ENODEV);
  // The parent check comes before the pkey check: an invalid pkey is still ENODEV here.
  EXPECT_EQ(refused(dummy, 0x8000, nl::IpoibMode::kDatagram, "dummy parent, pkey 0x8000").err,
            ENODEV);
}

TEST_F(IpoibNetlinkVmTest, MissingParentAndTakenNameAreRefused) {
  EXPECT_EQ(refused(9999, 0x8001, nl::IpoibMode::kDatagram, "no link 9999").err, ENODEV);
  const int veth = indexOf("vparent0");
  const auto before = linkList(ns_->netns());
  auto res = nl_.addIpoibChild(ns_->netns(),
                               {veth, "dparent0", 0x8001, nl::IpoibMode::kDatagram, false});
  ASSERT_FALSE(res.has_value());
  std::cout << "[ kernel  ] addIpoibChild, name taken: " << describe(res.error()) << std::endl;
  EXPECT_EQ(res.error().err, EEXIST);
  EXPECT_EQ(linkList(ns_->netns()), before);
}

TEST_F(IpoibNetlinkVmTest, DeleteLinkAsTheKernelAnswers) {
  const int dummy = indexOf("dparent0");
  ASSERT_TRUE(nl_.deleteLink(ns_->netns(), dummy).has_value());
  EXPECT_EQ(nl_.linkByName(ns_->netns(), "dparent0").error().err, ENODEV);
  auto again = nl_.deleteLink(ns_->netns(), dummy);
  ASSERT_FALSE(again.has_value());
  std::cout << "[ kernel  ] deleteLink, missing: " << describe(again.error()) << std::endl;
  EXPECT_EQ(again.error().err, ENODEV);
  auto lo = nl_.deleteLink(ns_->netns(), 1);
  ASSERT_FALSE(lo.has_value());
  std::cout << "[ kernel  ] deleteLink, lo: " << describe(lo.error()) << std::endl;
  EXPECT_EQ(lo.error().err, EOPNOTSUPP);
  // Deleting one end of a veth takes its peer with it.
  ASSERT_TRUE(nl_.deleteLink(ns_->netns(), indexOf("vparent0")).has_value());
  EXPECT_EQ(nl_.linkByName(ns_->netns(), "vpeer0").error().err, ENODEV);
}

/// The name of a netdev of type ARPHRD_INFINIBAND (32) in this (the initial) namespace, if any.
std::optional<std::string> ipoibPort() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/class/net", ec)) {
    std::ifstream type(entry.path() / "type");
    int value = 0;
    if (type >> value && value == 32) {
      return entry.path().filename().string();
    }
  }
  return std::nullopt;
}

TEST(IpoibNetlinkVm, ChildOfARealIpoibPort) {
  if (!inKernelLab()) {
    GTEST_SKIP() << "runs only inside the kernel-lab VM (KERNEL_LAB=1): it loads ib_ipoib";
  }
  ASSERT_TRUE(sh("modprobe ib_ipoib").ok);
  // ib_ipoib attaches to InfiniBand ports only; rxe's are RoCE (Ethernet link layer).
  const Cmd rxe = sh("rdma link add rxe_ipoib type rxe netdev eth0");
  std::cout << "[ info    ] rdma link add rxe_ipoib: " << (rxe.ok ? "ok" : rxe.out) << std::endl;
  const auto port = ipoibPort();
  if (rxe.ok) {
    (void)sh("rdma link delete rxe_ipoib");
  }
  if (!port) {
    GTEST_SKIP() << "no ARPHRD_INFINIBAND netdev in the VM: rdma_rxe is RoCE, so ib_ipoib makes "
                    "no IPoIB port and no child can be made here (see the kernel-lab README)";
  }
  auto hostNs = os::Netns::current();
  ASSERT_TRUE(hostNs.has_value()) << hostNs.error().describe();
  const os::Netns& host = *hostNs;
  nl::LibnlNetlink nl;  // destroyed before hostNs
  auto parent = nl.linkByName(host, *port);
  ASSERT_TRUE(parent.has_value()) << parent.error().describe();
  auto res = nl.addIpoibChild(host, {parent->index, "ibvmchild0", 0x7ff1, nl::IpoibMode::kDatagram,
                                     true});
  ASSERT_TRUE(res.has_value()) << describe(res.error());
  auto child = nl.linkByName(host, "ibvmchild0");
  ASSERT_TRUE(child.has_value()) << child.error().describe();
  EXPECT_EQ(child->kind, "ipoib");
  EXPECT_EQ(child->parentIndex, parent->index);
  ASSERT_TRUE(child->ipoib.has_value());
  std::cout << "[ kernel  ] child pkey 0x" << std::hex << child->ipoib->pkey << std::dec
            << ", umcast " << child->ipoib->umcast << std::endl;
  EXPECT_TRUE(nl.deleteLink(host, child->index).has_value());
}

}  // namespace
}  // namespace ibcni::testing
