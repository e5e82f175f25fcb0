// SPDX-License-Identifier: Apache-2.0
// JSON → NetConf: parse, canonicalize and validate once, at the edge. Every message names the
// field, the value and what is accepted.
#include "ibcni/config/net_conf.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "ibcni/os/file_io.h"
#include "ibcni/os/safe_path.h"
#include "result/json_codec.h"

namespace ibcni::config {

using nlohmann::json;
using result::shortDump;

namespace {

constexpr cni::Errc kBad = cni::Errc::kInvalidConfig;

std::unexpected<cni::Error> invalid(const std::string& field, const json& value, const std::string& accepted) {
  return cni::fail(kBad, "invalid " + field + " = " + shortDump(value) + ": " + accepted);
}

// The value is quoted (escaped and cut, cni::quoted): whatever a field holds, the message stays
// one bounded, printable line.
std::unexpected<cni::Error> invalid(const std::string& field, const std::string& value, const std::string& accepted,
                                    std::size_t maxShown = cni::kQuotedMax) {
  return cni::fail(kBad, "invalid " + field + " = " + cni::quoted(value, maxShown) + ": " + accepted);
}

// The longest network name: a Kubernetes object name, and a single file name component.
constexpr std::size_t kMaxNameBytes = 253;

// A configured path (logFile, stateDir): the spelling rules of os/safe_path.h, with the fix.
std::optional<std::unexpected<cni::Error>> badPath(const std::string& field, const std::string& value,
                                                   const std::string& problem, const std::string& example) {
  if (problem.empty()) {
    return std::nullopt;
  }
  return invalid(field, value, problem + " (e.g. " + example + "; README \"Security model\")", 256);
}

cni::Result<json> parseObject(std::string_view text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    // Where and why: bytes that are not UTF-8 or a raw control character in a string are the usual
    // reasons besides plain syntax errors. The parser's text quotes the input: shown escaped.
    return cni::fail(cni::Errc::kDecodingFailure,
                     "the network configuration on stdin is not valid JSON (at byte " + std::to_string(e.byte) +
                         "): send one UTF-8 JSON object",
                     cni::quoted(e.what(), 300));
  } catch (const json::exception& e) {
    // Valid syntax the parser still refuses: a number beyond a double's range (1e999).
    return cni::fail(cni::Errc::kDecodingFailure,
                     "the network configuration on stdin cannot be read: a number in it is out of range "
                     "(numbers must fit a 64-bit integer or a double): send one UTF-8 JSON object",
                     cni::quoted(e.what(), 300));
  }
  if (!j.is_object()) {
    return cni::fail(cni::Errc::kDecodingFailure,
                     "the network configuration on stdin must be a JSON object, got " + shortDump(j));
  }
  return j;
}

// A string field: absent or null gives nullopt; any other non-string is error 7.
cni::Result<std::optional<std::string>> stringField(const json& obj, const char* key,
                                                    const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return std::optional<std::string>();
  }
  if (!it->is_string()) {
    return invalid(path, *it, "must be a string");
  }
  return std::optional<std::string>(it->get<std::string>());
}

std::optional<LogLevel> parseLogLevel(std::string_view s) {
  if (s == "error") {
    return LogLevel::kError;
  }
  if (s == "warn" || s == "warning") {
    return LogLevel::kWarn;
  }
  if (s == "info") {
    return LogLevel::kInfo;
  }
  if (s == "debug") {
    return LogLevel::kDebug;
  }
  return std::nullopt;
}

cni::Result<std::optional<net::PciAddress>> pciField(const json& obj, const char* key,
                                                     const std::string& path) {
  auto s = stringField(obj, key, path);
  if (!s) {
    return std::unexpected(s.error());
  }
  if (!*s) {
    return std::optional<net::PciAddress>();
  }
  auto pci = net::PciAddress::parse(**s);
  if (!pci) {
    return invalid(path, **s, "must be a PCI address such as \"0000:af:06.1\"");
  }
  return std::optional<net::PciAddress>(*pci);
}

