// SPDX-License-Identifier: Apache-2.0
// ibcni_claim_chaos: seeded random schedules over ibcni-dra's claim preparation (claim_world.h,
// README.md here). Each schedule runs on a fresh node; the first violation is printed with its
// seed, the whole schedule with what each step answered, and the schedule shrunk by delta debugging.
//   --seed N (1)  --schedules N (200)  --steps N (40)  --seconds S (no limit)
//   --plant forget-link-state|pool-recorded-late   --expect KIND (exit 0 only when a violation of KIND is found)
//   --print 1 (every schedule's steps and answers)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "chaos/claims/claim_world.h"

namespace {

using namespace ibcni::chaos::claims;

/// Whether `schedule` still fails with `kind`.
bool fails(const std::vector<Step>& schedule, Plant plant, const std::string& kind) {
  auto out = run(schedule, plant);
  return out.violation && out.violation->kind == kind;
}

/// ddmin over the steps: drop chunks (halves, quarters, ... single steps) while the violation stays.
std::vector<Step> shrink(std::vector<Step> schedule, Plant plant, const std::string& kind) {
  for (std::size_t chunk = schedule.size() / 2; chunk >= 1; chunk /= 2) {
    for (std::size_t start = 0; start < schedule.size();) {
      std::vector<Step> candidate = schedule;
      candidate.erase(candidate.begin() + static_cast<std::ptrdiff_t>(start),
                      candidate.begin() + static_cast<std::ptrdiff_t>(std::min(start + chunk, candidate.size())));
      if (!candidate.empty() && fails(candidate, plant, kind)) {
        schedule = std::move(candidate);
      } else {
        start += chunk;
      }
    }
  }
  return schedule;
}

void print(const char* title, const std::vector<std::string>& log) {
  std::printf("%s\n", title);
  for (std::size_t i = 0; i < log.size(); ++i) {
    std::printf("  %3zu  %s\n", i + 1, log[i].c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 1;
  int schedules = 200;
  int steps = 40;
  double seconds = 0;
  Plant plant = Plant::kNone;
  std::string expect;
  bool printAll = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--seed") {
      seed = std::strtoull(value.c_str(), nullptr, 10);
    } else if (flag == "--schedules") {
      schedules = std::atoi(value.c_str());
    } else if (flag == "--steps") {
      steps = std::atoi(value.c_str());
    } else if (flag == "--seconds") {
      seconds = std::atof(value.c_str());
    } else if (flag == "--plant" && value == "forget-link-state") {
      plant = Plant::kForgetLinkState;
    } else if (flag == "--plant" && value == "pool-recorded-late") {
      plant = Plant::kPoolRecordedLate;
    } else if (flag == "--print") {
      printAll = value == "1";
    } else if (flag == "--expect") {
      expect = value;
    } else {
      std::fprintf(stderr, "ibcni_claim_chaos: unknown flag or value: %s %s\n", flag.c_str(), value.c_str());
      return 2;
    }
  }
  const auto started = std::chrono::steady_clock::now();
  int ran = 0;
  for (int k = 0; k < schedules; ++k) {
    if (seconds > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() > seconds) {
      break;
    }
    const std::uint64_t s = seed + static_cast<std::uint64_t>(k);
    const std::vector<Step> schedule = generate(s, steps);
    const Outcome out = run(schedule, plant);
    ++ran;
    if (printAll) {
      print(("schedule seed " + std::to_string(s) + ":").c_str(), out.log);
    }
    if (!out.violation) {
      continue;
    }
    std::printf("VIOLATION %s at step %zu of schedule seed %llu (--seed %llu --steps %d):\n  %s\n",
                out.violation->kind.c_str(), out.failedStep + 1, static_cast<unsigned long long>(s),
                static_cast<unsigned long long>(s), steps, out.violation->what.c_str());
    print("schedule, as run:", out.log);
    const std::vector<Step> small = shrink(
        std::vector<Step>(schedule.begin(), schedule.begin() + static_cast<std::ptrdiff_t>(out.failedStep) + 1), plant,
        out.violation->kind);
    const Outcome again = run(small, plant);
    print("shrunk schedule:", again.log);
    if (again.violation) {
      std::printf("  -> %s: %s\n", again.violation->kind.c_str(), again.violation->what.c_str());
    }
    return !expect.empty() && out.violation->kind == expect ? 0 : 1;
  }
  std::printf("%d schedules of %d steps from seed %llu: no violation\n", ran, steps,
              static_cast<unsigned long long>(seed));
  if (!expect.empty()) {
    std::printf("expected a %s violation, found none\n", expect.c_str());
    return 1;
  }
  return 0;
}
