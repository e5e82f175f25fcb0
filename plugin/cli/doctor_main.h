// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "plugin/cli/command_line.h"

namespace ibcni::plugin {

// `ibcni doctor`'s flags.
inline constexpr Flag kDoctorJsonFlag{"--json", "", "print the report as JSON"};
inline constexpr Flag kDoctorConfigFlag{
    "--config", "FILE", "also judge whether that network config would work on this node (see below)"};
inline constexpr Flag kDoctorCniPathFlag{
    "--cni-path", "DIR[:DIR...]",
    "with --config: where delegated IPAM plugins are (default $CNI_PATH, else /opt/cni/bin)"};
inline constexpr Flag kDoctorAgentIntervalFlag{
    "--agent-interval", "SECONDS",
    "with --config: the node agent's interval, to judge ipam.cluster's lease (default "
    "$IBCNI_RECONCILE_INTERVAL, else 60)"};
inline constexpr Flag kDoctorFlags[] = {kDoctorJsonFlag, kDoctorConfigFlag, kDoctorCniPathFlag,
                                        kDoctorAgentIntervalFlag};

/// `ibcni doctor [--json] [--config FILE [--cni-path DIR[:DIR...]] [--agent-interval SECONDS]]`:
/// collects the node report with the real implementations (libnl, sysfs at /sys, RDMA netlink, the
/// dlopen verbs probe), prints it on stdout as text or JSON.
/// @return 0 when no problem was found, 1 when some were, 2 on a usage error
[[nodiscard]] int runDoctor(const CommandLine& line);

/// `ibcni reconcile` (reconcile_args.h): one pass of agent/reconcile.h with the real
/// implementations; the report on stdout.
/// @return 0 when nothing failed, 1 when something could not be undone or read, 2 on a usage error
[[nodiscard]] int runReconcile(const CommandLine& line);

/// `ibcni agent ARGS...`: execs ibcni-agent from the directory of ibcni's own executable with ARGS
/// (cli/agent_main.cpp); returns only when it cannot.
/// @return 1 when ibcni-agent cannot be run (the message says where it was looked for)
[[nodiscard]] int runAgent(const CommandLine& line);

}  // namespace ibcni::plugin
