// SPDX-License-Identifier: Apache-2.0
// ibcni's logging front end. spdlog is confined to logging.cpp; logs go to stderr or the
// configured logFile, never to stdout (stdout carries only the CNI result or error).
#pragma once

#include <fmt/core.h>
#include <string>
#include <string_view>
#include <utility>

#include "ibcni/config/net_conf.h"

namespace ibcni::log {

/// The fields carried by every line.
struct Context {
  std::string verb;
  std::string containerId;
  std::string ifName;
  std::string netns;
};

/// Configures the process-wide logger: level, sink (stderr when `file` is empty) and context.
/// Can be called again once the full configuration is known. A log file that cannot be opened
/// falls back to stderr, with a warning.
void setup(config::LogLevel level, const std::string& file, Context context);

/// True when a message at `level` would be written.
[[nodiscard]] bool enabled(config::LogLevel level);

void write(config::LogLevel level, std::string_view message);

/// Writes everything buffered (the file sink is flushed per line anyway).
void flush();

template <class... A>
void debug(fmt::format_string<A...> f, A&&... a) {
  if (enabled(config::LogLevel::kDebug)) {
    write(config::LogLevel::kDebug, fmt::format(f, std::forward<A>(a)...));
  }
}
template <class... A>
void info(fmt::format_string<A...> f, A&&... a) {
  if (enabled(config::LogLevel::kInfo)) {
    write(config::LogLevel::kInfo, fmt::format(f, std::forward<A>(a)...));
  }
}
template <class... A>
void warn(fmt::format_string<A...> f, A&&... a) {
  if (enabled(config::LogLevel::kWarn)) {
    write(config::LogLevel::kWarn, fmt::format(f, std::forward<A>(a)...));
  }
}
template <class... A>
void error(fmt::format_string<A...> f, A&&... a) {
  if (enabled(config::LogLevel::kError)) {
    write(config::LogLevel::kError, fmt::format(f, std::forward<A>(a)...));
  }
}

}  // namespace ibcni::log
