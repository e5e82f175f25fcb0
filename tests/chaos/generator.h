// SPDX-License-Identifier: Apache-2.0
// Draws a schedule's steps at random, one at a time, from the state the previous steps left
// (which pods live, which nodes are up, which faults are active): each op is picked with its
// profile's weight, then its arguments among what makes sense now. What a runtime or an
// operator does in answer to an outcome follows on its own: the DEL the runtime owes a failed
// or killed ADD (at once or later), a killed DEL retried, lost quorum restored after a few steps.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "schedule.h"
#include "world.h"

namespace ibcni::chaos {

struct Profile {
  std::string name;
  std::string purpose;
  std::map<std::string, double> weights;  ///< generator op -> weight (ops without one: never)
  double killChance = 0.05;               ///< chance that an add/del/pass/cnigc gets a kill point
  std::vector<std::string> changes;       ///< the configuration changes it makes (empty: every one)
};

/// Every profile, for --profile and the usage text.
[[nodiscard]] const std::vector<Profile>& profiles();
[[nodiscard]] const Profile* findProfile(const std::string& name);

/// The parameters of schedule `seed` under `base` (backend, compat, plant, profile and the
/// node count range come from the command line; the rest is drawn).
[[nodiscard]] ScheduleParams drawParams(ScheduleParams base, int nodesMin, int nodesMax, std::uint64_t seed);

class Generator {
 public:
  Generator(const Profile& profile, std::uint64_t seed);
  /// The next step for `world` as it is now.
  [[nodiscard]] Step next(const World& world);
  /// Reacts to a step that ran (its outcome set): queues what follows from it.
  void observe(const Step& step, const World& world);

 private:
  [[nodiscard]] std::optional<Step> make(const std::string& op, const World& world);
  [[nodiscard]] std::optional<Step> makeAdd(const std::string& op, const World& world);
  [[nodiscard]] std::optional<Step> makeDel(const World& world);
  [[nodiscard]] std::optional<Step> makeNodeOp(const std::string& op, const World& world);
  [[nodiscard]] std::optional<Step> makeFault(const std::string& op, const World& world);
  [[nodiscard]] std::optional<Step> makeConfig(const std::string& op, const World& world);
  [[nodiscard]] std::string pickOp();
  void maybeKill(Step& step);
  template <typename T>
  [[nodiscard]] const T& pick(const std::vector<T>& from) {
    return from[rng_() % from.size()];
  }
  [[nodiscard]] bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  const Profile& profile_;
  std::mt19937_64 rng_;
  int nextPod_ = 1;
  std::vector<std::pair<int, Step>> followUps_;  ///< (steps to wait, step)
};

/// splitmix64: the seed of schedule i of a run is mix(mix(runSeed) + i).
[[nodiscard]] std::uint64_t mixSeed(std::uint64_t x);

}  // namespace ibcni::chaos
