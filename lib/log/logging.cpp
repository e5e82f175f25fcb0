// SPDX-License-Identifier: Apache-2.0
#include "lib/log/log.h"

#include <algorithm>
#include <memory>
#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "ibcni/os/file_io.h"
#include "ibcni/os/safe_path.h"
#include "ibcni/os/unique_fd.h"

namespace ibcni::log {

namespace {

// A synchronous logger: spdlog's async logger owns a thread pool, and threads would not follow
// the namespace switches of the plugin's single thread.
struct State {
  std::shared_ptr<spdlog::logger> logger;
  Level level = Level::kWarn;
  std::string prefix;
};

State& state() {
  static State s;
  return s;
}

// The log file, opened by os::openLogFile (O_APPEND|O_NOFOLLOW, a regular file). One write(2)
// per line: with O_APPEND, lines of concurrent invocations never interleave.
class AppendFdSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  explicit AppendFdSink(os::UniqueFd fd) : fd_(std::move(fd)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    // A log line that cannot be written is lost; the CNI result on stdout matters more.
    (void)os::writeAll(fd_.get(), std::string_view(line.data(), line.size()), "logFile");
  }
  void flush_() override {}

 private:
  os::UniqueFd fd_;
};

spdlog::level::level_enum toSpd(Level l) {
  switch (l) {
    case Level::kError:
      return spdlog::level::err;
    case Level::kWarn:
      return spdlog::level::warn;
    case Level::kInfo:
      return spdlog::level::info;
    case Level::kDebug:
      return spdlog::level::debug;
  }
  return spdlog::level::warn;
}

std::shared_ptr<spdlog::logger> stderrLogger() {
  return std::make_shared<spdlog::logger>("ibcni", std::make_shared<spdlog::sinks::stderr_sink_st>());
}

// Control characters as \xNN, so that a value (an interface name, a config key, a kernel message)
// can never end a log line and forge the next one; cut after `max` bytes.
std::string escaped(std::string_view text, std::size_t max) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(std::min(text.size(), max));
  for (std::size_t i = 0; i < text.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > max) {
    out += "... (" + std::to_string(text.size()) + " bytes)";
  }
  return out;
}

}  // namespace

SetupProblem setup(Level level, const std::string& file, Context context) {
  State& s = state();
  SetupProblem problem;
  std::shared_ptr<spdlog::logger> logger;
  if (!file.empty()) {
    auto fd = os::openLogFile(file);
    if (fd) {
      logger = std::make_shared<spdlog::logger>("ibcni", std::make_shared<AppendFdSink>(std::move(*fd)));
    } else {
      problem.refused = os::isRefusal(fd.error());
      problem.reason = problem.refused ? fd.error().op : fd.error().describe();
    }
  }
  if (!logger) {
    logger = stderrLogger();
  }
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z [%l] ibcni[%P] %v");
  logger->set_level(toSpd(level));
  logger->flush_on(spdlog::level::debug);
  s.logger = std::move(logger);
  s.level = level;
  // The context comes from the environment before it is validated: escaped and cut like messages.
  s.prefix = fmt::format("{} containerID={} ifname={}{}: ", context.verb.empty() ? "-" : escaped(context.verb, 16),
                         context.containerId.empty() ? "-" : escaped(context.containerId, 256),
                         context.ifName.empty() ? "-" : escaped(context.ifName, 64),
                         context.netns.empty() ? "" : " netns=" + escaped(context.netns, 512));
  if (!problem.reason.empty()) {
    write(Level::kWarn,
          "cannot use logFile " + escaped(file, 512) + ", logging to stderr: " + problem.reason);
  }
  return problem;
}

bool enabled(Level level) { return static_cast<int>(level) <= static_cast<int>(state().level); }

void write(Level level, std::string_view message) {
  State& s = state();
  if (!s.logger) {
    s.logger = stderrLogger();
    s.logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z [%l] ibcni[%P] %v");
    s.logger->set_level(toSpd(s.level));
  }
  s.logger->log(toSpd(level), "{}{}", s.prefix, escaped(message, kMaxLineBytes));
}

void flush() {
  if (state().logger) {
    state().logger->flush();
  }
}

void failedUndo(const std::string& what, const os::SysError& err) {
  warn("undo failed: {}: {}", what, err.describe());
}

}  // namespace ibcni::log
