// SPDX-License-Identifier: Apache-2.0
// The claim checker's node (README.md here): ibcni-dra's claim preparation (plugin/dra/
// claim_preparation) in process over eight VFs (a FakeSysfsTree read by the production readers, the
// PF's VF table in a FakeNetlink), its real checkpoint, CDI folder and a real GUID pool store
// shared with sriov-mode pods of the CNI; every step one kubelet call, a claim deleted behind the
// kubelet's back, the driver's sweep of such claims, CNI ADD or DEL, agent pass or reboot, with a kill
// or a failure at a chosen change of the driver; the invariants checked after every step.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ibcni::chaos::claims {

/// One step of a schedule. Its random choices are drawn when it is generated (`pick`), so that a
/// step means the same in a shrunk schedule.
struct Step {
  enum class Kind { kPrepare, kUnprepare, kDelete, kSweep, kCniAdd, kCniDel, kAgent, kReboot };
  Kind kind = Kind::kPrepare;
  int slot = 0;          ///< the claim's (or the CNI pod's) slot
  int killAfter = 0;     ///< the driver is killed after its change number N (0: never)
  int failAt = 0;        ///< its change number N fails (0: none)
  std::uint64_t pick = 0;
  [[nodiscard]] std::string text() const;
};

/// A violated invariant: its kind (G1...) and what was seen.
struct Violation {
  std::string kind;
  std::string what;
};

/// A bug planted in the test's side of the driver's changes, for the checker to find.
enum class Plant {
  kNone,
  kForgetLinkState,   ///< the checkpoint loses each VF's link state before Prepare set it
  kPoolRecordedLate,  ///< a pool GUID is recorded only once the claim is prepared, not ahead of its allocation
};

/// Runs `schedule` on a fresh node; the first violation, if any, with the index of its step.
struct Outcome {
  std::optional<Violation> violation;
  std::size_t failedStep = 0;
  std::vector<std::string> log;  ///< one line per step run: the step and what it answered
};
[[nodiscard]] Outcome run(const std::vector<Step>& schedule, Plant plant);

/// A schedule of `steps` steps drawn from `seed`.
[[nodiscard]] std::vector<Step> generate(std::uint64_t seed, int steps);

}  // namespace ibcni::chaos::claims
