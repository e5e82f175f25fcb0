// SPDX-License-Identifier: Apache-2.0
// LibnlNetlink's IPoIB child calls against a kernel that has ib_ipoib, inside the kernel-lab VM:
//   ../shared/kernel-lab/run.sh --nics 2 -- <build>/tests/kernel-lab/ipoib_netlink_vm_test
// The VM's kernel loads ib_ipoib, but its only RDMA device is rdma_rxe (RoCE: Ethernet link
// layer), so no IPoIB port (ARPHRD_INFINIBAND netdev) exists to be a parent. What can be checked
// is the kernel's answer to our request: with ib_ipoib loaded the "ipoib" kind is known, and a
// veth or dummy parent is refused by ipoib_new_child_link without leaving a link behind, with a
// bare ENODEV (the kernel sets no extended-ACK text on that path; asserted). Where the kernel does
// send a text on the create path (a policy violation: a 17-byte name, a 1-byte pkey attribute),
// it reaches the error. Each error, with its extended-ACK text if any, is printed. The
// IPoIB-parent case runs only where such a parent exists (it skips here with the reason).
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

#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include "plugin/netlink/ipoib_messages.h"
#include "plugin/netlink/libnl_netlink.h"
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

// ---- requests the builder never makes, derived from its bytes ----

std::uint16_t u16At(const std::vector<std::uint8_t>& m, std::size_t off) {
  std::uint16_t v = 0;
  std::memcpy(&v, m.data() + off, sizeof v);
  return v;
}

/// The offset of the first attribute of `type` in [begin, end) of `m`, or 0.
std::size_t findAttr(const std::vector<std::uint8_t>& m, std::size_t begin, std::size_t end, int type) {
  for (std::size_t off = begin; off + NLA_HDRLEN <= end;) {
    const std::uint16_t len = u16At(m, off);
    if (len < NLA_HDRLEN) {
      return 0;
    }
    if ((u16At(m, off + 2) & NLA_TYPE_MASK) == type) {
      return off;
    }
    off += NLA_ALIGN(len);
  }
  return 0;
}

constexpr std::size_t kFirstAttr = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(ifinfomsg));

/// `request` with its IFLA_IFNAME replaced by `name`, whatever its length (buildAddIpoibChild and
/// addIpoibChild refuse a name of more than 15 bytes before the kernel sees it).
std::vector<std::uint8_t> withName(std::vector<std::uint8_t> request, const std::string& name) {
  const std::size_t at = findAttr(request, kFirstAttr, request.size(), IFLA_IFNAME);
  EXPECT_NE(at, 0u) << "no IFLA_IFNAME in the built request";
  if (at == 0) {
    return request;
  }
  const std::uint16_t newLen = static_cast<std::uint16_t>(NLA_HDRLEN + name.size() + 1);
  std::vector<std::uint8_t> attr(NLA_ALIGN(newLen), 0);
  std::memcpy(attr.data(), &newLen, sizeof newLen);
  const std::uint16_t type = IFLA_IFNAME;
  std::memcpy(attr.data() + 2, &type, sizeof type);
  std::memcpy(attr.data() + NLA_HDRLEN, name.data(), name.size());
  const std::size_t oldSize = NLA_ALIGN(u16At(request, at));
  request.erase(request.begin() + static_cast<std::ptrdiff_t>(at),
                request.begin() + static_cast<std::ptrdiff_t>(at + oldSize));
  request.insert(request.begin() + static_cast<std::ptrdiff_t>(at), attr.begin(), attr.end());
  const auto total = static_cast<std::uint32_t>(request.size());
  std::memcpy(request.data(), &total, sizeof total);  // nlmsg_len
  return request;
}

/// `request` with IFLA_IPOIB_PKEY one byte long (nla_len 5 instead of 6) where ipoib_policy wants
/// a u16. The attribute keeps its 8-byte slot, so everything after it stays where it was.
std::vector<std::uint8_t> withOneBytePkey(std::vector<std::uint8_t> request) {
  const std::size_t info = findAttr(request, kFirstAttr, request.size(), IFLA_LINKINFO);
  const std::size_t data = info == 0 ? 0 : findAttr(request, info + NLA_HDRLEN, info + u16At(request, info),
                                                    IFLA_INFO_DATA);
  const std::size_t pkey = data == 0 ? 0 : findAttr(request, data + NLA_HDRLEN, data + u16At(request, data),
                                                    IFLA_IPOIB_PKEY);
  EXPECT_NE(pkey, 0u) << "no IFLA_LINKINFO/IFLA_INFO_DATA/IFLA_IPOIB_PKEY in the built request";
  if (pkey != 0) {
    EXPECT_EQ(u16At(request, pkey), NLA_HDRLEN + 2);
    const std::uint16_t len = NLA_HDRLEN + 1;
    std::memcpy(request.data() + pkey, &len, sizeof len);
  }
  return request;
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
    auto res = nl_.addIpoibChild(ns_->netns(), {parent, "ibchild0", net::Pkey::fromWire(pkey), mode, false});
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
    // ipoib_new_child_link: a parent that is not ARPHRD_INFINIBAND is ENODEV, and it sets no
    // extended-ACK text (no NL_SET_ERR_MSG on that path): there is none to carry here.
    EXPECT_EQ(e.err, ENODEV);
    EXPECT_EQ(e.extAck, "");
  }
}

