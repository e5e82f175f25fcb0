// SPDX-License-Identifier: Apache-2.0
// ibcni-ipam: the embedded IPAM as a standalone CNI IPAM plugin, so that any CNI plugin (macvlan,
// host-device, ipoib-cni, ...) can use it in place of host-local. Wiring only, like main.cpp. Run
// without arguments it is the CNI IPAM plugin; its subcommands are the rows of kCommands below
// (`ibcni-ipam help` lists them, command_line.h runs them).
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "ipam/backends/production_backends.h"
#include "plugin/cli/production_http.h"
#include "plugin/dispatch.h"
#include "plugin/invocation.h"
#include "ipam/embedded_ipam.h"
#include "ibcni/config/net_conf.h"
#include "ibcni/os/file_io.h"
#include "plugin/cli/command_line.h"
#include "plugin/cli/process_main.h"
#include "lib/result/result_json.h"

namespace {

using nlohmann::json;

// CONFIG_FILE as every subcommand reads it: nullopt when it cannot be read or is no JSON network
// configuration (said on stderr for `command`: exit status 2); any other refusal is the
// subcommand's to report.
std::optional<ibcni::cni::Result<ibcni::config::NetConf>> readConfigFile(const char* command, const std::string& path) {
  auto text = ibcni::os::readFile(path, std::size_t{1} << 20);
  auto conf = text ? ibcni::config::parseIpamNetworkFile(*text)
                   : ibcni::cni::Result<ibcni::config::NetConf>(ibcni::cni::fail(
                         ibcni::cni::Errc::kDecodingFailure, "is not a readable JSON network configuration"));
  if (!conf && conf.error().code == ibcni::cni::Errc::kDecodingFailure) {
    std::fprintf(stderr, "ibcni-ipam %s: %s %s\n", command, path.c_str(), conf.error().msg.c_str());
    return std::nullopt;
  }
  return conf;
}

// The embedded IPAM as the subcommands call it: for a network read from a file, with no CNI_*
// environment and no CNI_ARGS.
struct FileIpam {
  ibcni::ipam::EmbeddedIpam embedded{ibcni::plugin::clusterCapable(ibcni::plugin::productionHttpClient())};
  const ibcni::cni::CmdArgs args{};
  const ibcni::cni::CniArgs cniArgs{};

  [[nodiscard]] ibcni::ipam::Request request(const ibcni::config::NetConf& conf) const {
    return ibcni::plugin::ipamRequest(conf, args, cniArgs);
  }
};

// Runs one subcommand: an exception ends it with exit status 1, said on stderr for `command`.
template <typename Run>
int guarded(const char* command, const Run& run) {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ibcni-ipam %s: %s\n", command, e.what());
    return 1;
  }
}

int reclaimCommand(const std::string& path) {
  const auto read = readConfigFile("gc", path);
  if (!read) {
    return 2;
  }
  const auto& conf = *read;
  if (!conf) {
    std::printf("%s\n", ibcni::result::printError(conf.error(), "").c_str());
    return 1;
  }
  FileIpam ipam;
  auto released = ipam.embedded.reclaim(ipam.request(*conf));
  if (!released) {
    std::printf("%s\n", ibcni::result::printError(released.error(), "").c_str());
    return 1;
  }
  json out = json::array();
  for (const auto& r : *released) {
    out.push_back({{"containerID", r.containerId}, {"ifname", r.ifName}, {"pod", r.pod}, {"netns", r.netns},
                   {"addresses", r.addresses}});
  }
  std::printf("%s\n", json{{"network", conf->name}, {"released", out}}.dump().c_str());
  return 0;
}

