// SPDX-License-Identifier: Apache-2.0
// Every mutating step of ADD and of DEL fails in turn (ibcni-faulty, IBCNI_FAULT_STEP=N), in sriov
// mode with a veth end as the VF, with the in-process ibcni-ipam and with Debian's host-local.
//
// ADD failing at step N must report the injected error and leave the node exactly as before: links
// (names, indexes, namespaces, MTU, MAC, state, alias), addresses and routes of the host and the
// pod, ibcni's records, the IPAM store's claims, no temporary link names, no lock held. The
// runtime's DEL after it must succeed and change nothing.
//
// DEL failing at step N either succeeds (a step whose failure DEL tolerates) with the node clean,
// or fails with an error object; a second DEL without fault must then succeed and leave the node
// clean, and a third change nothing.
//
// The process killed (SIGKILL) right after each step of ADD, and of DEL (IBCNI_FAULT_KILL_AFTER=N):
// every crash window exactly once. The runtime's DEL, twice, must leave the node clean.
#include <gtest/gtest.h>

#include <iostream>
#include <sstream>

#include "faults/fault_world.h"

namespace ibcni::faults {
namespace {

std::string joinLines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) {
    out += "    " + l + "\n";
  }
  return out;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    out.push_back(line);
  }
  return out;
}

std::vector<std::string> stepEnv(unsigned step, const fs::path& trace) {
  return {std::string("IBCNI_FAULT_STEP=") + std::to_string(step), "IBCNI_FAULT_TRACE=" + trace.string()};
}

std::vector<std::string> killEnv(unsigned step, const fs::path& trace) {
  return {std::string("IBCNI_FAULT_KILL_AFTER=") + std::to_string(step), "IBCNI_FAULT_TRACE=" + trace.string()};
}

// Expects the node to equal `clean`; prints the difference and the trace of the run otherwise.
void expectClean(const FaultBench& b, const std::string& clean, const std::string& what,
                 const std::vector<std::string>& trace) {
  const std::string diff = lineDiff(clean, b.snapshot());
  EXPECT_TRUE(diff.empty()) << what << ": the node differs from before (- before, + after)\n"
                            << diff << "mutating calls of the run:\n"
                            << joinLines(trace);
  EXPECT_EQ(b.temporaryLinkNames(), std::vector<std::string>{}) << what;
  EXPECT_EQ(b.storeProblems(), std::vector<std::string>{}) << what << ": ibcni-ipam's store is inconsistent";
}

class FaultSteps : public ::testing::TestWithParam<IpamKind> {
 protected:
  // One VF and one pod; counts the mutating steps of a successful ADD and DEL and takes the clean
  // snapshot after them.
  void prepare(World& w) {
    bench_.emplace(w, GetParam());
    pod_ = &bench_->pod("pod");
    conf_ = bench_->conf(bench_->vf());
    const std::string pristine = bench_->snapshot();
    const fs::path addTrace = w.tmp() / "add.trace";
    const fs::path delTrace = w.tmp() / "del.trace";
    Exec ok = bench_->run(faultyBinary(), "ADD", "c-count", *pod_, conf_, stepEnv(0, addTrace));
    ASSERT_EQ(ok.status, 0) << ok.describe();
    addSteps_ = readLines(addTrace);
    Exec okDel = bench_->run(faultyBinary(), "DEL", "c-count", *pod_, conf_, stepEnv(0, delTrace));
    ASSERT_EQ(okDel.status, 0) << okDel.describe();
    delSteps_ = readLines(delTrace);
    // The clean state: after one ADD and DEL, the state directory and the IPAM store exist (their
    // directories, lock files, ibcni-ipam's indexes and the pool's network.json, host-local's
    // cursor), as on a node that ran a pod.
    clean_ = bench_->snapshot();
    for (const auto& line : split(lineDiff(pristine, clean_))) {
      EXPECT_TRUE(line.starts_with("+ ") && (line.ends_with("/") || line.find(" index/") != std::string::npos || line.ends_with(" network.json") ||
                                             line.find(" last_reserved_ip") != std::string::npos))
          << "a successful ADD and DEL left more than the store's directories: " << line;
    }
    ASSERT_GE(addSteps_.size(), 10u) << joinLines(addSteps_);
    ASSERT_GE(delSteps_.size(), 5u) << joinLines(delSteps_);
  }
  Exec run(const std::string& command, const std::string& cid, const std::vector<std::string>& env = {}) {
    return bench_->run(faultyBinary(), command, cid, *pod_, conf_, env);
  }

