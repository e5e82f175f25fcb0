// SPDX-License-Identifier: Apache-2.0
// The nl::Netlink contract against the kernel, through LibnlNetlink (label "netns": needs root).
// Every case runs with the thread inside a fresh "host" namespace and acts on three more fresh
// namespaces, so the machine's own namespace is never touched.

#include <array>
#include <cstdint>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "plugin/netlink/libnl_netlink.h"
#include "netlink_contract.h"
#include "support/test_netns.h"

namespace ibcni::testing {
namespace {

// Linux 6.2 dropped the "rename only when down" rule (commit bd039b5ea2a9).
bool kernelRenamesUpLinks() {
  utsname u{};
  if (::uname(&u) != 0) {
    return false;
  }
  int major = 0;
  int minor = 0;
  if (std::sscanf(u.release, "%d.%d", &major, &minor) != 2) {
    return false;
  }
  return major > 6 || (major == 6 && minor >= 2);
}

}  // namespace

/// The contract's backend for LibnlNetlink: fresh namespaces, the thread in a "host" one.
class RealBackend {
 public:
  os::SysResult<void> setUp() {
    auto host = TestNetns::create("host");
    if (!host) {
      return std::unexpected(host.error());
    }
    host_ = std::move(*host);
    auto scope = ScopedHostNetns::enter(host_->netns());
    if (!scope) {
      return std::unexpected(scope.error());
    }
    scope_.emplace(std::move(*scope));
    for (std::size_t i = 0; i < namespaces_.size(); ++i) {
      auto ns = TestNetns::create("ns" + std::to_string(i));
      if (!ns) {
        return std::unexpected(ns.error());
      }
      namespaces_[i] = std::move(*ns);
    }
    netlink_ = std::make_unique<nl::LibnlNetlink>();
    return {};
  }

  nl::Netlink& netlink() { return *netlink_; }
  const os::Netns& ns(int i) { return namespaces_.at(static_cast<std::size_t>(i))->netns(); }

  os::SysResult<void> addVeth(const os::Netns& a, const std::string& nameA, const os::Netns& b,
                              const std::string& nameB) {
    return createVethPair(a, nameA, b, nameB);
  }

  bool renameUpAllowed() const { return kernelRenamesUpLinks(); }

 private:
  // Destroyed in reverse: the sockets first, then back to the original namespace, then the
  // namespaces themselves.
  std::optional<TestNetns> host_;
  std::array<std::optional<TestNetns>, 3> namespaces_;
  std::optional<ScopedHostNetns> scope_;
  std::unique_ptr<nl::LibnlNetlink> netlink_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(Libnl, NetlinkContract, RealBackend);

namespace {

// ---- LibnlNetlink specifics that the fake has no counterpart for ----

class LibnlNetlinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto host = TestNetns::create("host");
    if (!host && isPermissionError(host.error())) {
      GTEST_SKIP() << "network namespaces are not available (needs root): "
                   << host.error().describe();
    }
    ASSERT_TRUE(host.has_value()) << host.error().describe();
    host_ = std::move(*host);
    auto scope = ScopedHostNetns::enter(host_->netns());
    ASSERT_TRUE(scope.has_value()) << scope.error().describe();
    scope_.emplace(std::move(*scope));
    auto pod = TestNetns::create("pod");
    ASSERT_TRUE(pod.has_value()) << pod.error().describe();
    pod_ = std::move(*pod);
  }

  // Socket fds of this process and their close-on-exec flags.
  static std::set<int> socketFds() {
    std::set<int> out;
    DIR* dir = ::opendir("/proc/self/fd");
    if (dir == nullptr) {
      return out;
    }
    while (dirent* e = ::readdir(dir)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") {
        continue;
      }
      char target[256] = {};
      const std::string link = "/proc/self/fd/" + name;
      ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
      if (n > 0 && std::string(target, static_cast<std::size_t>(n)).rfind("socket:", 0) == 0) {
        out.insert(std::stoi(name));
      }
    }
    ::closedir(dir);
    return out;
  }

