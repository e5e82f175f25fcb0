// SPDX-License-Identifier: Apache-2.0
// JSON → NetConf: parse, canonicalize and validate once, at the edge. This file reads what every
// role shares (cniVersion, name, type, ipam, args, prevResult, GC's attachments) and hands the
// sections to plugin_keys.cpp (ibcni's own keys) and ipam_conf.cpp (the embedded IPAM's object).
// Every message names the field, the value and what is accepted.
#include "ibcni/config/net_conf.h"

#include "lib/json/json_fields.h"
#include "plugin/config/sections.h"
#include "ibcni/os/safe_path.h"
#include "lib/result/json_codec.h"

namespace ibcni::config {

cni::Result<const json*> objectField(const json& j, const char* key, const char* accepted) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    return nullptr;
  }
  if (!it->is_object()) {
    return invalid(key, *it, accepted);
  }
  return &*it;
}

namespace {

// The longest network name: a Kubernetes object name, and a single file name component.
constexpr std::size_t kMaxNameBytes = 253;

cni::Result<std::string> checkVersion(const json& j, cni::SpecVersion* out) {
  auto it = j.find("cniVersion");
  std::string text;
  if (it != j.end() && !it->is_null()) {
    if (!it->is_string()) {
      return cni::fail(cni::Errc::kIncompatibleVersion,
                       "invalid cniVersion = " + result::shortDump(*it) + ": must be a version string",
                       "ibcni supports " + std::string(cni::supportedVersionsText()));
    }
    text = it->get<std::string>();
  }
  if (text.empty()) {
    // The spec's legacy rule: a missing cniVersion means 0.1.0, whose result format cannot
    // describe an interface without an IP address.
    return cni::fail(cni::Errc::kIncompatibleVersion,
                     "cniVersion is missing (which means 0.1.0) and ibcni does not support 0.1.0; "
                     "set cniVersion to one of the supported versions",
                     "ibcni supports " + std::string(cni::supportedVersionsText()));
  }
  auto v = cni::parseSpecVersion(text);
  if (!v) {
    return cni::fail(cni::Errc::kIncompatibleVersion, "incompatible CNI versions",
                     "config is \"" + text + "\", ibcni supports " +
                         std::string(cni::supportedVersionsText()));
  }
  *out = *v;
  return text;
}

}  // namespace

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

// cniVersion, and whether it allows `command`.
cni::Result<void> parseVersion(const json& j, cni::Command command, NetConf& c) {
  auto version = checkVersion(j, &c.version);
  if (!version) {
    return std::unexpected(version.error());
  }
  c.cniVersion = *version;
  if (command == cni::Command::kCheck && !cni::hasCheck(c.version)) {
    return cni::fail(cni::Errc::kIncompatibleVersion,
                     "config version \"" + c.cniVersion + "\" does not allow CHECK; use 0.4.0 or later");
  }
  if ((command == cni::Command::kGc || command == cni::Command::kStatus) && !cni::hasGcAndStatus(c.version)) {
    return cni::fail(cni::Errc::kIncompatibleVersion,
                     std::string("config version \"") + c.cniVersion + "\" does not allow " +
                         cni::toString(command) + "; use 1.1.0");
  }
  return {};
}

// The one rule for the network name: ibcni's records and ibcni-ipam's store both keep it as a
// directory name.
cni::Result<void> parseName(const json& j, NetConf& c) {
  auto name = stringField(j, "name", "name");
  if (!name) {
    return std::unexpected(name.error());
  }
  if (!*name || (*name)->empty()) {
    return cni::fail(kBad, "the network name is missing: set \"name\" (letters, digits, '_', '.', '-')");
  }
  if (!cni::isValidIdentifier(**name) || (*name)->size() > kMaxNameBytes) {
    return invalid("name", **name,
                   "must be 1-253 letters, digits, '_', '.' and '-', starting with a letter or digit (it names "
                   "directories in stateDir)");
  }
  c.name = **name;
  return {};
}

// The embedded IPAM's `ipam` object. A mistake in it is reported when the embedded IPAM is called,
// as a delegated IPAM plugin reports its own: DEL still puts the device back before that error.
void parseEmbeddedIpam(const json& ipam, NetConf& c) {
  c.embeddedIpam = ipamObject(ipam);
  if (*c.embeddedIpam && (*c.embeddedIpam)->cluster && (*c.embeddedIpam)->cluster->pool.empty()) {
    // The pool is shared by name: by default, every NAD with this network name is one pool.
    auto& cluster = *(*c.embeddedIpam)->cluster;
    if (auto pool = networkPoolName(c.name, "ipam.cluster.pool"); !pool) {
      c.embeddedIpam = cni::Result<IpamConfig>(std::unexpected(pool.error()));
    } else {
      cluster.pool = *pool;
      cluster.poolPath = "the network name";
    }
  }
  if (*c.embeddedIpam) {
    (*c.embeddedIpam)->networkFile = json{{"cniVersion", c.cniVersion}, {"name", c.name}, {"ipam", ipam}}.dump();
  }
}

