// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

#include "ibcni/os/rollback.h"

namespace ibcni::os {
namespace {

TEST(Rollback, UndoesNewestFirstAndReportsFailures) {
  std::vector<std::string> order;
  std::vector<std::string> failed;
  {
    Rollback rb([&](const std::string& what, const SysError& e) { failed.push_back(what + ":" + errnoName(e.err)); });
    rb.add("a", [&]() -> SysResult<void> { order.push_back("a"); return {}; });
    rb.add("b", [&]() -> SysResult<void> { order.push_back("b"); return sysFail(EBUSY, "b"); });
    rb.add("c", [&]() -> SysResult<void> { order.push_back("c"); return {}; });
  }
  EXPECT_EQ(order, (std::vector<std::string>{"c", "b", "a"}));
  EXPECT_EQ(failed, (std::vector<std::string>{"b:EBUSY"}));
}

TEST(Rollback, CommitKeepsEverything) {
  int undone = 0;
  {
    Rollback rb;
    rb.add("x", [&]() -> SysResult<void> { ++undone; return {}; });
    rb.commit();
  }
  EXPECT_EQ(undone, 0);
}

TEST(Rollback, RunCountsFailuresAndEmpties) {
  Rollback rb;
  rb.add("x", []() -> SysResult<void> { return sysFail(EIO, "x"); });
  rb.add("y", []() -> SysResult<void> { return {}; });
  EXPECT_EQ(rb.run(), 1);
  EXPECT_EQ(rb.size(), 0u);
  EXPECT_EQ(rb.run(), 0);
}

TEST(SysError, DescribeNamesErrnoAndExtAck) {
  SysError e{ENODEV, "move vf0", "kernel says no"};
  auto d = e.describe();
  EXPECT_NE(d.find("move vf0"), std::string::npos);
  EXPECT_NE(d.find("ENODEV"), std::string::npos);
  EXPECT_NE(d.find("kernel says no"), std::string::npos);
}

}  // namespace
}  // namespace ibcni::os
