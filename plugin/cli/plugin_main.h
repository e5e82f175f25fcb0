// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <string_view>

#include "plugin/deps.h"
#include "plugin/cli/process_main.h"

namespace ibcni::plugin {

/// What the ibcni executable does with one invocation, given the node's real dependencies (ibcni
/// dispatches over them; its fault-injection build wraps them first).
using PluginEntry =
    std::function<Outcome(const Getenv& getenv, std::string_view stdinText, bool stdinOk, Deps& production)>;

/// main() of the ibcni executable over its table of subcommands (plugin_main.cpp: doctor,
/// reconcile, agent, pools, http-relay, version, help; command_line.h says how a table is run).
/// Without arguments: one CNI invocation through `entry` (runMain) with the production
/// dependencies, or the help when command_line.h's helpWithoutArguments says a person ran it.
/// @param name  the program's name in its help and version line ("ibcni")
/// @return the exit status
[[nodiscard]] int runPluginMain(int argc, char** argv, std::string_view name, const PluginEntry& entry);

}  // namespace ibcni::plugin
