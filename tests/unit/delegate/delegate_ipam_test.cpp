// SPDX-License-Identifier: Apache-2.0
// Runs stub IPAM plugins (shell scripts written per test) through the real exec path.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "plugin/delegate/delegate_ipam.h"
#include "plugin/delegate/exec.h"
#include "fakes/ipam_call.h"
#include "support/temp_dir.h"

namespace ibcni::delegate {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class DelegateIpamTest : public testing::TempDirTest {
 protected:
  DelegateIpamTest() : TempDirTest("ibcni-ipam") {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(TempDirTest::SetUp());
    fs::create_directories(dir_ + "/bin1");
    fs::create_directories(dir_ + "/bin2");
  }

  void plugin(const std::string& dir, const std::string& name, const std::string& body) {
    std::string path = dir_ + "/" + dir + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    ::chmod(path.c_str(), 0755);
  }

  testing::IpamCall request(const std::string& type) {
    testing::IpamCall r;
    r.conf.ipamType = type;
    r.conf.version = cni::SpecVersion::k100;
    r.rawConfig = R"({"cniVersion":"1.0.0","name":"n","ipam":{"type":")" + type + "\"}}";
    r.args.containerId = "c1";
    r.args.ifName = "net1";
    r.args.netns = "/var/run/netns/p";
    r.args.rawArgs = "IgnoreUnknown=1";
    r.args.path = {dir_ + "/bin1", dir_ + "/bin2"};
    return r;
  }

