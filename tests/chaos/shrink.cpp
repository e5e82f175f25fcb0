// SPDX-License-Identifier: Apache-2.0
#include "shrink.h"

#include <algorithm>
#include <chrono>

namespace ibcni::chaos {

namespace {

class Shrinker {
 public:
  Shrinker(Runner& runner, const RunResult& failing, int tries, double budget,
           const std::function<void(const std::string&)>& log)
      : runner_(runner), best_(failing), kind_(failing.violation->kind), tries_(tries), budget_(budget), log_(log) {}

  ShrinkResult run() {
    tryCandidate(withoutSkipped(best_.schedule.steps));
    std::size_t n = 2;
    while (best_.schedule.steps.size() >= 2 && !spent()) {
      if (!removeOneChunk(n)) {
        if (n >= best_.schedule.steps.size()) {
          break;
        }
        n = std::min(best_.schedule.steps.size(), n * 2);
      } else {
        n = std::max<std::size_t>(n - 1, 2);
      }
    }
    dropKillPoints();
    return {best_, candidates_, spent()};
  }

 private:
  // Tries the schedule without each of the n chunks in turn; true at the first that still fails.
  bool removeOneChunk(std::size_t n) {
    const auto& steps = best_.schedule.steps;
    const std::size_t chunk = (steps.size() + n - 1) / n;
    for (std::size_t start = 0; start < steps.size() && !spent(); start += chunk) {
      std::vector<Step> candidate(steps.begin(), steps.begin() + static_cast<long>(start));
      candidate.insert(candidate.end(), steps.begin() + static_cast<long>(std::min(steps.size(), start + chunk)),
                       steps.end());
      if (tryCandidate(candidate)) {
        return true;
      }
    }
    return false;
  }

  // Then the kill points the violation does not need: all at once, else one at a time.
  void dropKillPoints() {
    auto without = [](std::vector<Step> steps, std::size_t only) {
      for (std::size_t i = 0; i < steps.size(); ++i) {
        if (only == steps.size() || i == only) {
          std::erase_if(steps[i].args, [](const auto& kv) { return kv.first == "kill"; });
        }
      }
      return steps;
    };
    const std::size_t all = best_.schedule.steps.size();
    if (spent() || std::none_of(best_.schedule.steps.begin(), best_.schedule.steps.end(),
                                [](const Step& st) { return st.has("kill"); })) {
      return;
    }
    if (tryCandidate(without(best_.schedule.steps, all), false)) {
      return;
    }
    for (std::size_t i = 0; i < best_.schedule.steps.size() && !spent(); ++i) {
      if (best_.schedule.steps[i].has("kill") && best_.schedule.steps.size() == all) {
        tryCandidate(without(best_.schedule.steps, i), false);
      }
    }
  }

  bool tryCandidate(const std::vector<Step>& steps, bool smaller = true) {
    if (steps.empty() || (smaller && steps.size() >= best_.schedule.steps.size())) {
      return false;
    }
    Schedule s{best_.schedule.params, steps};
    ++candidates_;
    auto r = runner_.reproduce(s, kind_, tries_);
    if (!r) {
      return false;
    }
    best_ = std::move(*r);
    best_.schedule.steps = withoutSkipped(best_.schedule.steps);
    log_("  shrunk to " + std::to_string(best_.schedule.steps.size()) + " steps" + (smaller ? "" : ", fewer kill points") +
         " (" + std::to_string(candidates_) + " candidates tried)");
    return true;
  }

  static std::vector<Step> withoutSkipped(std::vector<Step> steps) {
    std::erase_if(steps, [](const Step& s) { return s.outcome.rfind("skipped", 0) == 0; });
    return steps;
  }

  [[nodiscard]] bool spent() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count() > budget_;
  }

  Runner& runner_;
  RunResult best_;
  std::string kind_;
  int tries_;
  double budget_;
  const std::function<void(const std::string&)>& log_;
  int candidates_ = 0;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace

ShrinkResult shrink(Runner& runner, const RunResult& failing, int tries, double budgetSeconds,
                    const std::function<void(const std::string&)>& log) {
  return Shrinker(runner, failing, tries, budgetSeconds, log).run();
}

}  // namespace ibcni::chaos
