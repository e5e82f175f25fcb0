// SPDX-License-Identifier: Apache-2.0
// The BUILT ibcni leaves one event per call in <stateDir>/events (plugin/state/call_event_ring.h):
// an ADD that succeeds, an ADD that fails with 7 and a DEL, each with its verb, network and code,
// and the call's stdout and exit status are what they are without the ring. VERSION leaves none.
// Runs in a fresh "host" network namespace with a veth end standing in for the VF (label binary).
// Needs root: skipped otherwise.
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "plugin/state/call_event_ring.h"
#include "support/cni_conf.h"
#include "support/exec_program.h"
#include "support/ip_links.h"
#include "support/temp_dir.h"
#include "support/test_netns.h"

#ifndef IBCNI_BINARY
#error "IBCNI_BINARY must be the path of the built ibcni executable"
#endif

namespace ibcni::testing {
namespace {

namespace fs = std::filesystem;

class CallEventsBinaryTest : public TempDirTest {
 protected:
  CallEventsBinaryTest() : TempDirTest("ibcni-events-bin") {}
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(TempDirTest::SetUp());
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root: it creates network namespaces and moves links";
    }
    auto host = TestNetns::create("host");
    if (!host && isPermissionError(host.error())) {
      GTEST_SKIP() << "network namespaces are not available: " << host.error().describe();
    }
    ASSERT_TRUE(host) << host.error().describe();
    host_.emplace(std::move(*host));
    auto scope = ScopedHostNetns::enter(host_->netns());
    ASSERT_TRUE(scope) << scope.error().describe();
    scope_.emplace(std::move(*scope));
    auto pod = TestNetns::create("pod");
    ASSERT_TRUE(pod) << pod.error().describe();
    pod_.emplace(std::move(*pod));
    vf_ = randomIfName("vf");
    auto veth = createVethPair(host_->netns(), vf_, host_->netns(), randomIfName("pr"));
    ASSERT_TRUE(veth) << veth.error().describe();
    stateDir_ = dir_ + "/state";
  }
  void TearDown() override {
    pod_.reset();
    scope_.reset();
    host_.reset();
  }

  nlohmann::json conf() const {
    nlohmann::json c = ibcniConf("1.1.0", network_, vf_, stateDir_, std::nullopt);
    c.erase("logLevel");
    return c;
  }
  ProgramRun run(const std::string& verb, const nlohmann::json& c) const {
    CniEnv e;
    e.command = verb;
    e.containerId = "cid-events";
    e.netns = pod_->path();
    e.ifName = "net1";
    e.path = "/usr/lib/cni";
    return runProgram(IBCNI_BINARY, e.toVector(), c.dump());
  }

  std::optional<TestNetns> host_;
  std::optional<ScopedHostNetns> scope_;
  std::optional<TestNetns> pod_;
  std::string vf_;
  std::string stateDir_;
  const std::string network_ = "events-net";
};

TEST_F(CallEventsBinaryTest, AddFailedAddAndDelEachLeaveTheirEvent) {
  ProgramRun add = run("ADD", conf());
  ASSERT_EQ(add.status, 0) << add.describe();
  auto result = oneJsonDocument(add.out);
  ASSERT_TRUE(result && result->contains("interfaces")) << add.describe();

  // 7 after the configuration was read: a logFile that is a symbolic link (docs/security.md).
  const std::string link = dir_ + "/ibcni.log";
  fs::create_symlink(dir_ + "/elsewhere.log", link);
  nlohmann::json bad = conf();
  bad["logFile"] = link;
  ProgramRun failed = run("ADD", bad);
  EXPECT_EQ(failed.status, 1) << failed.describe();
  auto error = oneJsonDocument(failed.out);
  ASSERT_TRUE(error) << failed.describe();
  EXPECT_EQ(error->value("code", 0), 7) << failed.describe();
  EXPECT_EQ(error->size(), 3u) << "cniVersion, code, msg: " << failed.out;

  ProgramRun del = run("DEL", conf());
  EXPECT_EQ(del.status, 0) << del.describe();
  EXPECT_EQ(del.out, "");

  ProgramRun version = run("VERSION", conf());
  EXPECT_EQ(version.status, 0) << version.describe();

  auto batch = state::readCallEvents(stateDir_, 0);
  ASSERT_TRUE(batch) << batch.error().msg;
  EXPECT_EQ(batch->lost, 0u);
  ASSERT_EQ(batch->events.size(), 3u) << "ADD, failed ADD and DEL; none for VERSION";
  const auto& e = batch->events;
  EXPECT_EQ(e[0].verb, cni::Command::kAdd);
  EXPECT_EQ(e[0].network, network_);
  EXPECT_EQ(e[0].code, 0);
  EXPECT_EQ(e[1].verb, cni::Command::kAdd);
  EXPECT_EQ(e[1].network, network_);
  EXPECT_EQ(e[1].code, 7);
  EXPECT_EQ(e[2].verb, cni::Command::kDel);
  EXPECT_EQ(e[2].network, network_);
  EXPECT_EQ(e[2].code, 0);
  for (const auto& ev : e) {
    EXPECT_GT(ev.durationSeconds, 0.0);
    EXPECT_LT(ev.durationSeconds, 60.0);
    EXPECT_GT(ev.endUnixMillis, 1600000000000);
  }
  EXPECT_LE(e[0].endUnixMillis, e[2].endUnixMillis);
}

TEST_F(CallEventsBinaryTest, AFailingAppendChangesNeitherOutputNorStatus) {
  // A directory where the ring should be: every append fails (logged at debug only).
  fs::create_directories(stateDir_ + "/events");
  ProgramRun add = run("ADD", conf());
  ASSERT_EQ(add.status, 0) << add.describe();
  auto result = oneJsonDocument(add.out);
  ASSERT_TRUE(result && result->contains("interfaces")) << add.describe();
  ProgramRun del = run("DEL", conf());
  EXPECT_EQ(del.status, 0) << del.describe();
  EXPECT_EQ(del.out, "");
  EXPECT_TRUE(fs::is_directory(stateDir_ + "/events"));
}

}  // namespace
}  // namespace ibcni::testing