  std::string slurp(const std::string& rel) {
    std::ifstream in(dir_ + "/" + rel);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

TEST_F(DelegateIpamTest, AddPassesStdinAndEnvAndParsesResult) {
  plugin("bin2", "stub", "cat > \"$(dirname $0)/../stdin\"; env | grep ^CNI_ | sort > \"$(dirname $0)/../env\"\n"
                         "echo '{\"cniVersion\":\"1.0.0\",\"ips\":[{\"address\":\"10.9.0.5/24\",\"gateway\":\"10.9.0.1\"}]}'\n");
  DelegateIpam ipam({"PATH=/usr/bin:/bin", "CNI_COMMAND=ADD", "OTHER=1"});
  auto req = request("stub");
  auto r = ipam.add(req);
  ASSERT_TRUE(r) << r.error().msg << " " << r.error().details;
  ASSERT_EQ(r->ips.size(), 1u);
  EXPECT_EQ(r->ips[0].address.toString(), "10.9.0.5/24");
  EXPECT_EQ(slurp("stdin"), req.rawConfig) << "the request config is passed on byte for byte";
  auto env = slurp("env");
  EXPECT_NE(env.find("CNI_COMMAND=ADD"), std::string::npos);
  EXPECT_NE(env.find("CNI_CONTAINERID=c1"), std::string::npos);
  EXPECT_NE(env.find("CNI_IFNAME=net1"), std::string::npos);
  EXPECT_NE(env.find("CNI_NETNS=/var/run/netns/p"), std::string::npos);
  EXPECT_NE(env.find("CNI_ARGS=IgnoreUnknown=1"), std::string::npos);
  EXPECT_NE(env.find("CNI_PATH=" + dir_ + "/bin1:" + dir_ + "/bin2"), std::string::npos);
}

TEST_F(DelegateIpamTest, EveryVerbSetsCniCommand) {
  plugin("bin1", "stub", "echo \"$CNI_COMMAND\" >> \"$(dirname $0)/../verbs\"\n");
  DelegateIpam ipam({"PATH=/usr/bin:/bin"});
  auto req = request("stub");
  ASSERT_TRUE(ipam.del(req));
  ASSERT_TRUE(ipam.check(req));
  ASSERT_TRUE(ipam.gc(req));
  ASSERT_TRUE(ipam.status(req));
  EXPECT_EQ(slurp("verbs"), "DEL\nCHECK\nGC\nSTATUS\n");
}

TEST_F(DelegateIpamTest, FirstMatchInPathOrderWins) {
  plugin("bin1", "stub", "echo '{\"ips\":[{\"address\":\"10.1.1.1/24\"}]}'\n");
  plugin("bin2", "stub", "echo '{\"ips\":[{\"address\":\"10.2.2.2/24\"}]}'\n");
  DelegateIpam ipam({});
  auto r = ipam.add(request("stub"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->ips[0].address.toString(), "10.1.1.1/24");
}

TEST_F(DelegateIpamTest, PluginErrorKeepsItsCode) {
  plugin("bin1", "stub", "echo '{\"code\":11,\"msg\":\"pool busy\",\"details\":\"retry\"}'; exit 1\n");
  DelegateIpam ipam({});
  auto r = ipam.add(request("stub"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, cni::Errc::kTryAgainLater);
  EXPECT_NE(r.error().msg.find("pool busy"), std::string::npos);
  EXPECT_NE(r.error().msg.find("stub"), std::string::npos);
  EXPECT_EQ(r.error().details, "retry");
}

TEST_F(DelegateIpamTest, NonJsonFailureIsIpamFailure) {
  plugin("bin1", "stub", "echo 'segfault or so' ; exit 3\n");
  DelegateIpam ipam({});
  auto r = ipam.del(request("stub"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, cni::Errc::kIpamFailure);
  EXPECT_NE(r.error().msg.find("exit status 3"), std::string::npos);
}

TEST_F(DelegateIpamTest, GarbageResultIsIpamFailure) {
  plugin("bin1", "stub", "echo 'not json'\n");
  DelegateIpam ipam({});
  auto r = ipam.add(request("stub"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, cni::Errc::kIpamFailure);
}

TEST_F(DelegateIpamTest, MissingPluginIsConfigErrorNamingTheField) {
  DelegateIpam ipam({});
  auto r = ipam.add(request("nope"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, cni::Errc::kInvalidConfig);
  EXPECT_NE(r.error().msg.find("ipam.type = \"nope\""), std::string::npos);
  EXPECT_NE(r.error().details.find("bin1"), std::string::npos);
}

TEST_F(DelegateIpamTest, DelOfAMissingPluginSucceeds) {
  // Failing DEL for a plugin that is not installed would leave the pod stuck in Terminating.
  DelegateIpam ipam({});
  EXPECT_TRUE(ipam.del(request("nope")));
  EXPECT_FALSE(ipam.check(request("nope")));
}

TEST_F(DelegateIpamTest, EmptyCniPathIsEnvironmentError) {
  DelegateIpam ipam({});
  auto req = request("stub");
  req.args.path.clear();
  auto r = ipam.add(req);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, cni::Errc::kInvalidEnvironment);
  EXPECT_NE(r.error().msg.find("CNI_PATH"), std::string::npos);
}

TEST_F(DelegateIpamTest, HangingPluginIsKilledAfterTimeout) {
  plugin("bin1", "stub", "exec sleep 30\n");
  DelegateIpam ipam({"PATH=/usr/bin:/bin"}, 200ms);
  auto start = std::chrono::steady_clock::now();
  auto r = ipam.add(request("stub"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, cni::Errc::kTryAgainLater);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST_F(DelegateIpamTest, LargeStdinAndStdoutDoNotDeadlock) {
  // The plugin answers before it has read everything: both pipes must be serviced together.
  plugin("bin1", "stub", "head -c 300000 /dev/zero | tr '\\0' ' '; echo '{}'; cat > /dev/null\n");
  DelegateIpam ipam({"PATH=/usr/bin:/bin"}, 10s);
  auto req = request("stub");
  req.rawConfig = std::string(1 << 20, ' ') + req.rawConfig;
  auto r = ipam.add(req);
  ASSERT_TRUE(r) << r.error().msg;
}

TEST(FindInPath, SkipsDirectoriesAndNonExecutables) {
  EXPECT_EQ(findInPath("sh", {"/nonexistent", "/bin"}), "/bin/sh");
  EXPECT_EQ(findInPath("bin", {"/"}), "") << "a directory is not a plugin";
  EXPECT_EQ(findInPath("passwd", {"/etc"}), "") << "not executable";
}

}  // namespace
}  // namespace ibcni::delegate
