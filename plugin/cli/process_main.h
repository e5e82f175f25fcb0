// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <string_view>

#include "plugin/dispatch.h"

namespace ibcni::plugin {

/// What an executable does with one invocation: build its real dependencies and dispatch.
using Entry = std::function<Outcome(const Getenv& getenv, std::string_view stdinText, bool stdinOk)>;

/// The body of main() for ibcni and ibcni-ipam, the one place where errors become bytes on stdout
/// and an exit status: reads stdin (at most 16 MiB), runs `entry` with the process environment,
/// turns a stray exception (bad_alloc, a bug) into error 999, flushes the log, prints the outcome.
/// @return the exit status
[[nodiscard]] int runMain(const Entry& entry);

}  // namespace ibcni::plugin
