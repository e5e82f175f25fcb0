// SPDX-License-Identifier: Apache-2.0
#include "plugin/dispatch.h"


#include "plugin/commands/commands.h"
#include "plugin/commands/common.h"
#include "ibcni/config/net_conf.h"
#include "lib/log/log.h"
#include "lib/log/timing.h"
#include "lib/result/result_json.h"

namespace ibcni::plugin {

namespace {

struct EnvRule {
  const char* name;
  bool requiredFor[6];  // indexed by cni::Command: ADD, DEL, CHECK, VERSION, GC, STATUS
};

constexpr std::size_t kMaxNetnsPath = 4096;  // PATH_MAX, with its terminating NUL

// The spec's per-verb requirements. STATUS requires nothing (the Go skel's demand for CNI_PATH
// there is stricter than the spec); GC requires CNI_PATH.
constexpr EnvRule kEnvRules[] = {
    {"CNI_CONTAINERID", {true, true, true, false, false, false}},
    {"CNI_NETNS", {true, false, true, false, false, false}},
    {"CNI_IFNAME", {true, true, true, false, false, false}},
    {"CNI_PATH", {false, false, false, false, true, false}},
};

std::optional<cni::Command> parseCommand(std::string_view s) {
  using cni::Command;
  for (auto c : {Command::kAdd, Command::kDel, Command::kCheck, Command::kVersion, Command::kGc, Command::kStatus}) {
    if (s == cni::toString(c)) {
      return c;
    }
  }
  return std::nullopt;
}

std::vector<std::string> splitPath(const std::string& s) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    auto end = s.find(':', pos);
    std::string item = s.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (!item.empty()) {
      out.push_back(item);
    }
    if (end == std::string::npos) {
      break;
    }
    pos = end + 1;
  }
  return out;
}

Outcome failure(const cni::Error& e, std::string_view cniVersion) {
  log::error("{}{}{}", e.msg, e.details.empty() ? "" : ": ", e.details);
  Outcome out{result::printError(e, cniVersion), 1};
  out.code = static_cast<int>(e.code);
  return out;
}

cni::Result<cni::CmdArgs> readEnvironment(const Getenv& getenv, cni::Command command) {
  cni::CmdArgs args;
  args.command = command;
  auto value = [&](const char* name) { return getenv(name).value_or(""); };
  std::string missing;
  for (const auto& rule : kEnvRules) {
    if (rule.requiredFor[static_cast<int>(command)] && value(rule.name).empty()) {
      missing += (missing.empty() ? "" : ",") + std::string(rule.name);
    }
  }
  if (!missing.empty()) {
    return cni::fail(cni::Errc::kInvalidEnvironment, "required env variables [" + missing + "] missing");
  }
  if (command == cni::Command::kGc || command == cni::Command::kStatus) {
    // The runtime sends these empty for GC and STATUS; they are not looked at.
    args.path = splitPath(value("CNI_PATH"));
    return args;
  }
  args.containerId = value("CNI_CONTAINERID");
  args.netns = value("CNI_NETNS");
  args.ifName = value("CNI_IFNAME");
  args.rawArgs = value("CNI_ARGS");
  args.path = splitPath(value("CNI_PATH"));
  // The container ID and the interface name become file names in ibcni's state directory and in
  // ibcni-ipam's store: the spec's character set keeps them single path components.
  if (!cni::isValidContainerId(args.containerId)) {
    return cni::fail(cni::Errc::kInvalidEnvironment,
                     "invalid CNI_CONTAINERID=" + cni::quoted(args.containerId) + ": must be 1-" +
                         std::to_string(cni::kMaxContainerIdLength) +
                         " letters, digits, '_', '.' and '-', starting with a letter or digit");
  }
  if (!net::isValidIfName(args.ifName)) {
    return cni::fail(cni::Errc::kInvalidEnvironment,
                     "invalid CNI_IFNAME=" + cni::quoted(args.ifName) +
                         ": an interface name is 1-15 bytes of printable characters, not \".\" or \"..\", without "
                         "'/', ':' or whitespace (e.g. net1)");
  }
  // The path is kept in records and logs: printable UTF-8, as every runtime's netns paths are.
  if (!args.netns.empty() &&
      (args.netns.front() != '/' || args.netns.size() >= kMaxNetnsPath || !cni::isPrintableText(args.netns))) {
    return cni::fail(cni::Errc::kInvalidEnvironment,
                     "invalid CNI_NETNS=" + cni::quoted(args.netns, 256) +
                         ": must be the absolute path (printable, shorter than 4096 bytes) of a network namespace");
  }
  return args;
}

// A verb that prints nothing when it succeeds: nothing, or its error.
Outcome silentOutcome(const cni::Result<void>& r, const Invocation& inv) {
  return r ? Outcome{} : failure(r.error(), inv.conf.cniVersion);
}

// The verb itself, and its result or error printed as the configuration's version asks.
Outcome runVerb(cni::Command command, const Invocation& inv, Verbs& verbs) {
  switch (command) {
    case cni::Command::kAdd: {
      auto r = verbs.add(inv);
      if (!r) {
        return failure(r.error(), inv.conf.cniVersion);
      }
      return Outcome{result::printResult(*r, inv.conf.version), 0};
    }
    case cni::Command::kDel: return silentOutcome(verbs.del(inv), inv);
    case cni::Command::kCheck: return silentOutcome(verbs.check(inv), inv);
    case cni::Command::kGc: return silentOutcome(verbs.gc(inv), inv);
    case cni::Command::kStatus: return silentOutcome(verbs.status(inv), inv);
    case cni::Command::kVersion:
      break;
  }
  return Outcome{};
}

