// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "deps.h"

namespace ibcni::plugin {

/// What the process prints on stdout and the status it exits with.
struct Outcome {
  std::string stdoutText;  ///< a result, a version answer, an error object, or nothing
  int exitCode = 0;
};

/// Reads one environment variable; nullopt when unset.
using Getenv = std::function<std::optional<std::string>(const char*)>;

/// The whole protocol as a pure function of (environment, stdin, dependencies): validates the CNI_*
/// environment against the per-verb table, negotiates the version, parses the configuration, runs
/// the verb and turns any error into the spec's error object.
/// @param stdinOk  false when reading stdin failed (error 5)
[[nodiscard]] Outcome dispatch(const Getenv& getenv, std::string_view stdinText, bool stdinOk, Deps& deps);

}  // namespace ibcni::plugin
