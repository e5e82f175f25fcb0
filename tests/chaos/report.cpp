// SPDX-License-Identifier: Apache-2.0
#include "report.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace ibcni::chaos {

namespace {

std::string fixed(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string scheduleBlock(const RunResult& r) {
  std::ostringstream out;
  for (std::size_t i = 0; i < r.schedule.steps.size(); ++i) {
    out << "    " << stepLine(i + 1, r.schedule.steps[i], true) << "\n";
  }
  if (!r.end.empty()) {
    out << "    " << r.end << "\n";
  }
  return out.str();
}

std::string writeSchedule(const std::string& dir, const std::string& name, const RunResult& r) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::trunc);
  out << r.schedule.text(true);
  if (r.violation) {
    out << "# violation " << r.violation->kind << " at "
        << (r.violation->step == 0 ? std::string("the end") : "step " + std::to_string(r.violation->step)) << ": "
        << r.violation->message << "\n";
  }
  return out ? path : "(could not write " + path + ")";
}

// "add 120 (ok 100, error 108 12, killed 8)" per op.
std::string opsText(const Stats& stats) {
  std::ostringstream out;
  for (const auto& [op, n] : stats.ops) {
    out << "    " << op << " " << n << " (";
    bool first = true;
    for (const auto& [key, count] : stats.outcomes) {
      if (key.rfind(op + " ", 0) == 0) {
        out << (first ? "" : ", ") << key.substr(op.size() + 1) << " " << count;
        first = false;
      }
    }
    out << ")\n";
  }
  return out.str();
}

}  // namespace

std::string summaryText(const RunSummary& s) {
  std::ostringstream out;
  out << "ibcni_chaos summary: backend " << s.backend << ", " << (s.baseline ? "baseline" : "new") << " plugin "
      << s.plugin << ", profile " << s.profile << ", seed " << s.seed << "\n";
  auto times = s.secondsPerSchedule;
  std::sort(times.begin(), times.end());
  double sum = 0;
  for (double t : times) {
    sum += t;
  }
  out << "  schedules: " << s.schedules << ", steps: " << s.steps << ", ibcni-ipam processes: " << s.stats.invocations
      << ", wall time " << fixed(s.wallSeconds, 1) << " s\n";
  if (!times.empty()) {
    out << "  seconds per schedule: mean " << fixed(sum / static_cast<double>(times.size())) << ", median "
        << fixed(times[times.size() / 2]) << ", p90 " << fixed(times[times.size() * 9 / 10]) << ", max "
        << fixed(times.back()) << "\n";
  }
  out << "  ops and faults (outcomes):\n" << opsText(s.stats);
  out << "  I7 (capacity) judged " << s.stats.i7Checks - s.stats.i7Inconclusive << " time(s), not judged "
      << s.stats.i7Inconclusive << " time(s) (a fault or a stopped agent was active)\n";
  out << "  violations: " << s.violations;
  for (const auto& [kind, n] : s.violationsByKind) {
    out << (kind == s.violationsByKind.begin()->first ? " (" : ", ") << kind << " " << n;
  }
  out << (s.violationsByKind.empty() ? "" : ")");
  if (s.firstViolationSchedule >= 0) {
    out << "; the first in schedule " << s.firstViolationSchedule << " (of the run), " << fixed(s.firstViolationSeconds, 1)
        << " s into the run";
  }
  out << "\n";
  return out.str();
}

std::string violationReport(const RunResult& failing, const ShrinkResult* shrunk, const std::string& outDir,
                            const std::string& plugin, double secondsToFind) {
  const Violation& v = *failing.violation;
  const auto& p = failing.schedule.params;
  const std::string base = v.kind + "-seed" + std::to_string(p.seed);
  std::ostringstream out;
  out << "VIOLATION " << v.kind << " (seed " << p.seed << ", backend " << p.backend << ", "
      << (v.step == 0 ? std::string("at the end-of-schedule checks") : "at step " + std::to_string(v.step)) << " of "
      << failing.schedule.steps.size() << ", found after " << fixed(secondsToFind, 1) << " s):\n  " << v.message
      << "\n  schedule (" << failing.schedule.steps.size() << " steps, " << p.nodes << " nodes, " << p.networks
      << " networks, lease " << p.leaseSeconds << " s, releaseAfter " << p.releaseAfterSeconds << " s):\n"
      << scheduleBlock(failing);
  const std::string full = writeSchedule(outDir, base + ".schedule", failing);
  out << "  written: " << full << "\n";
  if (shrunk != nullptr) {
    const RunResult& s = shrunk->run;
    out << "  SHRUNK schedule (" << s.schedule.steps.size() << " steps after " << shrunk->candidates
        << " candidates" << (shrunk->budgetSpent ? ", shrinking budget spent" : "") << "): " << s.violation->kind
        << ": " << s.violation->message << "\n"
        << scheduleBlock(s);
    const std::string small = writeSchedule(outDir, base + ".shrunk.schedule", s);
    out << "  written: " << small << "\n  replay: ibcni_chaos --plugin " << plugin << " --replay " << small << "\n";
  }
  return out.str();
}

}  // namespace ibcni::chaos
