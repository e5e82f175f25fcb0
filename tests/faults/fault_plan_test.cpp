// SPDX-License-Identifier: Apache-2.0
// The fault hook itself: FaultPlan's numbering, environment and trace, and its absence from the
// release ibcni (ibcni-faulty is a separate executable; tests/support/fault/ refuses to compile
// without IBCNI_FAULT_INJECTION_BUILD, and this test checks the built binaries).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "support/fault/fault_plan.h"

#ifndef IBCNI_BINARY
#error "IBCNI_BINARY must be the path of the built ibcni executable"
#endif
#ifndef IBCNI_FAULTY_BINARY
#error "IBCNI_FAULTY_BINARY must be the path of the built ibcni-faulty executable"
#endif

namespace ibcni::fault {
namespace {

std::string readBinary(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ReleaseBinary, HasNoFaultHookAndTheFaultyOneHas) {
  const std::string release = readBinary(IBCNI_BINARY);
  const std::string faulty = readBinary(IBCNI_FAULTY_BINARY);
  ASSERT_GT(release.size(), 100000u) << IBCNI_BINARY;
  ASSERT_GT(faulty.size(), 100000u) << IBCNI_FAULTY_BINARY;
  for (const char* marker : {kStepEnv, kErrnoEnv, kTraceEnv, "fault injected at step", "FaultPlan", "FaultyNetlink"}) {
    EXPECT_EQ(release.find(marker), std::string::npos) << "the release ibcni contains \"" << marker << "\"";
  }
  for (const char* marker : {kStepEnv, kTraceEnv, "fault injected at step"}) {
    EXPECT_NE(faulty.find(marker), std::string::npos) << "ibcni-faulty lacks \"" << marker << "\"";
  }
}

os::SysResult<void> succeed() { return {}; }

TEST(FaultPlan, CountsEveryCallAndFailsOnlyThePlannedOneWithItsErrno) {
  const std::string trace = ::testing::TempDir() + "/fault_plan_test.trace";
  std::filesystem::remove(trace);
  {
    FaultPlan plan(2, 0, trace);
    EXPECT_TRUE(plan.run("first", EBUSY, succeed));
    auto second = plan.run("second", EBUSY, [] { return os::SysResult<void>{}; });
    ASSERT_FALSE(second);
    EXPECT_EQ(second.error().err, EBUSY);
    EXPECT_EQ(second.error().op, "second");
    EXPECT_NE(second.error().extAck.find("fault injected at step 2"), std::string::npos);
    EXPECT_TRUE(plan.run("third", EBUSY, succeed)) << "fires once";
    EXPECT_EQ(plan.run("fourth", EIO, [] { return os::SysResult<void>(os::sysFail(ENODEV, "real")); }).error().err,
              ENODEV)
        << "a real failure passes through";
    EXPECT_EQ(plan.steps(), 4u);
    EXPECT_TRUE(plan.fired());
  }
  std::ifstream f(trace);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), "1\tfirst\tok\n2\tsecond\tINJECTED EBUSY\n3\tthird\tok\n4\tfourth\terror ENODEV\n");
}

TEST(FaultPlan, EnvironmentIsValidated) {
  std::map<std::string, std::string> env;
  auto getenv = [&env](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  auto none = FaultPlan::fromEnvironment(getenv);
  ASSERT_TRUE(none);
  EXPECT_TRUE((*none)->run("x", EBUSY, succeed)) << "no step: nothing fails";

  env = {{kStepEnv, "1"}, {kErrnoEnv, "EEXIST"}};
  auto named = FaultPlan::fromEnvironment(getenv);
  ASSERT_TRUE(named);
  EXPECT_EQ((*named)->run("x", EBUSY, succeed).error().err, EEXIST);
  env[kErrnoEnv] = "28";
  EXPECT_EQ((*FaultPlan::fromEnvironment(getenv))->run("x", EBUSY, succeed).error().err, ENOSPC);

  for (const auto& [name, value] : std::vector<std::pair<const char*, const char*>>{
           {kStepEnv, "two"}, {kStepEnv, "-1"}, {kErrnoEnv, "ENOTANERRNO"}, {kTraceEnv, "/nonexistent/dir/trace"}}) {
    env = {{kStepEnv, "1"}};
    env[name] = value;
    auto bad = FaultPlan::fromEnvironment(getenv);
    ASSERT_FALSE(bad) << name << "=" << value;
    EXPECT_NE(bad.error().find(name), std::string::npos) << bad.error();
  }
}

}  // namespace
}  // namespace ibcni::fault
