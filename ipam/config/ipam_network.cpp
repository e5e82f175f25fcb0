// SPDX-License-Identifier: Apache-2.0
// The sections of a network configuration that every reader shares (cniVersion, name, type, ipam,
// args.cni.ips, prevResult, GC's attachments), and the whole of it as ibcni-ipam reads it: as an IPAM
// plugin (a request) and from a saved network file. The plugin's parser (plugin/config/net_conf.cpp)
// reads its own keys around the shared sections. Every message names the field, the value and what
// is accepted.
#include "ipam/config/ipam_config.h"
#include "ibcni/config/net_conf.h"
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

}  // namespace

cni::Result<void> parseNetworkHeader(const json& j, cni::Command command, NetConf& c) {
  if (auto r = parseVersion(j, command, c); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = parseName(j, c); !r) {
    return std::unexpected(r.error());
  }
  std::optional<std::string> type;
  IBCNI_TRY_ASSIGN(type, stringField(j, "type", "type"));
  c.type = type.value_or("");
  return {};
}

cni::Result<void> parseIpamSection(const json& j, Role role, NetConf& c) {
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

cni::Result<const json*> parseArgsIps(const json& j, NetConf& c) {
  const json* args = nullptr;
  IBCNI_TRY_ASSIGN(args, objectField(j, "args", "must be an object"));
  if (args == nullptr) {
    return nullptr;
  }
  auto cniArgs = args->find("cni");
  if (cniArgs == args->end() || !cniArgs->is_object()) {
    return nullptr;
  }
  IBCNI_TRY_ASSIGN(c.argsIps, ipList(*cniArgs, "ips", "args.cni.ips"));
  return &*cniArgs;
}

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

cni::Result<NetConf> ipamNetConfFromJson(const json& j, cni::Command command) {
  NetConf c;
  if (auto r = parseNetworkHeader(j, command, c); !r) {
    return std::unexpected(r.error());
  }
  if (auto it = j.find("runtimeConfig"); it != j.end() && it->is_object()) {
    IBCNI_TRY_ASSIGN(c.runtime.ips, ipList(*it, "ips", "runtimeConfig.ips"));
  }
  if (auto r = parseIpamSection(j, Role::kIpamPlugin, c); !r) {
    return std::unexpected(r.error());
  }
  if (c.ipamType.empty()) {
    return cni::fail(kBad, "ipam.type is missing: an IPAM plugin reads the \"ipam\" object; set \"ipam\": "
                           "{\"type\": \"ibcni-ipam\", ...}");
  }
  if (auto r = parseArgsIps(j, c); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = parseChainAndGc(j, command, c); !r) {
    return std::unexpected(r.error());
  }
  return c;
}

cni::Result<NetConf> parseIpamNetworkFile(std::string_view fileText) {
  json file = json::parse(fileText, nullptr, /*allow_exceptions=*/false);
  if (file.is_discarded() || !file.is_object()) {
    return cni::fail(cni::Errc::kDecodingFailure, "is not a readable JSON network configuration");
  }
  if (!file.contains("plugins")) {
    return ipamNetConfFromJson(file, cni::Command::kDel);
  }
  // A conflist: the plugin object whose ipam.type is ibcni-ipam, with the list's name and
  // cniVersion, as a runtime would send it. Read as for DEL: no verb-specific key is needed.
  for (const auto& plugin : file.value("plugins", json::array())) {
    if (plugin.is_object() && plugin.contains("ipam") && plugin["ipam"].is_object() &&
        plugin["ipam"].value("type", "") == kEmbeddedIpamType) {
      json conf = plugin;
      conf["name"] = file.value("name", "");
      conf["cniVersion"] = file.value("cniVersion", "1.1.0");
      return ipamNetConfFromJson(conf, cni::Command::kDel);
    }
  }
  return cni::fail(cni::Errc::kDecodingFailure, "has no plugin with \"ipam\": {\"type\": \"ibcni-ipam\"}");
}

}  // namespace ibcni::config
