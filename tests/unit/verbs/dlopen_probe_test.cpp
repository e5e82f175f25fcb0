// SPDX-License-Identifier: Apache-2.0
// DlopenVerbsProbe forking into real network namespaces (label netns: root). The machine running
// it has libibverbs.so.1 but no RDMA device; with devices the probe is tested in the kernel-lab VM
// (tests/kernel-lab/verbs_probe_vm_test.cpp). Every test also checks that no child is left behind.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "support/test_netns.h"
#include "plugin/verbs/dlopen_verbs_probe.h"

namespace ibcni::verbs {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

/// True when this process has no child at all (neither running nor a zombie).
bool noChildren() {
  errno = 0;
  return ::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD;
}

class DlopenProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ns = testing::TestNetns::create("verbs");
    if (!ns) {
      if (testing::isPermissionError(ns.error())) {
        GTEST_SKIP() << ns.error().describe();
      }
      FAIL() << ns.error().describe();
    }
    ns_.emplace(std::move(*ns));
    ASSERT_TRUE(noChildren());
  }
  void TearDown() override { EXPECT_TRUE(noChildren()) << "a probe child was not reaped"; }

  [[nodiscard]] ProbeRequest request() const {
    ProbeRequest req;
    req.netnsPath = ns_->path();
    return req;
  }

  std::optional<testing::TestNetns> ns_;
};

TEST_F(DlopenProbeTest, FreshNetnsOnAHostWithoutRdmaSeesNoDevice) {
  DlopenVerbsProbe probe;
  auto res = probe.probe(request());
  ASSERT_TRUE(res.has_value()) << res.error().describe();
  EXPECT_TRUE(res->available) << res->unavailableReason;
  EXPECT_TRUE(res->unavailableReason.empty());
  EXPECT_TRUE(res->devices.empty());
  EXPECT_FALSE(res->opened);
  EXPECT_FALSE(res->port.has_value());
  EXPECT_FALSE(res->qpProbeOk.has_value());
  if (!res->openError.empty()) {
    std::printf("note: %s\n", res->openError.c_str());  // ibv_get_device_list failing is allowed
  }
}

TEST_F(DlopenProbeTest, NamedDeviceThatDoesNotExistIsNotOpened) {
  DlopenVerbsProbe probe;
  ProbeRequest req = request();
  req.device = "mlx5_99";
  req.qpProbe = true;
  auto res = probe.probe(req);
  ASSERT_TRUE(res.has_value()) << res.error().describe();
  EXPECT_TRUE(res->available);
  EXPECT_FALSE(res->opened);
  EXPECT_FALSE(res->port.has_value());
  EXPECT_FALSE(res->qpProbeOk.has_value()) << "no QP probe without an opened port";
}

TEST_F(DlopenProbeTest, MissingNetnsPathIsAnErrorAndMakesNoChild) {
  DlopenVerbsProbe probe;
  ProbeRequest req = request();
  req.netnsPath = ns_->path() + "-does-not-exist";
  auto res = probe.probe(req);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().err, ENOENT) << res.error().describe();
}

TEST_F(DlopenProbeTest, FileThatIsNotANetnsIsTheChildsSetnsError) {
  char path[] = "/tmp/ibcni-not-a-netns-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  DlopenVerbsProbe probe;
  ProbeRequest req = request();
  req.netnsPath = path;
  auto res = probe.probe(req);
  ::unlink(path);
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().err, EINVAL) << res.error().describe();
  EXPECT_NE(res.error().op.find("setns"), std::string::npos) << res.error().op;
}

TEST_F(DlopenProbeTest, LibraryThatCannotBeLoadedIsUnavailable) {
  DlopenVerbsProbe probe("libibcni-no-such-verbs.so.1");
  auto res = probe.probe(request());
  ASSERT_TRUE(res.has_value()) << res.error().describe();
  EXPECT_FALSE(res->available);
  EXPECT_NE(res->unavailableReason.find("libibcni-no-such-verbs.so.1"), std::string::npos)
      << res->unavailableReason;
  EXPECT_TRUE(res->devices.empty());
  EXPECT_FALSE(res->opened);
}

TEST_F(DlopenProbeTest, LibraryWithoutTheVerbsSymbolsIsUnavailable) {
  DlopenVerbsProbe probe("libc.so.6");
  auto res = probe.probe(request());
  ASSERT_TRUE(res.has_value()) << res.error().describe();
  EXPECT_FALSE(res->available);
  EXPECT_NE(res->unavailableReason.find("ibv_get_device_list"), std::string::npos)
      << res->unavailableReason;
}

TEST_F(DlopenProbeTest, ChildThatHangsIsKilledAtTheTimeout) {
  DlopenVerbsProbe probe(IBCNI_HANGING_LIB);
  ProbeRequest req = request();
  req.timeout = milliseconds(300);
  const auto start = steady_clock::now();
  auto res = probe.probe(req);
  const auto elapsed = steady_clock::now() - start;
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(res.error().err, ETIMEDOUT) << res.error().describe();
  EXPECT_GE(elapsed, milliseconds(300));
  EXPECT_LT(elapsed, milliseconds(3000));
}

}  // namespace
}  // namespace ibcni::verbs
