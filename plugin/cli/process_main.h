// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <functional>
#include <string_view>

#include "ibcni/state/call_events.h"

#include "plugin/dispatch.h"

namespace ibcni::plugin {

/// What an executable does with one invocation: build its real dependencies and dispatch.
using Entry = std::function<Outcome(const Getenv& getenv, std::string_view stdinText, bool stdinOk)>;

/// The body of main() for ibcni and ibcni-ipam, the one place where errors become bytes on stdout
/// and an exit status: reads stdin (at most 16 MiB; not when it is a terminal and CNI_COMMAND is
/// unset, a call that fails with error 4 anyway), runs `entry` with the process environment,
/// turns a stray exception (bad_alloc, a bug) into error 999, flushes the log, prints the outcome.
/// @return the exit status
[[nodiscard]] int runMain(const Entry& entry);

/// Appends the event of the call `out` describes to `sink` (nothing for VERSION or when CNI_COMMAND
/// named no verb, or when `sink` is null), its duration counted from `start`. Never fails and never
/// throws: a failed append is logged at debug, and the call's output stays as it is.
void appendCallEvent(state::CallEvents* sink, const Outcome& out, std::chrono::steady_clock::time_point start) noexcept;

}  // namespace ibcni::plugin
