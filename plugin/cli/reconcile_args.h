// SPDX-License-Identifier: Apache-2.0
// The command lines of `ibcni reconcile` and of the node agent (`ibcni agent`, ibcni-agent): their
// flags as the help lists them (command_line.h), and the reconcile options they share.
#pragma once

#include <expected>
#include <string_view>

#include "plugin/agent/reconcile.h"
#include "plugin/cli/command_line.h"

namespace ibcni::plugin {

// What reconcile and the agent share.
inline constexpr Flag kDryRunFlag{"--dry-run", "", "change nothing: list what would be undone"};
inline constexpr Flag kStateDirFlag{"--state-dir", "DIR", "ibcni's stateDir (default /run/ibcni)", true};
inline constexpr Flag kIpamDataDirFlag{"--ipam-data-dir", "DIR", "ibcni-ipam's ipam.dataDir (default /run/ibcni-ipam)",
                                       true};
inline constexpr Flag kPoolIndexDirFlag{
    "--pool-index-dir", "DIR",
    "where the default dataDir's cluster pools are kept across reboots (default /var/lib/ibcni/pools; \"\": none)"};

// `ibcni reconcile`.
inline constexpr Flag kReconcileJsonFlag{"--json", "", "print the report as JSON on stdout"};
inline constexpr Flag kReconcileVerboseFlag{"--verbose", "", "log each step on stderr"};
inline constexpr Flag kReconcileFlags[] = {kDryRunFlag,   kReconcileJsonFlag, kReconcileVerboseFlag,
                                           kStateDirFlag, kIpamDataDirFlag,   kPoolIndexDirFlag};
inline constexpr std::string_view kReconcileSummary =
    "one pass undoing what dead pods left (attachments, addresses) and renewing this node's cluster blocks";
inline constexpr std::string_view kReconcileDetails =
    "Undoes what the DELs that never came would have undone: every attachment whose pod network\n"
    "namespace is gone (device back home, IPAM released, record removed), then every ibcni-ipam\n"
    "allocation whose pod network namespace is gone. Live attachments, and those whose namespace\n"
    "cannot be checked from here, are left alone. For each ibcni-ipam cluster pool\n"
    "(DIR/.cluster/POOL), it also renews this node's blocks and gives back those empty for\n"
    "ipam.cluster.releaseAfterSeconds (a node keeps one per range set). A pool whose directory a\n"
    "reboot wiped is given it back first from --pool-index-dir, so that its idle blocks go back\n"
    "without waiting for its next ADD.\n"
    "exit status: 0 nothing failed, 1 something could not be undone or read, 2 usage\n";

// The node agent.
inline constexpr Flag kAgentIntervalFlag{"--interval", "SECONDS",
                                         "seconds between passes (default 60; 0: no passes, metrics only)"};
inline constexpr Flag kAgentListenFlag{"--metrics-listen", "ADDRESS:PORT",
                                       "where to serve /metrics and /healthz (default :9464, every IPv4 address)"};
inline constexpr Flag kAgentOnceFlag{"--once", "", "one pass, then exit (status 1 when it failed something)"};
inline constexpr Flag kAgentHostRootFlag{"--host-root", "DIR",
                                         "the node's / as mounted in this container: run the passes in the node's "
                                         "namespaces (see below)"};
inline constexpr Flag kAgentRelaySocketFlag{
    "--http-relay-socket", "PATH",
    "where to serve the plugins' cluster requests (default /run/ibcni/http-relay.sock; \"\": nowhere)"};
inline constexpr Flag kAgentFlags[] = {kAgentIntervalFlag, kAgentListenFlag, kStateDirFlag,  kIpamDataDirFlag,
                                       kPoolIndexDirFlag,  kDryRunFlag,      kAgentOnceFlag, kAgentHostRootFlag,
                                       kAgentRelaySocketFlag};
inline constexpr std::string_view kAgentSummary =
    "the node agent: a reconcile pass every --interval seconds, and Prometheus metrics";
inline constexpr std::string_view kAgentDetails =
    "The node agent, ibcni-agent (`ibcni agent` runs the one beside ibcni): `ibcni reconcile`'s pass\n"
    "every --interval seconds, its report on stdout, and Prometheus metrics at\n"
    "http://ADDRESS:PORT/metrics (/healthz: \"ok\"). Runs until SIGTERM or SIGINT (then exits 0 after\n"
    "the current pass).\n"
    "--host-root DIR (the DaemonSet's pod): PID 1's / must be DIR (hostPID); the agent then enters\n"
    "PID 1's mount namespace, and its passes PID 1's network namespace, where they see what the\n"
    "runtime and ibcni's DEL see; /metrics stays in the pod's own network namespace.\n"
    "--http-relay-socket PATH: ibcni and ibcni-ipam send their cluster pools' requests through the\n"
    "agent (root and the agent's user only), which keeps libcurl loaded and its connections open;\n"
    "without an agent they send them themselves. Not served with --once.\n"
    "exit status: 0 stopped by a signal (or --once's pass failed nothing), 1 cannot listen or the\n"
    "pass failed, 2 usage\n";

/// The reconcile options `line` gives (--dry-run, --state-dir, --ipam-data-dir, --pool-index-dir),
/// with the defaults for what it does not: stateDir /run/ibcni, ipam.dataDir /run/ibcni-ipam, the
/// pool index at ipam's kDefaultPoolIndexDir.
/// @return a usage problem when a --state-dir or --ipam-data-dir is empty
[[nodiscard]] std::expected<ReconcileOptions, UsageProblem> reconcileOptions(const CommandLine& line);

}  // namespace ibcni::plugin