cni::Result<std::vector<net::IpPrefix>> ipList(const json& obj, const char* key, const std::string& path) {
  std::vector<net::IpPrefix> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return out;
  }
  if (!it->is_array()) {
    return invalid(path, *it, "must be a list of IP addresses such as [\"10.1.2.3/24\"]");
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    const auto& e = (*it)[i];
    std::string p = path + "[" + std::to_string(i) + "]";
    if (!e.is_string()) {
      return invalid(p, e, "must be a string such as \"10.1.2.3/24\"");
    }
    auto ip = net::IpPrefix::parse(e.get<std::string>(), /*allowBare=*/true);
    if (!ip) {
      return invalid(p, e.get<std::string>(), "must be an IP address, optionally with a prefix (10.1.2.3/24)");
    }
    out.push_back(*ip);
  }
  return out;
}

cni::Result<std::vector<std::string>> stringList(const json& obj, const char* key, const std::string& path) {
  std::vector<std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return out;
  }
  if (!it->is_array()) {
    return invalid(path, *it, "must be a list of strings");
  }
  for (const auto& e : *it) {
    if (!e.is_string()) {
      return invalid(path, *it, "must be a list of strings");
    }
    out.push_back(e.get<std::string>());
  }
  return out;
}

cni::Result<cni::Dns> parseDns(const json& j) {
  cni::Dns d;
  if (!j.is_object()) {
    return invalid("dns", j, "must be an object with nameservers, domain, search and options");
  }
  auto ns = stringList(j, "nameservers", "dns.nameservers");
  if (!ns) {
    return std::unexpected(ns.error());
  }
  for (const auto& s : *ns) {
    if (!net::IpAddress::parse(s)) {
      return invalid("dns.nameservers", s, "each entry must be an IP address");
    }
  }
  auto search = stringList(j, "search", "dns.search");
  auto options = stringList(j, "options", "dns.options");
  auto domain = stringField(j, "domain", "dns.domain");
  if (!search) {
    return std::unexpected(search.error());
  }
  if (!options) {
    return std::unexpected(options.error());
  }
  if (!domain) {
    return std::unexpected(domain.error());
  }
  d.nameservers = *ns;
  d.search = *search;
  d.options = *options;
  d.domain = domain->value_or("");
  return d;
}

cni::Result<RuntimeConfig> parseRuntimeConfig(const json& j) {
  RuntimeConfig rc;
  if (!j.is_object()) {
    return invalid("runtimeConfig", j, "must be an object");
  }
  auto ips = ipList(j, "ips", "runtimeConfig.ips");
  if (!ips) {
    return std::unexpected(ips.error());
  }
  rc.ips = *ips;
  auto mac = stringField(j, "mac", "runtimeConfig.mac");
  if (!mac) {
    return std::unexpected(mac.error());
  }
  if (*mac) {
    auto hw = net::HwAddress::parse(**mac);
    if (!hw || hw->length != 6) {
      return invalid("runtimeConfig.mac", **mac, "must be a 6-byte MAC address such as \"0a:58:0a:01:02:03\"");
    }
    rc.mac = *hw;
  }
  auto dev = pciField(j, "deviceID", "runtimeConfig.deviceID");
  if (!dev) {
    return std::unexpected(dev.error());
  }
  rc.deviceId = *dev;
  auto guid = stringField(j, "infinibandGUID", "runtimeConfig.infinibandGUID");
  if (!guid) {
    return std::unexpected(guid.error());
  }
  if (*guid) {
    auto g = parseVfGuid("runtimeConfig.infinibandGUID", **guid);
    if (!g) {
      return std::unexpected(g.error());
    }
    rc.infinibandGuid = *g;
  }
  auto info = stringField(j, "CNIDeviceInfoFile", "runtimeConfig.CNIDeviceInfoFile");
  if (!info) {
    return std::unexpected(info.error());
  }
  rc.deviceInfoFile = info->value_or("");
  return rc;
}

cni::Result<std::vector<AttachmentKey>> parseAttachments(const json& j, const std::string& path) {
  std::vector<AttachmentKey> out;
  if (!j.is_array()) {
    return invalid(path, j, "must be a list of {\"containerID\": ..., \"ifname\": ...}");
  }
  for (std::size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    std::string p = path + "[" + std::to_string(i) + "]";
    if (!e.is_object()) {
      return invalid(p, e, "must be an object {\"containerID\": ..., \"ifname\": ...}");
    }
    auto cid = stringField(e, "containerID", p + ".containerID");
    auto ifn = stringField(e, "ifname", p + ".ifname");
    if (!cid) {
      return std::unexpected(cid.error());
    }
    if (!ifn) {
      return std::unexpected(ifn.error());
    }
    if (!*cid || !*ifn) {
      return invalid(p, e, "needs both containerID and ifname");
    }
    out.push_back({**cid, **ifn});
  }
  return out;
}