// `ipam`: its type (a plugin in CNI_PATH, or none for no addresses) and, for the embedded IPAM, its
// object.
cni::Result<void> parseIpam(const json& j, Role role, NetConf& c) {
  const json* section = nullptr;
  IBCNI_TRY_ASSIGN(section, objectField(j, "ipam",
                                  "must be an object: {} for no addresses, or {\"type\": \"<ipam plugin>\", ...}"));
  if (section == nullptr) {
    return {};
  }
  auto ipamType = stringField(*section, "type", "ipam.type");
  if (!ipamType) {
    return std::unexpected(ipamType.error());
  }
  if (!*ipamType && !section->empty()) {
    return cni::fail(kBad, "ipam.type is missing: name an IPAM plugin found in CNI_PATH (e.g. \"host-local\"), "
                           "or use \"ipam\": {} for no addresses");
  }
  if (*ipamType) {
    const auto& t = **ipamType;
    if (t.empty() || t.size() > 255 || t.find('/') != std::string::npos || t == "." || t == "..") {
      return invalid("ipam.type", t, "must be the file name of an IPAM plugin in CNI_PATH, without '/'");
    }
    c.ipamType = t;
  }
  if (role == Role::kIpamPlugin || c.ipamType == kEmbeddedIpamType) {
    parseEmbeddedIpam(*section, c);
  }
  return {};
}

// args.cni: the addresses asked for, and (ibcni itself) the VF's GUID.
cni::Result<void> parseArgs(const json& j, Role role, NetConf& c) {
  const json* args = nullptr;
  IBCNI_TRY_ASSIGN(args, objectField(j, "args", "must be an object"));
  if (args == nullptr) {
    return {};
  }
  auto cniArgs = args->find("cni");
  if (cniArgs == args->end() || !cniArgs->is_object()) {
    return {};
  }
  IBCNI_TRY_ASSIGN(c.argsIps, ipList(*cniArgs, "ips", "args.cni.ips"));
  if (role == Role::kPlugin) {
    std::optional<std::string> guid;
    IBCNI_TRY_ASSIGN(guid, stringField(*cniArgs, "guid", "args.cni.guid"));
    if (guid) {
      IBCNI_TRY_ASSIGN(c.argsGuid, parseVfGuid("args.cni.guid", *guid));
    }
  }
  return {};
}

// prevResult, and GC's list of the attachments that stay.
cni::Result<void> parseChainAndGc(const json& j, cni::Command command, NetConf& c) {
  if (auto it = j.find("prevResult"); it != j.end() && !it->is_null()) {
    IBCNI_TRY_ASSIGN(c.prevResult, result::resultFromJson(*it, kBad, "prevResult"));
  }
  if (command == cni::Command::kGc) {
    // libcni >= 1.2.3 sends both keys; the spec-v1.1.0 text names the second.
    for (const char* key : {"cni.dev/valid-attachments", "cni.dev/attachments"}) {
      if (auto it = j.find(key); it != j.end() && !it->is_null()) {
        IBCNI_TRY_ASSIGN(c.validAttachments, attachmentList(*it, key));
        break;
      }
    }
  }
  return {};
}

// The request, section by section: version, name and type, ibcni's own keys (or, for ibcni-ipam
// as an IPAM plugin, runtimeConfig's ips), ipam, args, prevResult and GC's attachments.
cni::Result<NetConf> netConfFromJson(const json& j, cni::Command command, Role role) {
  NetConf c;
  if (auto r = parseVersion(j, command, c); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = parseName(j, c); !r) {
    return std::unexpected(r.error());
  }
  std::optional<std::string> type;
  IBCNI_TRY_ASSIGN(type, stringField(j, "type", "type"));
  c.type = type.value_or("");
  if (role == Role::kPlugin) {
    if (auto r = pluginKeys(j, c, command); !r) {
      return std::unexpected(r.error());
    }
  } else if (auto it = j.find("runtimeConfig"); it != j.end() && it->is_object()) {
    IBCNI_TRY_ASSIGN(c.runtime.ips, ipList(*it, "ips", "runtimeConfig.ips"));
  }
  if (auto r = parseIpam(j, role, c); !r) {
    return std::unexpected(r.error());
  }
  if (role == Role::kIpamPlugin && c.ipamType.empty()) {
    return cni::fail(kBad, "ipam.type is missing: an IPAM plugin reads the \"ipam\" object; set \"ipam\": "
                           "{\"type\": \"ibcni-ipam\", ...}");
  }
  if (auto r = parseArgs(j, role, c); !r) {
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

cni::Result<NetConf> parseIpamNetworkFile(std::string_view fileText) {
  json file = json::parse(fileText, nullptr, /*allow_exceptions=*/false);
  if (file.is_discarded() || !file.is_object()) {
    return cni::fail(cni::Errc::kDecodingFailure, "is not a readable JSON network configuration");
  }
  if (!file.contains("plugins")) {
    return netConfFromJson(file, cni::Command::kDel, Role::kIpamPlugin);
  }
  // A conflist: the plugin object whose ipam.type is ibcni-ipam, with the list's name and
  // cniVersion, as a runtime would send it. Read as for DEL: no verb-specific key is needed.
  for (const auto& plugin : file.value("plugins", json::array())) {
    if (plugin.is_object() && plugin.contains("ipam") && plugin["ipam"].is_object() &&
        plugin["ipam"].value("type", "") == kEmbeddedIpamType) {
      json conf = plugin;
      conf["name"] = file.value("name", "");
      conf["cniVersion"] = file.value("cniVersion", "1.1.0");
      return netConfFromJson(conf, cni::Command::kDel, Role::kIpamPlugin);
    }
  }
  return cni::fail(cni::Errc::kDecodingFailure, "has no plugin with \"ipam\": {\"type\": \"ibcni-ipam\"}");
}

}  // namespace ibcni::config
