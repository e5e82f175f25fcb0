// SPDX-License-Identifier: Apache-2.0
// runProgram as the benchmarks use it: arguments, the fork -> wait4 interval and the peak RSS,
// beside what the binary tests rely on (exact environment, stdin, both streams, exit status).
#include "support/exec_program.h"

#include <gtest/gtest.h>

namespace ibcni::testing {
namespace {

TEST(ExecProgram, PassesArgumentsEnvironmentAndStdinAndCapturesBothStreams) {
  const ProgramRun run =
      runProgram(std::vector<std::string>{"/bin/sh", "-c", "cat; echo \"$X$1\"; echo e >&2; exit 3", "sh", "!"},
                 {"X=value"}, std::string("in\n"));
  EXPECT_EQ(run.status, 3) << run.describe();
  EXPECT_EQ(run.out, "in\nvalue!\n");
  EXPECT_EQ(run.err, "e\n");
}

TEST(ExecProgram, TimesForkToWait4AndReportsThePeakRss) {
  const ProgramRun run = runProgram(std::vector<std::string>{"/bin/sh", "-c", "sleep 0.2"}, {kPathEnv}, std::nullopt);
  ASSERT_EQ(run.status, 0) << run.describe();
  EXPECT_GE(run.elapsed(), std::chrono::milliseconds(200));
  EXPECT_LT(run.elapsed(), std::chrono::seconds(30));
  EXPECT_GT(run.maxRssKiB, 0);
}

TEST(ExecProgram, PathAloneRunsTheProgramWithoutArguments) {
  const ProgramRun run = runProgram("/bin/sh", {}, std::string("echo \"$#\""));
  EXPECT_EQ(run.status, 0) << run.describe();
  EXPECT_EQ(run.out, "0\n");
  EXPECT_EQ(runProgram(std::vector<std::string>{}, {}, std::nullopt).status, -1);
}

}  // namespace
}  // namespace ibcni::testing