// Multus' device-info file (k8snetworkplumbingwg device-info-spec): {"type": "pci", "pci":
// {"pci-address": "0000:af:06.1", ...}}. When `required` (nothing else names the device), a file
// that cannot be read or names no PCI address is an error; otherwise it only cross-checks.
cni::Result<std::optional<net::PciAddress>> readDeviceInfoFile(const std::string& path, bool required) {
  const std::string field = "runtimeConfig.CNIDeviceInfoFile";
  if (auto problem = os::pathSpellingProblem(path); !problem.empty()) {
    return invalid(field, path, problem, 256);
  }
  // A regular file only: a FIFO would block ADD, and a device node may act when opened.
  auto text = os::readRegularFile(path, 1 << 16);
  if (!text) {
    if (!required && !os::isRefusal(text.error())) {
      return std::optional<net::PciAddress>{};
    }
    return invalid(field, path,
                   "cannot read the device-info file (" + text.error().describe() +
                       "); it is a regular file written by the device plugin for Multus",
                   256);
  }
  json info = json::parse(*text, nullptr, false);
  if (!info.is_object()) {
    return invalid(field, path, "the device-info file is not a JSON object", 256);
  }
  auto pci = info.find("pci");
  if (pci == info.end() || !pci->is_object()) {
    if (!required) {
      return std::optional<net::PciAddress>{};
    }
    const auto type = info.find("type");
    return invalid(field, path,
                   "the device-info file has no \"pci\" object (type " +
                       (type != info.end() ? shortDump(*type) : std::string("none")) +
                       "); ibcni attaches PCI functions",
                   256);
  }
  auto addr = pciField(*pci, "pci-address", field + " pci.pci-address");
  if (!addr) {
    return std::unexpected(addr.error());
  }
  if (!*addr && required) {
    return invalid(field, path, "the device-info file has no pci.pci-address", 256);
  }
  return *addr;
}

// sriov mode's VF settings: linkState (ib-sriov-cni's link_state also accepted), pkey,
// rdmaIsolation.
cni::Result<void> parseSriovKeys(const json& j, NetConf& c) {
  std::optional<VfLinkState> state;
  for (const char* key : {"linkState", "link_state"}) {
    auto v = stringField(j, key, key);
    if (!v) {
      return std::unexpected(v.error());
    }
    if (!*v) {
      continue;
    }
    VfLinkState s;
    if (**v == "auto") {
      s = VfLinkState::kAuto;
    } else if (**v == "enable") {
      s = VfLinkState::kEnable;
    } else if (**v == "disable") {
      s = VfLinkState::kDisable;
    } else {
      return invalid(key, **v, "accepted values: \"auto\" (follow the port), \"enable\", \"disable\"");
    }
    if (state && *state != s) {
      return cni::fail(kBad, "linkState and link_state are both set, to different values: keep linkState");
    }
    state = s;
  }
  c.linkState = state;

  if (auto it = j.find("pkey"); it != j.end() && !it->is_null()) {
    std::string text;
    if (it->is_string()) {
      text = it->get<std::string>();
    } else if (it->is_number_integer()) {
      text = std::to_string(it->get<std::int64_t>());
    } else {
      return invalid("pkey", *it, "must be a partition key such as \"0x7fff\" or 32767");
    }
    auto p = parsePkey("pkey", text);
    if (!p) {
      return std::unexpected(p.error());
    }
    c.pkey = *p;
  }

  if (auto it = j.find("rdmaIsolation"); it != j.end() && !it->is_null()) {
    if (it->is_boolean()) {
      c.rdmaIsolation = it->get<bool>() ? RdmaIsolation::kOn : RdmaIsolation::kOff;
    } else if (it->is_string() && it->get<std::string>() == "auto") {
      c.rdmaIsolation = RdmaIsolation::kAuto;
    } else {
      return invalid("rdmaIsolation", *it,
                     "accepted values: true (move the RDMA device, the node must be in exclusive mode), false, "
                     "\"auto\" (move it when the node is in exclusive mode)");
    }
  }
  return {};
}

