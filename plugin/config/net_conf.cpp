// SPDX-License-Identifier: Apache-2.0
// JSON → NetConf: parse, canonicalize and validate once, at the edge. This file reads the preamble
// and ibcni's request: the sections every reader shares (cniVersion, name, type, ipam, args.cni.ips,
// prevResult, GC's attachments) from the IPAM's parser (ipam/config/ipam_network.cpp), which also
// reads the whole request of ibcni-ipam as an IPAM plugin, around ibcni's own keys (plugin_keys.cpp)
// and the VF's GUID of args. Every message names the field, the value and what is accepted.
#include "ibcni/config/net_conf.h"

#include "lib/json/json_fields.h"
#include "plugin/config/sections.h"
#include "ibcni/os/safe_path.h"

namespace ibcni::config {

cni::Result<net::Pkey> parsePkey(std::string_view field, std::string_view text) {
  auto p = net::Pkey::parseOrExplain(text);
  if (p) {
    return p->partition();
  }
  const std::string f(field);
  const std::string t(text);
  switch (p.error()) {
    case net::Pkey::ParseError::kBadLength:
      return invalid(f, t,
                     "must be a partition key from 0x0001 to 0x7fff (or 0x8001-0xffff with the full-membership bit)");
    case net::Pkey::ParseError::kNotANumber:
      return invalid(f, t, "must be a partition key in hex (\"0x7fff\") or decimal");
    case net::Pkey::ParseError::kOver16Bits:
      return invalid(f, t, "a partition key has 16 bits: 0x0001-0x7fff, or 0x8001-0xffff with the full-membership bit");
    case net::Pkey::ParseError::kInvalidKey:
      break;
  }
  return invalid(f, t, "0x0000 (and 0x8000) is the invalid partition key; the default partition is 0x7fff");
}

cni::Result<net::Guid> parseVfGuid(std::string_view field, std::string_view text) {
  auto g = net::Guid::parse(text);
  if (!g) {
    return invalid(std::string(field), std::string(text),
                   "must be 8 colon-separated hex octets such as \"c2:11:22:33:44:55:66:77\"");
  }
  if (g->value == 0 || g->value == ~std::uint64_t{0}) {
    return invalid(std::string(field), std::string(text),
                   "all-zero and all-ones GUIDs are not valid port GUIDs (the port stays down); pick a unique "
                   "GUID");
  }
  return *g;
}

const char* toString(VfLinkState s) {
  switch (s) {
    case VfLinkState::kAuto:
      return "auto";
    case VfLinkState::kEnable:
      return "enable";
    case VfLinkState::kDisable:
      return "disable";
  }
  return "auto";
}

const char* toString(Mode m) {
  switch (m) {
    case Mode::kSriov:
      return "sriov";
    case Mode::kIpoib:
      return "ipoib";
  }
  return "?";
}

const char* toString(IpoibMode m) { return m == IpoibMode::kConnected ? "connected" : "datagram"; }

const char* toString(LogLevel l) {
  switch (l) {
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
  }
  return "?";
}

cni::Result<Preamble> parsePreamble(std::string_view stdinText) {
  auto parsed = fields::parseObject(stdinText);
  if (!parsed) {
    return std::unexpected(parsed.error());
  }
  Preamble p;
  auto doc = std::make_shared<RequestDocument>(RequestDocument{std::move(*parsed)});
  const json* j = &doc->json;
  p.document = std::move(doc);
  if (auto it = j->find("cniVersion"); it != j->end() && it->is_string()) {
    p.cniVersion = it->get<std::string>();
  }
  if (auto it = j->find("logLevel"); it != j->end() && it->is_string()) {
    p.logLevel = logLevelFromText(it->get<std::string>()).value_or(LogLevel::kWarn);
  }
  if (auto it = j->find("logFile"); it != j->end() && it->is_string()) {
    // Only a log file that passes the spelling rules is opened before the whole configuration is
    // validated (parseNetConf reports the others as error 7).
    const auto& f = it->get_ref<const std::string&>();
    if (!f.empty() && os::logFileSpellingProblem(f).empty()) {
      p.logFile = f;
    }
  }
  return p;
}

namespace {

// args.cni: the addresses asked for (the shared section) and the VF's GUID.
cni::Result<void> parseArgs(const json& j, NetConf& c) {
  const json* cniArgs = nullptr;
  IBCNI_TRY_ASSIGN(cniArgs, parseArgsIps(j, c));
  if (cniArgs == nullptr) {
    return {};
  }
  std::optional<std::string> guid;
  IBCNI_TRY_ASSIGN(guid, stringField(*cniArgs, "guid", "args.cni.guid"));
  if (guid) {
    IBCNI_TRY_ASSIGN(c.argsGuid, parseVfGuid("args.cni.guid", *guid));
  }
  return {};
}

// The request, section by section: version, name and type, ibcni's own keys, ipam, args,
// prevResult and GC's attachments. ibcni-ipam as an IPAM plugin reads it as the IPAM does
// (ipam/config/ipam_network.cpp).
cni::Result<NetConf> netConfFromJson(const json& j, cni::Command command, Role role) {
  if (role == Role::kIpamPlugin) {
    return ipamNetConfFromJson(j, command);
  }
  NetConf c;
  if (auto r = parseNetworkHeader(j, command, c); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = pluginKeys(j, c, command); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = parseIpamSection(j, role, c); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = parseArgs(j, c); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = parseChainAndGc(j, command, c); !r) {
    return std::unexpected(r.error());
  }
  return c;
}

}  // namespace

cni::Result<NetConf> parseNetConf(std::string_view stdinText, cni::Command command, Role role) {
  auto parsed = fields::parseObject(stdinText);
  if (!parsed) {
    return std::unexpected(parsed.error());
  }
  return netConfFromJson(*parsed, command, role);
}

cni::Result<NetConf> parseNetConf(const Preamble& preamble, cni::Command command, Role role) {
  return netConfFromJson(preamble.document->json, command, role);
}

}  // namespace ibcni::config