  std::optional<TestNetns> host_;
  std::optional<ScopedHostNetns> scope_;
  std::optional<TestNetns> pod_;
};

TEST_F(LibnlNetlinkTest, OneCloseOnExecSocketPerNamespace) {
  const std::set<int> before = socketFds();
  nl::LibnlNetlink netlink;
  for (int i = 0; i < 3; ++i) {
    auto lo = netlink.linkByName(pod_->netns(), "lo");
    ASSERT_TRUE(lo.has_value()) << lo.error().describe();
    (void)netlink.linkByIndex(pod_->netns(), 9999);  // an error must not cost a new socket
  }
  // Another handle on the same namespace shares the socket.
  auto again = os::Netns::open(pod_->path());
  ASSERT_TRUE(again.has_value()) << again.error().describe();
  ASSERT_TRUE(netlink.linkByIndex(*again, 1).has_value());

  std::set<int> added;
  for (int fd : socketFds()) {
    if (before.count(fd) == 0) {
      added.insert(fd);
    }
  }
  ASSERT_EQ(added.size(), 1u);
  const int flags = ::fcntl(*added.begin(), F_GETFD);
  EXPECT_TRUE(flags >= 0 && (flags & FD_CLOEXEC) != 0);

  netlink.closeSockets();
  EXPECT_EQ(socketFds(), before);
}

TEST_F(LibnlNetlinkTest, HandleWithoutFdIsEbadf) {
  nl::LibnlNetlink netlink;
  auto fake = os::Netns::fakeForTest("/fake/netns", 4242);
  auto res = netlink.linkByName(fake, "lo");
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().err, EBADF);
  auto moved = netlink.moveLink(pod_->netns(), 1, fake);
  ASSERT_FALSE(moved.has_value());
  EXPECT_EQ(moved.error().err, EBADF);
}

TEST_F(LibnlNetlinkTest, ErrorTextCarriesTheKernelsExtendedAck) {
  nl::LibnlNetlink netlink;
  auto res = netlink.setMtu(pod_->netns(), 1, 0x80000000u);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().err, EINVAL);
  EXPECT_EQ(res.error().extAck, "mtu less than device minimum");
  EXPECT_NE(res.error().describe().find("mtu less than device minimum"), std::string::npos);
  EXPECT_NE(res.error().op.find(pod_->path()), std::string::npos);
}

// Writes `text` to a new temporary file and returns its path ("" on failure).
std::string tempFile(const std::string& text) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ibcni-XXXXXX";
  const int fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) {
    return {};
  }
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok ? path : std::string();
}