TEST_F(IpoibNetlinkVmTest, DummyParentIsRefusedAndLeavesNothing) {
  const int dummy = indexOf("dparent0");
  ASSERT_GT(dummy, 0);
  const os::SysError e = refused(dummy, 0x8001, nl::IpoibMode::kDatagram, "dummy parent");
  EXPECT_EQ(e.err, ENODEV);
  EXPECT_EQ(e.extAck, "") << "the kernel gives no text for a non-IPoIB parent";
  // The parent check comes before the pkey check: an invalid pkey is still ENODEV here.
  EXPECT_EQ(refused(dummy, 0x8000, nl::IpoibMode::kDatagram, "dummy parent, pkey 0x8000").err,
            ENODEV);
}

// Where the kernel does send a text on the create path, it reaches the error: requests that break
// a netlink policy, sent by LibnlNetlink exactly as addIpoibChild sends its own (same socket,
// same reading of NLMSG_ERROR). Both are refused while the request is parsed, before any parent
// check (validate_nla: ERANGE, "Attribute failed policy validation"): a 17-byte IFLA_IFNAME
// (ifla_policy: NLA_STRING of at most IFNAMSIZ-1) and a 1-byte IFLA_IPOIB_PKEY (ipoib_policy of
// ib_ipoib's ipoib_netlink.c: NLA_U16; parsed only because ib_ipoib is loaded, so the "ipoib" kind
// is known). Nothing is left behind. The unmodified request is the bare ENODEV of a veth parent.
TEST_F(IpoibNetlinkVmTest, KernelTextOfAPolicyViolationReachesTheError) {
  const int veth = indexOf("vparent0");
  ASSERT_GT(veth, 0);
  const std::vector<std::uint8_t> built =
      nl::buildAddIpoibChild({veth, "ibchild0", net::Pkey::fromWire(0x8001), nl::IpoibMode::kDatagram, false});
  ASSERT_FALSE(built.empty());
  const std::string longName = "ibchild0123456789";
  ASSERT_FALSE(
      nl_.addIpoibChild(ns_->netns(), {veth, longName, net::Pkey::fromWire(0x8001), nl::IpoibMode::kDatagram, false})
          .has_value());
  struct Case {
    const char* what;
    std::vector<std::uint8_t> request;
    std::string name;
  };
  for (const Case& c : {Case{"17-byte IFLA_IFNAME", withName(built, longName), longName},
                        Case{"1-byte IFLA_IPOIB_PKEY", withOneBytePkey(built), "ibchild0"}}) {
    const auto before = linkList(ns_->netns());
    auto res = nl_.sendRequestForTest(ns_->netns(), c.request, std::string("add ipoib child, ") + c.what);
    ASSERT_FALSE(res.has_value()) << c.what << ": the kernel made a link";
    std::cout << "[ kernel  ] " << c.what << ": " << describe(res.error()) << std::endl;
    EXPECT_EQ(res.error().extAck, "Attribute failed policy validation") << c.what;
    EXPECT_EQ(res.error().err, ERANGE) << c.what;
    EXPECT_NE(res.error().describe().find(": Attribute failed policy validation"), std::string::npos)
        << c.what << ": " << res.error().describe();
    EXPECT_EQ(linkList(ns_->netns()), before) << c.what << ": a link was left behind";
    auto left = nl_.linkByName(ns_->netns(), c.name.substr(0, 15));
    EXPECT_FALSE(left.has_value()) << c.what;
  }
  auto plain = nl_.sendRequestForTest(ns_->netns(), built, "add ipoib child, unmodified");
  ASSERT_FALSE(plain.has_value());
  EXPECT_EQ(plain.error().err, ENODEV) << describe(plain.error());
  EXPECT_EQ(plain.error().extAck, "");
}

TEST_F(IpoibNetlinkVmTest, MissingParentAndTakenNameAreRefused) {
  EXPECT_EQ(refused(9999, 0x8001, nl::IpoibMode::kDatagram, "no link 9999").err, ENODEV);
  const int veth = indexOf("vparent0");
  const auto before = linkList(ns_->netns());
  auto res =
      nl_.addIpoibChild(ns_->netns(), {veth, "dparent0", net::Pkey::fromWire(0x8001), nl::IpoibMode::kDatagram, false});
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
  auto res = nl.addIpoibChild(
      host, {parent->index, "ibvmchild0", net::Pkey::fromWire(0x7ff1), nl::IpoibMode::kDatagram, true});
  ASSERT_TRUE(res.has_value()) << describe(res.error());
  auto child = nl.linkByName(host, "ibvmchild0");
  ASSERT_TRUE(child.has_value()) << child.error().describe();
  EXPECT_EQ(child->kind, "ipoib");
  EXPECT_EQ(child->parentIndex, parent->index);
  ASSERT_TRUE(child->ipoib.has_value());
  std::cout << "[ kernel  ] child pkey " << child->ipoib->pkey.hex() << ", umcast " << child->ipoib->umcast
            << std::endl;
  EXPECT_TRUE(nl.deleteLink(host, child->index).has_value());
}

}  // namespace
}  // namespace ibcni::testing