// ipoib mode's keys: the parent (master, or rdmaDevice + port), ipoibMode, umcast. deviceID and
// pciBusID (which Multus injects when the network names a resource) are not used.
cni::Result<void> parseIpoibKeys(const json& j, NetConf& c, cni::Command command) {
  auto master = stringField(j, "master", "master");
  if (!master) {
    return std::unexpected(master.error());
  }
  if (*master) {
    if (!net::isValidIfName(**master)) {
      return invalid("master", **master, "must be a host network interface name (1-15 bytes, no '/', ':' or spaces)");
    }
    c.master = **master;
  }
  auto rdmaDevice = stringField(j, "rdmaDevice", "rdmaDevice");
  if (!rdmaDevice) {
    return std::unexpected(rdmaDevice.error());
  }
  if (*rdmaDevice) {
    const std::string& d = **rdmaDevice;
    const bool printable = std::all_of(d.begin(), d.end(), [](char ch) { return ch > ' ' && ch < 0x7f; });
    if (d.empty() || d.size() > 63 || !printable || d.find('/') != std::string::npos || d == "." || d == "..") {
      return invalid("rdmaDevice", d, "must be an RDMA device name such as \"mlx5_0\" (see `rdma dev`)");
    }
    c.rdmaDevice = d;
  }
  if (auto it = j.find("port"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() < 1 || it->get<std::int64_t>() > 255) {
      return invalid("port", *it, "must be the RDMA device's port number, from 1");
    }
    if (c.rdmaDevice.empty()) {
      return cni::fail(kBad, "port is set without rdmaDevice: port selects a port of rdmaDevice");
    }
    c.port = it->get<std::uint32_t>();
  }
  if (!c.master.empty() && !c.rdmaDevice.empty()) {
    return cni::fail(kBad, "both master = \"" + c.master + "\" and rdmaDevice = \"" + c.rdmaDevice +
                               "\" are set: name the IPoIB parent one way only");
  }
  if ((command == cni::Command::kAdd || command == cni::Command::kCheck) && c.master.empty() && c.rdmaDevice.empty()) {
    return cni::fail(kBad, "ipoib mode needs its IPoIB parent: set \"master\" (e.g. \"ib0\") or \"rdmaDevice\" and "
                           "\"port\" (e.g. \"mlx5_0\" and 1), which find the parent whatever its name on each node");
  }
  auto mode = stringField(j, "ipoibMode", "ipoibMode");
  if (!mode) {
    return std::unexpected(mode.error());
  }
  if (*mode) {
    if (**mode == "datagram") {
      c.ipoibMode = IpoibMode::kDatagram;
    } else if (**mode == "connected") {
      c.ipoibMode = IpoibMode::kConnected;
    } else {
      return invalid("ipoibMode", **mode, "accepted values: \"datagram\", \"connected\" (default: the parent's)");
    }
  }
  if (auto it = j.find("umcast"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return invalid("umcast", *it, "must be true or false");
    }
    c.umcast = it->get<bool>();
  }
  return {};
}

// verbsCheck: {"mode": "off"|"warn"|"require", "timeoutMs": 1-60000, "probe": "none"|"qp"}.
cni::Result<void> parseVerbsCheck(const json& j, NetConf& c) {
  auto it = j.find("verbsCheck");
  if (it == j.end() || it->is_null()) {
    return {};
  }
  if (!it->is_object()) {
    return invalid("verbsCheck", *it, "must be an object such as {\"mode\": \"require\"}");
  }
  auto mode = stringField(*it, "mode", "verbsCheck.mode");
  if (!mode) {
    return std::unexpected(mode.error());
  }
  if (*mode) {
    if (**mode == "off") {
      c.verbsCheck.mode = VerbsCheck::Mode::kOff;
    } else if (**mode == "warn") {
      c.verbsCheck.mode = VerbsCheck::Mode::kWarn;
    } else if (**mode == "require") {
      c.verbsCheck.mode = VerbsCheck::Mode::kRequire;
    } else {
      return invalid("verbsCheck.mode", **mode,
                     "accepted values: \"off\", \"warn\" (log problems), \"require\" (fail ADD and CHECK on them)");
    }
  }
  if (auto t = it->find("timeoutMs"); t != it->end() && !t->is_null()) {
    if (!t->is_number_integer() || t->get<std::int64_t>() < 1 || t->get<std::int64_t>() > 60000) {
      return invalid("verbsCheck.timeoutMs", *t, "must be an integer from 1 to 60000 (milliseconds)");
    }
    c.verbsCheck.timeoutMs = t->get<std::uint32_t>();
  }
  auto probe = stringField(*it, "probe", "verbsCheck.probe");
  if (!probe) {
    return std::unexpected(probe.error());
  }
  if (*probe) {
    if (**probe != "none" && **probe != "qp") {
      return invalid("verbsCheck.probe", **probe,
                     "accepted values: \"none\" (query the port), \"qp\" (also bring a UD QP to RTS)");
    }
    c.verbsCheck.qpProbe = **probe == "qp";
  }
  return {};
}