// A dump that races with changes is marked NLM_F_DUMP_INTR by the kernel; LibnlNetlink must
// then retry, and hand out either a complete list or EAGAIN, never a partial one. (Whether an
// interruption happens is up to timing; with this churn it does, many times per run.)
TEST_F(LibnlNetlinkTest, DumpsRacingWithChangesAreCompleteOrEagain) {
  const os::Netns& ns = pod_->netns();
  const std::string peerName = randomIfName("pp");
  ASSERT_TRUE(createVethPair(ns, "churn0", host_->netns(), peerName).has_value());
  // The churned address comes first, so deleting it shifts every other one in the list.
  std::string fill = "addr add 10.255.0.1/32 dev churn0\n";
  for (int i = 0; i < 1000; ++i) {
    fill += "addr add 10." + std::to_string(i / 250) + "." + std::to_string(i % 250) +
            ".1/32 dev churn0\n";
  }
  std::string churn;
  for (int i = 0; i < 200; ++i) {
    churn += "addr del 10.255.0.1/32 dev churn0\naddr add 10.255.0.1/32 dev churn0\n";
  }
  const std::string fillFile = tempFile(fill);
  const std::string churnFile = tempFile(churn);
  ASSERT_FALSE(fillFile.empty() || churnFile.empty());
  auto filled = runIp(ns, {"-batch", fillFile});
  ASSERT_TRUE(filled.has_value()) << filled.error().describe();

  nl::LibnlNetlink netlink;
  auto link = netlink.linkByName(ns, "churn0");
  ASSERT_TRUE(link.has_value()) << link.error().describe();
  const pid_t churner = ::fork();
  ASSERT_GE(churner, 0);
  if (churner == 0) {
    for (;;) {
      (void)runIp(ns, {"-batch", churnFile});
    }
  }
  int complete = 0;
  int eagain = 0;
  std::string failures;
  for (int i = 0; i < 60; ++i) {
    auto addrs = netlink.listAddresses(ns, link->index);
    if (!addrs) {
      if (addrs.error().err == EAGAIN) {
        ++eagain;
      } else {
        failures += addrs.error().describe() + "\n";
      }
      continue;
    }
    std::set<std::string> seen;
    for (const auto& a : *addrs) {
      seen.insert(a.prefix.toString());
    }
    seen.erase("10.255.0.1/32");
    if (seen.size() == 1000) {
      ++complete;
    } else {
      failures += "partial list: " + std::to_string(seen.size()) + " addresses\n";
    }
  }
  ::kill(churner, SIGKILL);
  ::waitpid(churner, nullptr, 0);
  ::unlink(fillFile.c_str());
  ::unlink(churnFile.c_str());
  EXPECT_EQ(failures, "");
  EXPECT_GT(complete, 0) << eagain << " lists gave up with EAGAIN";
  // The socket is still in step after all of that.
  auto after = netlink.linkByIndex(ns, link->index);
  ASSERT_TRUE(after.has_value()) << after.error().describe();
  EXPECT_EQ(after->name, "churn0");
}

// "maxmtu N" from `ip -d link show dev NAME`, or nullopt.
std::optional<std::uint32_t> ipMaxMtu(const os::Netns& ns, const std::string& name) {
  auto out = runIp(ns, {"-d", "link", "show", "dev", name});
  if (!out) {
    return std::nullopt;
  }
  const std::size_t at = out->find(" maxmtu ");
  if (at == std::string::npos) {
    return std::nullopt;
  }
  return static_cast<std::uint32_t>(std::stoul(out->substr(at + 8)));
}

TEST_F(LibnlNetlinkTest, LinksReportTheirMaxMtu) {
  const os::Netns& ns = pod_->netns();
  ASSERT_TRUE(createVethPair(ns, "mtu0", ns, "mtu1").has_value());
  nl::LibnlNetlink netlink;
  auto veth = netlink.linkByName(ns, "mtu0");
  ASSERT_TRUE(veth.has_value()) << veth.error().describe();
  // veth's max_mtu is ETH_MAX_MTU (Linux 4.10 and later, 6.x included).
  EXPECT_EQ(veth->maxMtu, 65535u);
  EXPECT_EQ(ipMaxMtu(ns, "mtu0"), veth->maxMtu);
  EXPECT_EQ(netlink.linkByIndex(ns, veth->index)->maxMtu, 65535u);
  // "lo" has no upper limit, which the kernel reports as 0.
  auto lo = netlink.linkByName(ns, "lo");
  ASSERT_TRUE(lo.has_value()) << lo.error().describe();
  EXPECT_EQ(lo->maxMtu, 0u);
  EXPECT_EQ(ipMaxMtu(ns, "lo"), 0u);
  // The rest of the link is read as before.
  EXPECT_EQ(veth->name, "mtu0");
  EXPECT_EQ(veth->kind, "veth");
  EXPECT_EQ(veth->mtu, 1500u);
}

