// SPDX-License-Identifier: Apache-2.0
#include "support/fault/fault_plan.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <cerrno>
#include <charconv>

namespace ibcni::fault {

namespace {

std::optional<unsigned> parseUnsigned(const std::string& text) {
  unsigned v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    return std::nullopt;
  }
  return v;
}

}  // namespace

std::optional<int> parseErrno(const std::string& text) {
  if (auto n = parseUnsigned(text)) {
    if (*n > 0 && *n < 4096) {
      return static_cast<int>(*n);
    }
    return std::nullopt;
  }
  for (int e = 1; e < 200; ++e) {
    if (os::errnoName(e) == text) {
      return e;
    }
  }
  return std::nullopt;
}

FaultPlan::FaultPlan(unsigned failStep, int err, const std::string& tracePath, unsigned killAfter)
    : failStep_(failStep), err_(err), killAfter_(killAfter) {
  if (!tracePath.empty()) {
    trace_ = os::UniqueFd(::open(tracePath.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  }
}

std::expected<std::unique_ptr<FaultPlan>, std::string> FaultPlan::fromEnvironment(
    const std::function<std::optional<std::string>(const char*)>& getenv) {
  unsigned step = 0;
  if (auto text = getenv(kStepEnv); text && !text->empty()) {
    auto n = parseUnsigned(*text);
    if (!n) {
      return std::unexpected(std::string(kStepEnv) + "=" + *text + ": expected a step number (1, 2, ...)");
    }
    step = *n;
  }
  int err = 0;
  if (auto text = getenv(kErrnoEnv); text && !text->empty()) {
    auto e = parseErrno(*text);
    if (!e) {
      return std::unexpected(std::string(kErrnoEnv) + "=" + *text + ": expected an errno number or name (EBUSY)");
    }
    err = *e;
  }
  unsigned killAfter = 0;
  if (auto text = getenv(kKillAfterEnv); text && !text->empty()) {
    auto n = parseUnsigned(*text);
    if (!n) {
      return std::unexpected(std::string(kKillAfterEnv) + "=" + *text + ": expected a step number (1, 2, ...)");
    }
    killAfter = *n;
  }
  std::string trace = getenv(kTraceEnv).value_or("");
  auto plan = std::make_unique<FaultPlan>(step, err, trace, killAfter);
  if (!trace.empty() && !plan->trace_) {
    return std::unexpected(std::string(kTraceEnv) + "=" + trace + ": cannot open it for appending");
  }
  return plan;
}

std::optional<os::SysError> FaultPlan::next(const std::string& what, int defaultErr) {
  ++steps_;
  pending_ = std::to_string(steps_) + "\t" + what;
  if (fired_ || steps_ != failStep_) {
    return std::nullopt;
  }
  fired_ = true;
  const int err = err_ != 0 ? err_ : defaultErr;
  writeLine(pending_ + "\tINJECTED " + os::errnoName(err));
  return os::SysError{err, what, "fault injected at step " + std::to_string(steps_) + " (" + kStepEnv + ")"};
}

void FaultPlan::trace(const std::string& outcome) {
  writeLine(pending_ + "\t" + outcome);
  if (killAfter_ != 0 && steps_ == killAfter_) {
    writeLine(std::to_string(steps_) + "\tKILLED after this step");
    if (onKill_) {
      onKill_();
      return;
    }
    ::kill(::getpid(), SIGKILL);
  }
}

void FaultPlan::writeLine(const std::string& line) {
  if (!trace_) {
    return;
  }
  std::string text = line + "\n";
  // One write(2) per line on an O_APPEND file: lines of concurrent processes never interleave.
  (void)!::write(trace_.get(), text.data(), text.size());
}

}  // namespace ibcni::fault
