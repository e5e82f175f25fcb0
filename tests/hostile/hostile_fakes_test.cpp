// SPDX-License-Identifier: Apache-2.0
// Hostile inputs that need a device this machine cannot have (an InfiniBand PF with VFs) or a
// namespace the test cannot reach (PID 1's), driven through dispatch() over the fakes of
// tests/unit (FakeSysfsTree models the mlx5 PF/VF layout), plus the rules of
// os/safe_path.h and cni::quoted() on their own. Each refusal must change nothing: no mutating
// netlink call, the same links, no record, no IPAM call.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <filesystem>

#include "ibcni/cni/error.h"
#include "ibcni/os/safe_path.h"
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPf = "0000:3b:00.0";
constexpr const char* kVf = "0000:3b:00.3";
constexpr const char* kGuid = "02:00:00:00:00:00:aa:01";

bool mutating(FakeNetlink::Op op) {
  using Op = FakeNetlink::Op;
  return op != Op::kLinkByName && op != Op::kLinkByIndex && op != Op::kListAddresses && op != Op::kListRoutes &&
         op != Op::kVfInfo;
}

class HostileFakesTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    // The mlx5 layout of tests/unit/modes/sriov_vf_test.cpp: an IPoIB PF with VFs 2 (with its
    // netdev and RDMA device, GUIDs set) and 3 (bound to no netdev).
    const IbVf made = addIbPfWithVf(kPf, 2, kVf, kGuid);
    pfIndex_ = made.pfIndex;
    vfLinkIndex_ = made.vfLink;
    sysfs_.addVf(kPf, 3, "0000:3b:00.4", "", "");
    ASSERT_TRUE(sysfs_.ok()) << sysfs_.error();
    nl_.clearCalls();
  }

  /// Fails the test when `out` is not exactly error `code` naming each of `words`, or when
  /// anything changed: a mutating netlink call, a record, an IPAM call.
  void expectRefusedUnchanged(const plugin::Outcome& out, int code, const std::vector<std::string>& words,
                              const std::string& hostBefore, const std::string& podBefore) {
    EXPECT_EQ(out.exitCode, 1) << out.stdoutText;
    json e = errorOf(out);
    ASSERT_TRUE(e.is_object()) << out.stdoutText;
    EXPECT_EQ(e.value("code", 0), code) << out.stdoutText;
    const std::string msg = e.value("msg", "");
    for (const auto& w : words) {
      EXPECT_NE(msg.find(w), std::string::npos) << "msg does not name \"" << w << "\": " << msg;
    }
    for (const auto& c : nl_.calls()) {
      EXPECT_FALSE(mutating(c.op)) << "a refused request changed something: " << c.toString();
    }
    EXPECT_EQ(snapshot(host_), hostBefore);
    EXPECT_EQ(snapshot(pod_), podBefore);
    EXPECT_TRUE(records().empty());
    EXPECT_TRUE(ipam_.calls.empty()) << ipam_.calls.front();
  }

  int pfIndex_ = 0;
  int vfLinkIndex_ = 0;
};

// deviceID (what the device plugin hands out) or device naming the PF itself: moving it would
// take every VF's port with it. Error 7, nothing touched; the VF itself still attaches.
TEST_F(HostileFakesTest, PfWithVfsIsRefusedByDeviceIdAndByName) {
  const std::string host = snapshot(host_);
  const std::string pod = snapshot(pod_);
  json c = config();
  c.erase("device");
  c.erase("mtu");
  c["deviceID"] = kPf;
  expectRefusedUnchanged(run("ADD", c), 7, {"deviceID", kPf, "PF", "2 VFs", kVf, "0000:3b:00.4", "one of its VFs"},
                         host, pod);

  nl_.clearCalls();
  c.erase("deviceID");
  c["device"] = "ibp59s0";
  expectRefusedUnchanged(run("ADD", c), 7, {"device = \"ibp59s0\"", "PF", "one of its VFs"}, host, pod);

  // The positive control: the same configuration with the VF works (and DEL puts it back).
  c.erase("device");
  c["deviceID"] = kVf;
  add(c);
  EXPECT_EQ(records().size(), 1U);
  EXPECT_EQ(run("DEL", c).exitCode, 0);
}

// The netdev that carries the node's default route: moving it cuts the node off. Error 7 naming the
// device and the route; a route in another table, or no default route, is no reason to refuse.
TEST_F(HostileFakesTest, DefaultRouteDeviceIsRefused) {
  ASSERT_TRUE(nl_.addAddress(host_, vfIndex_, *net::IpPrefix::parse("10.200.0.2/24")));
  nl::Route def;
  def.dst = *net::IpPrefix::parse("0.0.0.0/0");
  def.gw = net::IpAddress::parse("10.200.0.1");
  def.ifIndex = vfIndex_;
  ASSERT_TRUE(nl_.addRoute(host_, def));
  nl_.clearCalls();
  const std::string host = snapshot(host_);
  const std::string pod = snapshot(pod_);
  const auto routesBefore = nl_.routes(host_);
  expectRefusedUnchanged(run("ADD", config()), 7,
                         {"device = \"vf0\"", "default route", "10.200.0.1", "cut the node off"}, host, pod);
  EXPECT_EQ(nl_.routes(host_).size(), routesBefore.size());

  // A default route in a policy-routing table is not the node's: the device attaches.
  ASSERT_TRUE(nl_.deleteRoute(host_, def));
  def.table = 100;
  ASSERT_TRUE(nl_.addRoute(host_, def));
  add(config());
  EXPECT_EQ(run("DEL", config()).exitCode, 0);
}

