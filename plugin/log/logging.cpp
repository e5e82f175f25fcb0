// SPDX-License-Identifier: Apache-2.0
#include "log/log.h"

#include <memory>
#include <spdlog/logger.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace ibcni::log {

namespace {

// A synchronous logger: spdlog's async logger owns a thread pool, and threads would not follow
// the namespace switches of the plugin's single thread.
struct State {
  std::shared_ptr<spdlog::logger> logger;
  config::LogLevel level = config::LogLevel::kWarn;
  std::string prefix;
};

State& state() {
  static State s;
  return s;
}

spdlog::level::level_enum toSpd(config::LogLevel l) {
  switch (l) {
    case config::LogLevel::kError:
      return spdlog::level::err;
    case config::LogLevel::kWarn:
      return spdlog::level::warn;
    case config::LogLevel::kInfo:
      return spdlog::level::info;
    case config::LogLevel::kDebug:
      return spdlog::level::debug;
  }
  return spdlog::level::warn;
}

std::shared_ptr<spdlog::logger> stderrLogger() {
  return std::make_shared<spdlog::logger>("ibcni", std::make_shared<spdlog::sinks::stderr_sink_st>());
}

}  // namespace

void setup(config::LogLevel level, const std::string& file, Context context) {
  State& s = state();
  std::string fileError;
  std::shared_ptr<spdlog::logger> logger;
  if (!file.empty()) {
    try {
      logger = std::make_shared<spdlog::logger>(
          "ibcni", std::make_shared<spdlog::sinks::basic_file_sink_st>(file, /*truncate=*/false));
    } catch (const spdlog::spdlog_ex& e) {
      // spdlog reports an unopenable file by exception; fall back to stderr and say why.
      fileError = e.what();
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
  s.prefix = fmt::format("{} containerID={} ifname={}{}: ", context.verb.empty() ? "-" : context.verb,
                         context.containerId.empty() ? "-" : context.containerId,
                         context.ifName.empty() ? "-" : context.ifName,
                         context.netns.empty() ? "" : " netns=" + context.netns);
  if (!fileError.empty()) {
    write(config::LogLevel::kWarn, "cannot open logFile " + file + ", logging to stderr: " + fileError);
  }
}

bool enabled(config::LogLevel level) { return static_cast<int>(level) <= static_cast<int>(state().level); }

void write(config::LogLevel level, std::string_view message) {
  State& s = state();
  if (!s.logger) {
    s.logger = stderrLogger();
    s.logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z [%l] ibcni[%P] %v");
    s.logger->set_level(toSpd(s.level));
  }
  s.logger->log(toSpd(level), "{}{}", s.prefix, message);
}

void flush() {
  if (state().logger) {
    state().logger->flush();
  }
}

}  // namespace ibcni::log
