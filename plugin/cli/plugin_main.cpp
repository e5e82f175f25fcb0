// SPDX-License-Identifier: Apache-2.0
// The ibcni executable's command line: its table of subcommands, from which runCommandLine
// dispatches and makes every help text (command_line.h). A subcommand is one row here.
#include "plugin/cli/plugin_main.h"

#include <unistd.h>

#include <chrono>
#include <string>

#include "lib/http/curl_http_client.h"
#include "lib/http/http_relay.h"
#include "plugin/cli/command_line.h"
#include "plugin/cli/doctor_main.h"
#include "plugin/cli/pools_main.h"
#include "plugin/cli/production_deps.h"
#include "plugin/cli/production_http.h"
#include "plugin/cli/reconcile_args.h"

namespace ibcni::plugin {

namespace {

constexpr std::string_view kAbout =
    "the CNI plugin that gives a pod an InfiniBand interface (an IPoIB child or an SR-IOV VF)";

constexpr std::string_view kDoctorDetails =
    "--config FILE: a NetworkAttachmentDefinition as `kubectl get net-attach-def NAME -o json` prints it,\n"
    "or the network config itself; the exit status is then its verdict.\n"
    "exit status: 0 no problem found, 1 problems found (or, with --config, the config would not work), 2 usage\n";

constexpr std::string_view kPoolsDetails =
    "The pools of an ibcni network: its ipam.cluster address pool and its guidPool's GUID blocks as\n"
    "the backend lists them (one list call each), with their holder nodes, this node's fill and\n"
    "ledger and the totals (as `ibcni-ipam pools`), and every GUID this node's guidPool store hands\n"
    "out with the attachment holding it (node-local pools too; no backend call). Changes nothing.\n"
    "CONFIG_FILE: a NetworkAttachmentDefinition as `kubectl get net-attach-def NAME -o json`\n"
    "prints it, a config list with an ibcni entry, or the network config itself.\n"
    "--json's guids: [{\"guid\", \"network\", \"containerID\", \"ifname\", \"pod\"}]\n"
    "exit status: 0 listed; 1 a backend or a store could not be read (a CNI error, naming the\n"
    "endpoint or the file); 2 usage, an unreadable CONFIG_FILE, or a network with neither pool\n";

// Started by ibcni-ipam when no agent serves its relay socket: libcurl here, not the socket again.
int runHttpRelay(const CommandLine&) {
  http::CurlHttpClient client;
  return http::serveHttpRelay(client, STDIN_FILENO, STDOUT_FILENO);
}

constexpr Subcommand kCommands[] = {
    {.name = "doctor",
     .summary = "report this node's RDMA, IPoIB and SR-IOV set-up; --config: would that network config work here",
     .flags = kDoctorFlags,
     .details = kDoctorDetails,
     .run = &runDoctor},
    {.name = "reconcile",
     .summary = kReconcileSummary,
     .flags = kReconcileFlags,
     .details = kReconcileDetails,
     .run = &runReconcile},
    {.name = "agent", .summary = kAgentSummary, .flags = kAgentFlags, .details = kAgentDetails, .run = &runAgent},
    {.name = "pools",
     .summary = "an ibcni network's cluster pools, and the GUIDs this node hands out (changes nothing)",
     .operands = "CONFIG_FILE",
     .minOperands = 1,
     .maxOperands = 1,
     .flags = kPoolsFlags,
     .details = kPoolsDetails,
     .run = &runPools},
    {.name = "http-relay",
     .summary = "sends ibcni-ipam's cluster-mode HTTP requests over stdin/stdout (ibcni-ipam runs it, not people)",
     .run = &runHttpRelay},
    kVersionCommand,
    kHelpCommand,
};

}  // namespace

int runPluginMain(int argc, char** argv, std::string_view name, const PluginEntry& entry) {
  const Program program{.name = name, .about = kAbout, .cniPlugin = true, .commands = kCommands};
  return runCommandLine(program, argc, argv, [&entry](const CommandLine&) {
    return runMain([&entry](const Getenv& getenv, std::string_view input, bool inputOk) {
      const auto start = std::chrono::steady_clock::now();
      ProductionDeps production;
      Outcome out = entry(getenv, input, inputOk, production.deps());
      appendCallEvent(production.deps().callEvents, out, start);
      return out;
    });
  });
}

}  // namespace ibcni::plugin