  std::optional<FaultBench> bench_;
  TestNetns* pod_ = nullptr;
  json conf_;
  std::vector<std::string> addSteps_;
  std::vector<std::string> delSteps_;
  std::string clean_;
};

TEST_P(FaultSteps, EveryAddStepFailsCleanlyAndEveryDelStepConverges) {
  CONFORMANCE_WORLD(w);
  ASSERT_NO_FATAL_FAILURE(prepare(w));
  const FaultBench& b = *bench_;
  std::ostringstream report;
  report << toString(GetParam()) << ": ADD has " << addSteps_.size() << " mutating steps, DEL " << delSteps_.size()
         << "\n  ADD:\n"
         << joinLines(addSteps_) << "  DEL:\n"
         << joinLines(delSteps_);

  for (unsigned n = 1; n <= addSteps_.size(); ++n) {
    SCOPED_TRACE("ADD with a fault at step " + std::to_string(n) + " (" + traceOp(addSteps_[n - 1]) + ")");
    const std::string cid = "c-add-" + std::to_string(n);
    const fs::path trace = w.tmp() / ("add-" + std::to_string(n) + ".trace");
    Exec add = run("ADD", cid, stepEnv(n, trace));
    const auto lines = readLines(trace);
    EXPECT_EQ(add.status, 1) << add.describe();
    EXPECT_NE(add.out.find("fault injected at step " + std::to_string(n)), std::string::npos)
        << "the error must be the injected one:\n"
        << add.describe();
    // The calls before the fault are those of the successful ADD: the numbering is deterministic.
    for (unsigned i = 0; i + 1 < n && i < lines.size(); ++i) {
      EXPECT_EQ(traceOp(lines[i]), traceOp(addSteps_[i])) << joinLines(lines);
    }
    expectClean(b, clean_, "ADD failed at step " + std::to_string(n), lines);
    report << "  ADD fault at " << n << " (" << traceOp(addSteps_[n - 1]) << "): code " << add.code() << ", "
           << (lines.size() >= n ? lines.size() - n : 0) << " undo calls\n";

    Exec del = run("DEL", cid);
    EXPECT_EQ(del.status, 0) << "the runtime's DEL after the failed ADD\n" << del.describe();
    expectClean(b, clean_, "DEL after ADD failed at step " + std::to_string(n), lines);
    if (::testing::Test::HasFailure()) {
      break;  // one broken step is enough to read; the rest would repeat it
    }
  }

  // One more than there are: no fault fires and ADD succeeds.
  {
    Exec add = run("ADD", "c-past", {"IBCNI_FAULT_STEP=" + std::to_string(addSteps_.size() + 1)});
    EXPECT_EQ(add.status, 0) << add.describe();
    EXPECT_EQ(run("DEL", "c-past").status, 0);
    expectClean(b, clean_, "ADD and DEL past the last step", {});
  }

  for (unsigned n = 1; n <= delSteps_.size() && !::testing::Test::HasFailure(); ++n) {
    SCOPED_TRACE("DEL with a fault at step " + std::to_string(n) + " (" + traceOp(delSteps_[n - 1]) + ")");
    const std::string cid = "c-del-" + std::to_string(n);
    const fs::path trace = w.tmp() / ("del-" + std::to_string(n) + ".trace");
    Exec add = run("ADD", cid);
    ASSERT_EQ(add.status, 0) << add.describe();
    Exec del = run("DEL", cid, stepEnv(n, trace));
    const auto lines = readLines(trace);
    std::string outcome;
    if (del.status == 0) {
      outcome = "DEL succeeds";
      expectClean(b, clean_, "DEL that succeeded despite a fault at step " + std::to_string(n), lines);
    } else {
      outcome = "DEL fails with code " + std::to_string(del.code());
      EXPECT_NE(del.out.find("fault injected at step " + std::to_string(n)), std::string::npos) << del.describe();
      Exec again = run("DEL", cid);
      EXPECT_EQ(again.status, 0) << "the second DEL must converge\n" << again.describe();
      expectClean(b, clean_, "second DEL after a fault at step " + std::to_string(n), lines);
    }
    Exec third = run("DEL", cid);
    EXPECT_EQ(third.status, 0) << third.describe();
    expectClean(b, clean_, "one more DEL", lines);
    report << "  DEL fault at " << n << " (" << traceOp(delSteps_[n - 1]) << "): " << outcome << "\n";
  }
  std::cout << report.str();
}