int poolsCommand(const std::string& path, bool asJson, const std::string& change) {
  const auto read = readConfigFile("pools", path);
  if (!read) {
    return 2;
  }
  const auto& conf = *read;
  if (conf && conf->embeddedIpam && *conf->embeddedIpam && !(**conf->embeddedIpam).cluster) {
    std::fprintf(stderr,
                 "ibcni-ipam pools: network %s in %s has no ipam.cluster: its pool is node-local, so there are no "
                 "blocks to list (see its allocations under its dataDir; `ibcni-ipam gc` frees the dead ones)\n",
                 conf->name.c_str(), path.c_str());
    return 2;
  }
  auto fail = [&](const ibcni::cni::Error& e) {
    if (asJson) {
      std::printf("%s\n", ibcni::result::printError(e, "").c_str());
    } else {
      std::fprintf(stderr, "ibcni-ipam pools: %s%s [CNI error %d]\n", e.msg.c_str(),
                   e.details.empty() ? "" : (" (" + e.details + ")").c_str(), static_cast<int>(e.code));
    }
    return 1;
  };
  if (!conf) {
    return fail(conf.error());
  }
  FileIpam ipam;
  if (change == "--retire") {
    if (auto r = ipam.embedded.retirePool(ipam.request(*conf)); !r) {
      return fail(r.error());
    }
    std::printf("%s\n", json{{"pool", conf->embeddedIpam && *conf->embeddedIpam
                                           ? (**conf->embeddedIpam).cluster->pool
                                           : conf->name},
                             {"retired", true}}
                             .dump()
                             .c_str());
    return 0;
  }
  if (change == "--redefine") {
    auto d = ipam.embedded.redefinePool(ipam.request(*conf));
    if (!d) {
      return fail(d.error());
    }
    std::printf("%s\n", json{{"pool", d->pool}, {"redefined", json::parse(d->fields, nullptr, false)}}.dump().c_str());
    return 0;
  }
  auto report = ipam.embedded.pools(ipam.request(*conf));
  if (!report) {
    return fail(report.error());
  }
  const std::string out = asJson ? ibcni::ipam::printPoolReport(*report) + "\n"
                                 : ibcni::ipam::renderPoolReport(*report, std::chrono::system_clock::now());
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int forgetNodeCommand(const std::string& path, const std::string& node) {
  const auto read = readConfigFile("forget-node", path);
  if (!read) {
    return 2;
  }
  const auto& conf = *read;
  FileIpam ipam;
  auto done = conf ? ipam.embedded.forgetNode(ipam.request(*conf), node)
                   : ibcni::cni::Result<void>(std::unexpected(conf.error()));
  if (!done) {
    std::printf("%s\n", ibcni::result::printError(done.error(), "").c_str());
    return 1;
  }
  std::printf("%s\n", json{{"forgotten", node}}.dump().c_str());
  return 0;
}

using ibcni::plugin::CommandLine;
using ibcni::plugin::Flag;
using ibcni::plugin::Subcommand;

constexpr Flag kJsonFlag{"--json", "", "print the report as JSON"};
constexpr Flag kRedefineFlag{"--redefine", "",
                             "replace the pool's definition with CONFIG_FILE's once the pool holds no claim"};
constexpr Flag kRetireFlag{"--retire", "", "once the pool holds no claim, remove it: its ranges are free for another"};
constexpr Flag kPoolsFlags[] = {kJsonFlag, kRedefineFlag, kRetireFlag};

constexpr std::string_view kGcDetails =
    "CONFIG_FILE: the network config or conflist with ibcni-ipam as its IPAM. Prints\n"
    "{\"network\", \"released\": [{\"containerID\", \"ifname\", \"pod\", \"netns\", \"addresses\"}]}.\n"
    "exit status: 0 done; 1 a CNI error on stdout; 2 usage or an unreadable CONFIG_FILE\n";

constexpr std::string_view kPoolsDetails =
    "For a network whose ipam has \"cluster\" (ibcni-ipam's cluster mode): the pool's blocks as\n"
    "the backend lists them (one list call), each with its holder node, how many of its addresses\n"
    "are in use (known only for this node's blocks; other nodes keep theirs locally), when it was\n"
    "claimed and last renewed (the kubernetes backend; etcd renews the node's lease instead),\n"
    "this node's ledger state (owned/intent, empty since), the addresses pods named, and the\n"
    "totals: blocks in the pool, claimed, free, per node. Changes nothing without a flag.\n"
    "CONFIG_FILE: the network config or conflist (as for `ibcni-ipam gc`).\n"
    "--redefine takes CONFIG_FILE's ranges, blockSize, reservations and exclude; --retire takes the\n"
    "pool out of the pools' registry (a network that still names it defines it again on its next\n"
    "ADD). Both are refused, naming what is left, while the pool holds a claim; one at a time.\n"
    "exit status: 0 listed; 1 the backend or the node-local store could not be read (a CNI error,\n"
    "naming the endpoint); 2 usage, an unreadable CONFIG_FILE, or a network without ipam.cluster\n";

constexpr std::string_view kForgetDetails =
    "Cluster mode with the etcd backend: declares NODE gone for good (drained, its pods gone, its\n"
    "agent stopped), so that the other nodes' agents take over its blocks and addresses at their\n"
    "next pass. Refused while NODE's liveness lasts (its agent renewed within\n"
    "leaseDurationSeconds). With the kubernetes backend, delete the Node object instead.\n"
    "exit status: 0 forgotten; 1 refused or the backend could not be reached (a CNI error on\n"
    "stdout); 2 usage or an unreadable CONFIG_FILE\n";

int runGc(const CommandLine& line) {
  return guarded("gc", [&] { return reclaimCommand(line.operands[0]); });
}

int runPools(const CommandLine& line) {
  if (line.has(kRedefineFlag) && line.has(kRetireFlag)) {
    return ibcni::plugin::usageError(*line.program, line.command, "--redefine and --retire: one at a time");
  }
  const std::string change = line.has(kRedefineFlag) ? "--redefine" : line.has(kRetireFlag) ? "--retire" : "";
  return guarded("pools", [&] { return poolsCommand(line.operands[0], line.has(kJsonFlag), change); });
}

int runForgetNode(const CommandLine& line) {
  return guarded("forget-node", [&] { return forgetNodeCommand(line.operands[0], line.operands[1]); });
}

constexpr Subcommand kCommands[] = {
    {.name = "gc",
     .summary = "free the addresses of pods whose network namespace is gone; prints what it freed",
     .operands = "CONFIG_FILE",
     .minOperands = 1,
     .maxOperands = 1,
     .details = kGcDetails,
     .run = &runGc},
    {.name = "pools",
     .summary = "cluster mode: the pool's blocks, their holders, fill and age; --redefine, --retire",
     .operands = "CONFIG_FILE",
     .minOperands = 1,
     .maxOperands = 1,
     .flags = kPoolsFlags,
     .details = kPoolsDetails,
     .run = &runPools},
    {.name = "forget-node",
     .summary = "cluster mode, etcd: NODE is gone for good; the other nodes' agents take over its claims",
     .operands = "CONFIG_FILE NODE",
     .minOperands = 2,
     .maxOperands = 2,
     .details = kForgetDetails,
     .run = &runForgetNode},
    ibcni::plugin::kVersionCommand,
    ibcni::plugin::kHelpCommand,
};

int runCniCall(const CommandLine&) {
  return ibcni::plugin::runMain([](const ibcni::plugin::Getenv& getenv, std::string_view input, bool inputOk) {
    ibcni::ipam::EmbeddedIpam ipam(ibcni::plugin::clusterCapable(ibcni::plugin::productionHttpClient()));
    ibcni::plugin::IpamVerbs verbs(ipam);
    return ibcni::plugin::dispatch(getenv, input, inputOk, verbs);
  });
}

}  // namespace

int main(int argc, char** argv) {
  const ibcni::plugin::Program program{
      .name = "ibcni-ipam",
      .about = "ibcni's IPAM as a CNI IPAM plugin of its own, for any CNI plugin (in place of host-local)",
      .cniPlugin = true,
      .commands = kCommands};
  return ibcni::plugin::runCommandLine(program, argc, argv, runCniCall);
}
