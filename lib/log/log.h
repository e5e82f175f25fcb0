// SPDX-License-Identifier: Apache-2.0
// ibcni's logging front end. spdlog is confined to logging.cpp; logs go to stderr or the
// configured logFile, never to stdout (stdout carries only the CNI result or error).
#pragma once

#include <cstddef>
#include <fmt/core.h>
#include <string>
#include <string_view>
#include <utility>

#include "ibcni/log/level.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::log {

/// The fields carried by every line.
struct Context {
  std::string verb;
  std::string containerId;
  std::string ifName;
  std::string netns;
};

/// Configures the process-wide logger: level, sink (stderr when `file` is empty) and context.
/// Can be called again once the full configuration is known. The log file is opened by
/// os::openLogFile (appended to, never through a symbolic link, a regular file with one link; see
/// docs/security.md). A log file that cannot be opened falls back to stderr, with a warning.
/// @return "" when the file is in use (or none was asked for); otherwise why it was not opened,
///         and whether the rules refused it (rather than a failed system call).
struct SetupProblem {
  std::string reason;    ///< empty: none
  bool refused = false;  ///< the file breaks the rules (the caller may make this an error)
};
SetupProblem setup(Level level, const std::string& file, Context context);

/// True when a message at `level` would be written.
[[nodiscard]] bool enabled(Level level);

/// Writes one line. Control characters in the message (and in the context) are written as \xNN,
/// so that no value can start a line of its own, and a line is cut after kMaxLineBytes.
void write(Level level, std::string_view message);

/// The longest message written on one line.
inline constexpr std::size_t kMaxLineBytes = 16384;

/// Writes everything buffered (the file sink is flushed per line anyway).
void flush();

/// The plugin's os::Rollback failure sink: an undo step that failed is logged at warn level
/// ("undo failed: WHAT: ERROR"), never swallowed.
void failedUndo(const std::string& what, const os::SysError& err);

/// Formats and writes one line at `level`, formatting only when the line would be written.
template <class... A>
void at(Level level, fmt::format_string<A...> f, A&&... a) {
  if (enabled(level)) {
    write(level, fmt::format(f, std::forward<A>(a)...));
  }
}

template <class... A>
void debug(fmt::format_string<A...> f, A&&... a) {
  at(Level::kDebug, f, std::forward<A>(a)...);
}
template <class... A>
void info(fmt::format_string<A...> f, A&&... a) {
  at(Level::kInfo, f, std::forward<A>(a)...);
}
template <class... A>
void warn(fmt::format_string<A...> f, A&&... a) {
  at(Level::kWarn, f, std::forward<A>(a)...);
}
template <class... A>
void error(fmt::format_string<A...> f, A&&... a) {
  at(Level::kError, f, std::forward<A>(a)...);
}

}  // namespace ibcni::log