const std::set<std::string>& knownKeys() {
  static const std::set<std::string> keys = {
      "cniVersion", "cniVersions", "name", "type", "mode", "deviceID", "pciBusID", "device", "mtu",
      "linkState", "link_state", "pkey", "rdmaIsolation", "master", "rdmaDevice", "port", "ipoibMode", "umcast", "verbsCheck",
      "ipam", "dns", "logLevel", "logFile", "stateDir", "runtimeConfig", "args", "prevResult",
      "capabilities"};
  return keys;
}

cni::Result<std::string> checkVersion(const json& j, cni::SpecVersion* out) {
  auto it = j.find("cniVersion");
  std::string text;
  if (it != j.end() && !it->is_null()) {
    if (!it->is_string()) {
      return cni::fail(cni::Errc::kIncompatibleVersion,
                       "invalid cniVersion = " + shortDump(*it) + ": must be a version string",
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

cni::Result<std::uint16_t> parsePkey(std::string_view field, std::string_view text) {
  const std::string f(field);
  const std::string t(text);
  std::uint64_t v = 0;
  std::string_view digits = text;
  int base = 10;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    digits.remove_prefix(2);
    base = 16;
  }
  if (digits.empty() || digits.size() > 8) {
    return invalid(f, t, "must be a partition key from 0x0001 to 0x7fff (or 0x8001-0xffff with the full-membership bit)");
  }
  for (char ch : digits) {
    int d;
    if (ch >= '0' && ch <= '9') {
      d = ch - '0';
    } else if (base == 16 && ch >= 'a' && ch <= 'f') {
      d = ch - 'a' + 10;
    } else if (base == 16 && ch >= 'A' && ch <= 'F') {
      d = ch - 'A' + 10;
    } else {
      return invalid(f, t, "must be a partition key in hex (\"0x7fff\") or decimal");
    }
    v = v * static_cast<std::uint64_t>(base) + static_cast<std::uint64_t>(d);
  }
  if (v > 0xffff) {
    return invalid(f, t, "a partition key has 16 bits: 0x0001-0x7fff, or 0x8001-0xffff with the full-membership bit");
  }
  if ((v & 0x7fff) == 0) {
    return invalid(f, t, "0x0000 (and 0x8000) is the invalid partition key; the default partition is 0x7fff");
  }
  return static_cast<std::uint16_t>(v & 0x7fff);
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

namespace {

// The keys only ibcni itself reads. ibcni-ipam, run as an IPAM plugin, gets the configuration of
// whatever plugin delegated to it (macvlan's "mode", host-device's "device", ...) and must leave
// those keys alone.
cni::Result<void> parsePluginKeys(const json& j, NetConf& c, cni::Command command) {
  auto mode = stringField(j, "mode", "mode");
  if (!mode) {
    return std::unexpected(mode.error());
  }
  if (*mode && **mode != "sriov" && **mode != "ipoib") {
    return invalid("mode", **mode,
                   "accepted values: \"sriov\" (move a VF or netdev into the pod), \"ipoib\" (create an IPoIB pkey "
                   "child of an IPoIB parent in the pod)");
  }
  if (*mode && **mode == "ipoib") {
    c.mode = Mode::kIpoib;
  }

  if (auto it = j.find("runtimeConfig"); it != j.end() && !it->is_null()) {
    auto rc = parseRuntimeConfig(*it);
    if (!rc) {
      return std::unexpected(rc.error());
    }
    c.runtime = *rc;
  }

  auto deviceId = pciField(j, "deviceID", "deviceID");
  if (!deviceId) {
    return std::unexpected(deviceId.error());
  }
  auto pciBusId = pciField(j, "pciBusID", "pciBusID");
  if (!pciBusId) {
    return std::unexpected(pciBusId.error());
  }
  // Multus injects deviceID (and pciBusID) at the top level; a runtimeConfig deviceID from the
  // capability is the most specific.
  c.deviceId = c.runtime.deviceId ? c.runtime.deviceId : (*deviceId ? *deviceId : *pciBusId);
  if (!c.runtime.deviceInfoFile.empty() && (command == cni::Command::kAdd || command == cni::Command::kCheck)) {
    auto fromFile = readDeviceInfoFile(c.runtime.deviceInfoFile, !c.deviceId.has_value());
    if (!fromFile) {
      return std::unexpected(fromFile.error());
    }
    if (*fromFile && c.deviceId && **fromFile != *c.deviceId) {
      return cni::fail(kBad, "deviceID = \"" + c.deviceId->text + "\" but the device-info file " +
                                 cni::quoted(c.runtime.deviceInfoFile, 256) +
                                 " (runtimeConfig.CNIDeviceInfoFile) names " + (*fromFile)->text +
                                 ": the device plugin and the configuration disagree");
    }
    if (*fromFile && !c.deviceId) {
      c.deviceId = *fromFile;
    }
  }

  auto device = stringField(j, "device", "device");
  if (!device) {
    return std::unexpected(device.error());
  }
  if (*device) {
    if (!net::isValidIfName(**device)) {
      return invalid("device", **device, "must be a host network interface name (1-15 bytes, no '/', ':' or spaces)");
    }
    c.device = **device;
  }
  if (c.deviceId && !c.device.empty()) {
    return cni::fail(kBad, "both deviceID = \"" + c.deviceId->text + "\" and device = \"" + c.device +
                               "\" are set: select the device one way only (deviceID is what Multus "
                               "injects from the NetworkAttachmentDefinition's resourceName)");
  }
  if (c.mode == Mode::kIpoib) {
    if (auto r = parseIpoibKeys(j, c, command); !r) {
      return std::unexpected(r.error());
    }
  } else if ((command == cni::Command::kAdd || command == cni::Command::kCheck) && !c.deviceId && c.device.empty()) {
    return cni::fail(kBad, "no device selected: set \"deviceID\" (the VF's PCI address, normally injected by "
                           "Multus from the resourceName annotation) or \"device\" (a host netdev name)");
  }

  if (auto it = j.find("mtu"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() < 68 || it->get<std::int64_t>() > 65535) {
      return invalid("mtu", *it, "must be an integer from 68 to 65535");
    }
    c.mtu = it->get<std::uint32_t>();
  }
  if (auto r = parseSriovKeys(j, c); !r) {
    return std::unexpected(r.error());
  }
  if (auto r = parseVerbsCheck(j, c); !r) {
    return std::unexpected(r.error());
  }

  if (auto it = j.find("dns"); it != j.end() && !it->is_null()) {
    auto dns = parseDns(*it);
    if (!dns) {
      return std::unexpected(dns.error());
    }
    c.dns = *dns;
  }

  auto logLevel = stringField(j, "logLevel", "logLevel");
  if (!logLevel) {
    return std::unexpected(logLevel.error());
  }
  if (*logLevel) {
    auto l = parseLogLevel(**logLevel);
    if (!l) {
      return invalid("logLevel", **logLevel, "accepted values: \"error\", \"warn\", \"info\", \"debug\"");
    }
    c.logLevel = *l;
  }
  auto logFile = stringField(j, "logFile", "logFile");
  if (!logFile) {
    return std::unexpected(logFile.error());
  }
  if (*logFile && !(*logFile)->empty()) {
    if (auto bad = badPath("logFile", **logFile, os::logFileSpellingProblem(**logFile), "\"/var/log/ibcni.log\"")) {
      return *bad;
    }
    c.logFile = **logFile;
  }
  auto stateDir = stringField(j, "stateDir", "stateDir");
  if (!stateDir) {
    return std::unexpected(stateDir.error());
  }
  if (*stateDir) {
    if (auto bad = badPath("stateDir", **stateDir, os::pathSpellingProblem(**stateDir),
                           "\"" + std::string(kDefaultStateDir) + "\"")) {
      return *bad;
    }
    c.stateDir = **stateDir;
  }

  for (const auto& [key, value] : j.items()) {
    if (!knownKeys().contains(key) && !key.starts_with("cni.dev/")) {
      c.unknownKeys.push_back(key);
    }
  }
  return {};
}

}  // namespace

cni::Result<Preamble> parsePreamble(std::string_view stdinText) {
  auto j = parseObject(stdinText);
  if (!j) {
    return std::unexpected(j.error());
  }
  Preamble p;
  if (auto it = j->find("cniVersion"); it != j->end() && it->is_string()) {
    p.cniVersion = it->get<std::string>();
  }
  if (auto it = j->find("logLevel"); it != j->end() && it->is_string()) {
    p.logLevel = parseLogLevel(it->get<std::string>()).value_or(LogLevel::kWarn);
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

cni::Result<NetConf> parseNetConf(std::string_view stdinText, cni::Command command, Role role) {
  auto parsed = parseObject(stdinText);
  if (!parsed) {
    return std::unexpected(parsed.error());
  }
  const json& j = *parsed;
  NetConf c;

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

  auto type = stringField(j, "type", "type");
  if (!type) {
    return std::unexpected(type.error());
  }
  c.type = type->value_or("");

  if (role == Role::kPlugin) {
    if (auto r = parsePluginKeys(j, c, command); !r) {
      return std::unexpected(r.error());
    }
  } else if (auto it = j.find("runtimeConfig"); it != j.end() && it->is_object()) {
    auto ips = ipList(*it, "ips", "runtimeConfig.ips");
    if (!ips) {
      return std::unexpected(ips.error());
    }
    c.runtime.ips = *ips;
  }

  if (auto it = j.find("ipam"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) {
      return invalid("ipam", *it, "must be an object: {} for no addresses, or {\"type\": \"<ipam plugin>\", ...}");
    }
    auto ipamType = stringField(*it, "type", "ipam.type");
    if (!ipamType) {
      return std::unexpected(ipamType.error());
    }
    if (!*ipamType && !it->empty()) {
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
  }

  if (role == Role::kIpamPlugin && c.ipamType.empty()) {
    return cni::fail(kBad, "ipam.type is missing: an IPAM plugin reads the \"ipam\" object; set \"ipam\": "
                           "{\"type\": \"ibcni-ipam\", ...}");
  }

  if (auto it = j.find("args"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) {
      return invalid("args", *it, "must be an object");
    }
    if (auto cniArgs = it->find("cni"); cniArgs != it->end() && cniArgs->is_object()) {
      auto ips = ipList(*cniArgs, "ips", "args.cni.ips");
      if (!ips) {
        return std::unexpected(ips.error());
      }
      c.argsIps = *ips;
      if (role == Role::kPlugin) {
        auto guid = stringField(*cniArgs, "guid", "args.cni.guid");
        if (!guid) {
          return std::unexpected(guid.error());
        }
        if (*guid) {
          auto g = parseVfGuid("args.cni.guid", **guid);
          if (!g) {
            return std::unexpected(g.error());
          }
          c.argsGuid = *g;
        }
      }
    }
  }

  if (auto it = j.find("prevResult"); it != j.end() && !it->is_null()) {
    auto prev = result::resultFromJson(*it, kBad, "prevResult");
    if (!prev) {
      return std::unexpected(prev.error());
    }
    c.prevResult = *prev;
  }

  if (command == cni::Command::kGc) {
    // libcni >= 1.2.3 sends both keys; the spec-v1.1.0 text names the second.
    for (const char* key : {"cni.dev/valid-attachments", "cni.dev/attachments"}) {
      if (auto it = j.find(key); it != j.end() && !it->is_null()) {
        auto list = parseAttachments(*it, key);
        if (!list) {
          return std::unexpected(list.error());
        }
        c.validAttachments = *list;
        break;
      }
    }
  }

  return c;
}

}  // namespace ibcni::config