TEST_P(FaultSteps, SigkillAfterEveryStepThenDelTwiceLeavesNothing) {
  CONFORMANCE_WORLD(w);
  ASSERT_NO_FATAL_FAILURE(prepare(w));
  FaultBench& b = *bench_;
  int dirty = 0;
  for (const bool duringAdd : {true, false}) {
    const auto& steps = duringAdd ? addSteps_ : delSteps_;
    const std::string verb = duringAdd ? "ADD" : "DEL";
    for (unsigned n = 1; n <= steps.size(); ++n) {
      const std::string what = verb + " killed after step " + std::to_string(n) + " (" + traceOp(steps[n - 1]) + ")";
      SCOPED_TRACE(what);
      // A VF and a pod of its own: each crash window is judged alone, whatever another left.
      auto pod = b.ownPod("kill");
      const std::string vf = b.vf();
      const json conf = b.conf(vf);
      const std::string clean = b.snapshot();
      const std::string cid = "c-kill-" + verb + "-" + std::to_string(n);
      const fs::path trace = w.tmp() / ("kill-" + verb + "-" + std::to_string(n) + ".trace");
      if (!duringAdd) {
        Exec add = b.run(faultyBinary(), "ADD", cid, *pod, conf);
        ASSERT_EQ(add.status, 0) << add.describe();
      }
      Exec killed = b.runUnchecked(faultyBinary(), verb, cid, *pod, conf, killEnv(n, trace));
      const auto lines = readLines(trace);
      EXPECT_EQ(killed.status, 128 + 9) << what << "\n" << killed.describe() << joinLines(lines);
      for (int i = 0; i < 2; ++i) {
        Exec del = b.run(faultyBinary(), "DEL", cid, *pod, conf);
        EXPECT_EQ(del.status, 0) << "the runtime's DEL #" << i + 1 << " after " << what << "\n" << del.describe();
      }
      const std::string diff = lineDiff(clean, b.snapshot());
      dirty += diff.empty() ? 0 : 1;
      EXPECT_TRUE(diff.empty()) << what << ", then DEL twice: the node differs from before (- before, + after)\n"
                                << diff << "mutating calls of the killed run:\n"
                                << joinLines(lines);
      EXPECT_EQ(b.storeProblems(), std::vector<std::string>{}) << what;
      b.forget(*pod);
      // Deleting the peer, which never leaves the host, deletes the VF wherever it was left.
      (void)testing::runIp(w.host(), {"link", "del", w.peerOf(vf)});
    }
  }
  std::cout << toString(GetParam()) << ": killed after each of the " << addSteps_.size() << " ADD steps and "
            << delSteps_.size() << " DEL steps, then DEL twice: " << dirty << " left something behind\n";
}

INSTANTIATE_TEST_SUITE_P(Sriov, FaultSteps, ::testing::Values(IpamKind::kIbcniIpam, IpamKind::kHostLocal),
                         [](const auto& p) { return p.param == IpamKind::kIbcniIpam ? "IbcniIpam" : "HostLocal"; });

}  // namespace
}  // namespace ibcni::faults
