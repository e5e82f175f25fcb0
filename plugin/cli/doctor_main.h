// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <string_view>

#include "plugin/deps.h"
#include "plugin/cli/process_main.h"

namespace ibcni::plugin {

/// `ibcni doctor [--json]`: collects the node report with the real implementations (libnl, sysfs at
/// /sys, RDMA netlink, the dlopen verbs probe), prints it on stdout as text or JSON.
/// @param argc, argv  main()'s, argv[1] being "doctor"
/// @return 0 when no problem was found, 1 when some were, 2 on a usage error
[[nodiscard]] int runDoctor(int argc, char** argv);

/// `ibcni reconcile [--dry-run] [--json] [--verbose] [--state-dir DIR]... [--ipam-data-dir DIR]...`:
/// one pass of commands/reconcile.h with the real implementations; the report on stdout.
/// @return 0 when nothing failed, 1 when something could not be undone or read, 2 on a usage error
[[nodiscard]] int runReconcile(int argc, char** argv);

/// `ibcni agent ARGS...`: execs ibcni-agent from the directory of ibcni's own executable with ARGS
/// (cli/agent_main.cpp); returns only when it cannot.
/// @return 1 when ibcni-agent cannot be run (the message says where it was looked for)
[[nodiscard]] int runAgent(int argc, char** argv);

/// What the ibcni executable does with one invocation, given the node's real dependencies (ibcni
/// dispatches over them; its fault-injection build wraps them first).
using PluginEntry =
    std::function<Outcome(const Getenv& getenv, std::string_view stdinText, bool stdinOk, Deps& production)>;

/// main() of the ibcni executable: `NAME version`, `NAME doctor ...`, `NAME reconcile ...`, `NAME agent ...`, `NAME http-relay`
/// (sends ibcni-ipam's HTTP requests: lib/http/http_relay.h), else one CNI invocation through `entry` (runMain)
/// with the production dependencies.
/// @return the exit status
[[nodiscard]] int runPluginMain(int argc, char** argv, const char* name, const PluginEntry& entry);

}  // namespace ibcni::plugin