// What the call's event names, learnt as the call goes (Outcome's verb, network and stateDir).
struct CallFacts {
  std::optional<cni::Command> verb;
  std::string network;
  std::string stateDir = std::string(config::kDefaultStateDir);
};

Outcome runCall(const Getenv& getenv, std::string_view stdinText, bool stdinOk, Verbs& verbs, CallFacts& facts);

}  // namespace

cni::Result<cni::AddResult> PluginVerbs::add(const Invocation& inv) { return cmdAdd(inv, deps_); }
cni::Result<void> PluginVerbs::del(const Invocation& inv) { return cmdDel(inv, deps_); }
cni::Result<void> PluginVerbs::check(const Invocation& inv) { return cmdCheck(inv, deps_); }
cni::Result<void> PluginVerbs::gc(const Invocation& inv) { return cmdGc(inv, deps_); }
cni::Result<void> PluginVerbs::status(const Invocation& inv) { return cmdStatus(inv, deps_); }

cni::Result<cni::AddResult> IpamVerbs::add(const Invocation& inv) { return ipam_.add(ipamRequest(inv)); }
cni::Result<void> IpamVerbs::del(const Invocation& inv) { return ipam_.del(ipamRequest(inv)); }
cni::Result<void> IpamVerbs::check(const Invocation& inv) { return ipam_.check(ipamRequest(inv)); }
cni::Result<void> IpamVerbs::gc(const Invocation& inv) { return ipam_.gc(ipamRequest(inv)); }
cni::Result<void> IpamVerbs::status(const Invocation& inv) { return ipam_.status(ipamRequest(inv)); }

Outcome dispatch(const Getenv& getenv, std::string_view stdinText, bool stdinOk, Verbs& verbs) {
  CallFacts facts;
  Outcome out = runCall(getenv, stdinText, stdinOk, verbs, facts);
  out.verb = facts.verb;
  out.network = std::move(facts.network);
  out.stateDir = std::move(facts.stateDir);
  return out;
}

namespace {

Outcome runCall(const Getenv& getenv, std::string_view stdinText, bool stdinOk, Verbs& verbs, CallFacts& facts) {
  log::timing::lap("setup");
  auto commandText = getenv("CNI_COMMAND").value_or("");
  if (commandText.empty()) {
    return failure({cni::Errc::kInvalidEnvironment, "required env variables [CNI_COMMAND] missing", {}}, "");
  }
  auto command = parseCommand(commandText);
  if (!command) {
    return failure({cni::Errc::kInvalidEnvironment,
                    "unknown CNI_COMMAND=" + cni::quoted(commandText) + ": use ADD, DEL, CHECK, VERSION, GC or STATUS",
                    {}},
                   "");
  }
  if (*command == cni::Command::kVersion) {
    // VERSION works with no other variable and any stdin; it echoes the asked version as the spec says.
    std::string asked = "1.1.0";
    if (stdinOk) {
      if (auto p = config::parsePreamble(stdinText); p && !p->cniVersion.empty()) {
        asked = p->cniVersion;
      }
    }
    return Outcome{result::printVersion(asked), 0};
  }
  facts.verb = *command;
  if (!stdinOk) {
    return failure({cni::Errc::kIoFailure, "cannot read the network configuration from stdin", {}}, "");
  }
  auto preamble = config::parsePreamble(stdinText);
  if (!preamble) {
    return failure(preamble.error(), "");
  }
  log::Context context{cni::toString(*command), getenv("CNI_CONTAINERID").value_or(""),
                       getenv("CNI_IFNAME").value_or(""), getenv("CNI_NETNS").value_or("")};
  const auto logProblem = log::setup(preamble->logLevel, preamble->logFile, context);

  auto args = readEnvironment(getenv, *command);
  if (!args) {
    return failure(args.error(), preamble->cniVersion);
  }
  auto conf = config::parseNetConf(*preamble, *command, verbs.role());
  if (!conf) {
    return failure(conf.error(), preamble->cniVersion);
  }
  facts.network = conf->name;
  facts.stateDir = conf->stateDir;
  // A log file the rules refuse (a symbolic link, not a regular file, a second hard link:
  // docs/security.md) fails ADD and CHECK, as an invalid field would; DEL, GC and STATUS must not be
  // blocked by logging and only warn (on stderr).
  if (logProblem.refused && (*command == cni::Command::kAdd || *command == cni::Command::kCheck)) {
    return failure({cni::Errc::kInvalidConfig,
                    "invalid logFile = " + cni::quoted(preamble->logFile, 256) + ": " + logProblem.reason +
                        "; name a regular .log file in a directory such as /var/log (docs/security.md)",
                    {}},
                   preamble->cniVersion);
  }
  Invocation inv{std::move(*args), {}, std::move(*conf), std::string(stdinText)};
  if (!inv.conf.unknownKeys.empty()) {
    std::string keys;
    for (const auto& k : inv.conf.unknownKeys) {
      keys += (keys.empty() ? "" : ", ") + cni::quoted(k);
    }
    log::warn("ignoring configuration keys ibcni does not know: {}", keys);
  }
  if (*command == cni::Command::kAdd || *command == cni::Command::kDel || *command == cni::Command::kCheck) {
    auto cniArgs = cni::parseCniArgs(inv.args.rawArgs);
    if (!cniArgs) {
      return failure(cniArgs.error(), inv.conf.cniVersion);
    }
    inv.cniArgs = std::move(*cniArgs);
  }
  log::timing::lap("parse");
  log::debug("{} network {} mode {}", cni::toString(*command), inv.conf.name, config::toString(inv.conf.mode));

  return runVerb(*command, inv, verbs);
}

}  // namespace

}  // namespace ibcni::plugin