// CNI_NETNS naming the node's own namespace (PID 1's), when ibcni runs elsewhere: ADD and CHECK
// refuse (4); DEL treats the pod as gone and touches nothing there.
TEST_F(HostileFakesTest, NodeNetnsIsNeverThePod) {
  os::Netns node = netns_.addNetns("/proc/1/ns/net");
  nl::Link eth = fakeLink("eth0");
  nl_.addLink(node, eth);
  nl_.clearCalls();
  const std::string host = snapshot(host_);
  const std::string pod = snapshot(pod_);
  const std::string nodeBefore = snapshot(node);
  for (const std::string verb : {"ADD", "CHECK"}) {
    SCOPED_TRACE(verb);
    json c = config();
    if (verb == "CHECK") {
      c["prevResult"] = {{"cniVersion", "1.0.0"}, {"interfaces", json::array()}};
    }
    expectRefusedUnchanged(run(verb, c, {{"CNI_NETNS", "/proc/1/ns/net"}}), 4,
                           {"CNI_NETNS=\"/proc/1/ns/net\"", "node's own network namespace"}, host, pod);
  }
  EXPECT_EQ(run("DEL", config(), {{"CNI_NETNS", "/proc/1/ns/net"}, {"CNI_IFNAME", "eth0"}}).exitCode, 0);
  for (const auto& c : nl_.calls()) {
    EXPECT_NE(c.netns, "/proc/1/ns/net") << "DEL acted in the node's namespace: " << c.toString();
  }
  EXPECT_EQ(snapshot(node), nodeBefore);
  EXPECT_EQ(snapshot(host_), host);
}

// cni::quoted: escaped, one line, bounded; isPrintableText: control characters and bytes that are
// not UTF-8 are not text.
TEST(HostileText, QuotedIsEscapedAndBounded) {
  EXPECT_EQ(cni::quoted("net1"), "\"net1\"");
  EXPECT_EQ(cni::quoted("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(cni::quoted(std::string("n\n\x01\xff", 4)), "\"n\\x0a\\x01\\xff\"");
  const std::string big(1 << 20, 'x');
  const std::string q = cni::quoted(big);
  EXPECT_LT(q.size(), 100U);
  EXPECT_NE(q.find("(1048576 bytes)"), std::string::npos) << q;
  for (std::string ok : {"", "net1", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"}) {
    EXPECT_TRUE(cni::isPrintableText(ok)) << cni::quoted(ok);
  }
  for (std::string bad : {"a\nb", "\x7f", "\xff", "\xc3", "\xc0\xaf", "\xe2\x82", "\xf5\x80\x80\x80", "x\x1b[31m"}) {
    EXPECT_FALSE(cni::isPrintableText(bad)) << cni::quoted(bad);
  }
}

TEST(HostileText, InterfaceNamesArePrintable) {
  for (std::string ok : {"net1", "ib0.8001", "a", "123456789012345", "caf\xc3\xa9"}) {
    EXPECT_TRUE(net::isValidIfName(ok)) << cni::quoted(ok);
  }
  for (std::string bad :
       {"", ".", "..", "a/b", "a:b", "a b", "a\tb", "a\nb", "a\x01", "\xff\xfe", "1234567890123456"}) {
    EXPECT_FALSE(net::isValidIfName(bad)) << cni::quoted(bad);
  }
}

TEST(HostilePaths, SpellingRules) {
  EXPECT_EQ(os::pathSpellingProblem("/run/ibcni"), "");
  EXPECT_EQ(os::pathSpellingProblem("/var/lib/cni/ibcni"), "");
  EXPECT_EQ(os::pathSpellingProblem("/var/lib//cni/ibcni/"), "");
  for (std::string bad : {"", "relative", "/a/../etc", "/a/./b", "/..", "/a/..", "/a\nb", "/a\x7f"}) {
    EXPECT_NE(os::pathSpellingProblem(bad), "") << cni::quoted(bad);
  }
  EXPECT_NE(os::pathSpellingProblem("/" + std::string(os::kMaxConfigPath, 'a')), "");
  EXPECT_EQ(os::logFileSpellingProblem("/var/log/ibcni.log"), "");
  for (std::string bad : {"/etc/shadow", "/root/.ssh/authorized_keys", "/var/log/.log", "/var/log/x.log/", "x.log",
                          "/var/log/../../etc/x.log"}) {
    EXPECT_NE(os::logFileSpellingProblem(bad), "") << bad;
  }
}

// openDirectory and openLogFile on a real tree: a symbolic link owned by another user is never
// followed, a directory others can write is no place for ibcni's files, a log file must be a
// regular file with one link. (Ownership needs root to set up: skipped otherwise.)
class HostileOpenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root to give files to another user (euid " << ::geteuid() << ")";
    }
    char tmpl[] = "/tmp/ibcni-hostile-open-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directory(dir_ / "real");
  }
  void TearDown() override {
    if (!dir_.empty()) {
      fs::remove_all(dir_);
    }
  }
  static constexpr uid_t kNobody = 65534;
  fs::path dir_;
};