// A veth has no SR-IOV: the kernel refuses VF settings before touching anything, and its
// answer to a link lookup has no VF list. (No SR-IOV hardware here; the byte-level match with
// iproute2 is in vf_messages_test.cpp.)
TEST_F(LibnlNetlinkTest, VfSettingsOnAVethAreRefusedAndChangeNothing) {
  const os::Netns& ns = pod_->netns();
  ASSERT_TRUE(createVethPair(ns, "vfpf0", ns, "vfpeer0").has_value());
  nl::LibnlNetlink netlink;
  auto before = netlink.linkByName(ns, "vfpf0");
  ASSERT_TRUE(before.has_value()) << before.error().describe();
  auto ipBefore = runIp(ns, {"-d", "link", "show", "dev", "vfpf0"});
  ASSERT_TRUE(ipBefore.has_value()) << ipBefore.error().describe();
  const int pf = before->index;
  const net::Guid node{0x0011223344556677};
  const net::Guid port{0x8899aabbccddeeff};

  // No ndo_set_vf_guid / ndo_set_vf_link_state: EOPNOTSUPP, which also says the kernel parsed
  // the request (a malformed one is EINVAL or ERANGE).
  auto guids = netlink.setVfGuids(ns, pf, 3, node, port);
  ASSERT_FALSE(guids.has_value());
  EXPECT_EQ(guids.error().err, EOPNOTSUPP) << guids.error().describe();
  EXPECT_NE(guids.error().op.find("88:99:aa:bb:cc:dd:ee:ff"), std::string::npos);
  for (auto state : {nl::VfLinkState::kAuto, nl::VfLinkState::kEnable, nl::VfLinkState::kDisable}) {
    auto res = netlink.setVfLinkState(ns, pf, 3, state);
    ASSERT_FALSE(res.has_value());
    EXPECT_EQ(res.error().err, EOPNOTSUPP) << res.error().describe();
  }
  // do_setvfinfo checks the VF number it finds inside each struct before anything else: EINVAL
  // here shows that the kernel reads `vf` where we put it.
  EXPECT_EQ(netlink.setVfGuids(ns, pf, 0x7fffffff, node, port).error().err, EINVAL);
  EXPECT_EQ(netlink.setVfLinkState(ns, pf, 0x7fffffff, nl::VfLinkState::kEnable).error().err,
            EINVAL);

  // No VF list in the answer.
  for (std::uint32_t vf : {0u, 3u}) {
    auto info = netlink.vfInfo(ns, pf, vf);
    ASSERT_FALSE(info.has_value());
    EXPECT_EQ(info.error().err, ENOENT) << info.error().describe();
  }

  // Nothing changed.
  auto after = netlink.linkByName(ns, "vfpf0");
  ASSERT_TRUE(after.has_value()) << after.error().describe();
  EXPECT_EQ(after->index, before->index);
  EXPECT_EQ(after->mtu, before->mtu);
  EXPECT_EQ(after->maxMtu, before->maxMtu);
  EXPECT_EQ(after->adminUp, before->adminUp);
  EXPECT_EQ(after->mac, before->mac);
  EXPECT_EQ(after->alias, before->alias);
  EXPECT_EQ(runIp(ns, {"-d", "link", "show", "dev", "vfpf0"}).value_or(""), *ipBefore);

  // No such link: ENODEV from the kernel, or before asking it for indexes <= 0.
  EXPECT_EQ(netlink.vfInfo(ns, 9999, 0).error().err, ENODEV);
  EXPECT_EQ(netlink.setVfGuids(ns, 9999, 0, node, port).error().err, ENODEV);
  EXPECT_EQ(netlink.setVfLinkState(ns, 9999, 0, nl::VfLinkState::kAuto).error().err, ENODEV);
  EXPECT_EQ(netlink.vfInfo(ns, 0, 0).error().err, ENODEV);
  EXPECT_EQ(netlink.setVfLinkState(ns, -1, 0, nl::VfLinkState::kAuto).error().err, ENODEV);
  // The socket is still in step.
  EXPECT_EQ(netlink.linkByIndex(ns, pf)->name, "vfpf0");
}

}  // namespace
}  // namespace ibcni::testing