TEST_F(HostileOpenTest, DirectoryRules) {
  const os::DirPolicy create{.trustedOwners = true, .create = true, .mode = 0700};
  // Root's symbolic links are followed: the production layout (/var/run -> /run) keeps working.
  fs::create_directory_symlink(dir_ / "real", dir_ / "rootlink");
  auto ok = os::openDirectory((dir_ / "rootlink" / "state").string(), create);
  ASSERT_TRUE(ok) << ok.error().describe();
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "real" / "state").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700U);

  fs::create_directory_symlink(dir_ / "real", dir_ / "userlink");
  ASSERT_EQ(::lchown((dir_ / "userlink").c_str(), kNobody, kNobody), 0);
  auto viaUser = os::openDirectory((dir_ / "userlink" / "other").string(), create);
  ASSERT_FALSE(viaUser);
  EXPECT_TRUE(os::isRefusal(viaUser.error())) << viaUser.error().describe();
  EXPECT_NE(viaUser.error().op.find("userlink is a symbolic link owned by uid 65534"), std::string::npos)
      << viaUser.error().op;
  EXPECT_FALSE(fs::exists(dir_ / "real" / "other"));

  fs::create_directory(dir_ / "usersdir");
  ASSERT_EQ(::chown((dir_ / "usersdir").c_str(), kNobody, kNobody), 0);
  auto inUsers = os::openDirectory((dir_ / "usersdir" / "state").string(), create);
  ASSERT_FALSE(inUsers);
  EXPECT_TRUE(os::isRefusal(inUsers.error()));
  EXPECT_FALSE(fs::exists(dir_ / "usersdir" / "state"));

  fs::create_directory(dir_ / "open");
  fs::permissions(dir_ / "open", fs::perms::all);
  EXPECT_FALSE(os::openDirectory((dir_ / "open").string(), create));
  EXPECT_FALSE(os::openDirectory((dir_ / "open" / "state").string(), create));
  EXPECT_FALSE(fs::exists(dir_ / "open" / "state"));
  // A sticky world-writable directory (/tmp) may be on the way, not be the directory itself.
  fs::permissions(dir_ / "open", fs::perms::all | fs::perms::sticky_bit);
  EXPECT_FALSE(os::openDirectory((dir_ / "open").string(), create));
  EXPECT_TRUE(os::openDirectory((dir_ / "open" / "state").string(), create));
}

TEST_F(HostileOpenTest, LogFileRules) {
  const fs::path victim = dir_ / "real" / "victim";
  std::ofstream(victim) << "precious\n";
  fs::create_symlink(victim, dir_ / "link.log");
  ASSERT_EQ(::mkfifo((dir_ / "fifo.log").c_str(), 0600), 0);
  fs::create_hard_link(victim, dir_ / "hard.log");
  ::alarm(10);  // a regression that opens the FIFO for writing blocks: SIGALRM ends the test instead
  for (const char* name : {"link.log", "fifo.log", "hard.log"}) {
    auto fd = os::openLogFile((dir_ / name).string());
    ASSERT_FALSE(fd) << name;
    EXPECT_TRUE(os::isRefusal(fd.error())) << fd.error().describe();
  }
  ::alarm(0);
  EXPECT_EQ(fs::file_size(victim), 9U);
  auto missingDir = os::openLogFile((dir_ / "nodir" / "x.log").string());
  ASSERT_FALSE(missingDir);
  EXPECT_EQ(missingDir.error().err, ENOENT);
  EXPECT_FALSE(fs::exists(dir_ / "nodir"));
  auto good = os::openLogFile((dir_ / "ibcni.log").string());
  ASSERT_TRUE(good) << good.error().describe();
  struct stat st {};
  ASSERT_EQ(::fstat(good->get(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640U);
  EXPECT_NE(::fcntl(good->get(), F_GETFL) & O_APPEND, 0);
}

TEST_F(HostileOpenTest, ReadRegularFileRefusesFifoWithoutBlocking) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  ::alarm(10);  // a regression that opens the FIFO blocks forever: SIGALRM ends the test instead
  auto r = os::readRegularFile((dir_ / "fifo").string(), 1024);
  ::alarm(0);
  ASSERT_FALSE(r);
  EXPECT_TRUE(os::isRefusal(r.error()));
  auto dev = os::readRegularFile("/dev/zero", 1024);
  ASSERT_FALSE(dev);
  EXPECT_TRUE(os::isRefusal(dev.error()));
}

}  // namespace
}  // namespace ibcni::testing
