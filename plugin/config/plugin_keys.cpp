// SPDX-License-Identifier: Apache-2.0
// ibcni's own keys (role kPlugin): the mode, the device (deviceID, pciBusID, device,
// runtimeConfig.deviceID, the device-info file's path, which ADD and CHECK read), mtu, the VF
// settings and guidPool, the IPoIB parent and child, verbsCheck, dns, logging and stateDir.
// ibcni-ipam, run as an IPAM plugin, leaves these keys to the plugin that delegated to it. The parse
// reads no file.
#include <algorithm>
#include <set>

#include "lib/json/json_fields.h"
#include "ipam/config/guid_pool.h"
#include "plugin/config/sections.h"
#include "ibcni/os/safe_path.h"
#include "lib/result/json_codec.h"

namespace ibcni::config {

std::optional<LogLevel> logLevelFromText(std::string_view s) {
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

namespace {

// A configured path (logFile, stateDir): the spelling rules of os/safe_path.h, with the fix.
std::optional<std::unexpected<cni::Error>> badPath(const std::string& field, const std::string& value,
                                                   const std::string& problem, const std::string& example) {
  if (problem.empty()) {
    return std::nullopt;
  }
  return invalid(field, value, problem + " (e.g. " + example + "; docs/security.md)", 256);
}

// A device plugin's device ID as Multus passes it (deviceID, pciBusID, runtimeConfig.deviceID). In
// sriov mode it selects the VF, so it must be a PCI address. ipoib mode creates its device and selects
// nothing by it: an ipoib NAD may name another plugin's resource (the RDMA shared device plugin's, so
// that pods get /dev/infiniband, whose IDs are "0", "1", ...), so there it only has to be a string.
cni::Result<std::optional<net::PciAddress>> deviceIdField(const json& obj, const char* key, const std::string& path,
                                                          Mode mode) {
  if (mode == Mode::kIpoib) {
    std::optional<std::string> ignored;
    IBCNI_TRY_ASSIGN(ignored, stringField(obj, key, path));
    return std::optional<net::PciAddress>();
  }
  return pciField(obj, key, path);
}

cni::Result<RuntimeConfig> parseRuntimeConfig(const json& j, Mode mode) {
  RuntimeConfig rc;
  if (!j.is_object()) {
    return invalid("runtimeConfig", j, "must be an object");
  }
  IBCNI_TRY_ASSIGN(rc.ips, ipList(j, "ips", "runtimeConfig.ips"));
  std::optional<std::string> mac;
  IBCNI_TRY_ASSIGN(mac, stringField(j, "mac", "runtimeConfig.mac"));
  if (mac) {
    auto hw = net::HwAddress::parse(*mac);
    if (!hw || hw->length != 6) {
      return invalid("runtimeConfig.mac", *mac, "must be a 6-byte MAC address such as \"0a:58:0a:01:02:03\"");
    }
    rc.mac = *hw;
  }
  IBCNI_TRY_ASSIGN(rc.deviceId, deviceIdField(j, "deviceID", "runtimeConfig.deviceID", mode));
  std::optional<std::string> guid;
  IBCNI_TRY_ASSIGN(guid, stringField(j, "infinibandGUID", "runtimeConfig.infinibandGUID"));
  if (guid) {
    IBCNI_TRY_ASSIGN(rc.infinibandGuid, parseVfGuid("runtimeConfig.infinibandGUID", *guid));
  }
  std::optional<std::string> info;
  IBCNI_TRY_ASSIGN(info, stringField(j, "CNIDeviceInfoFile", "runtimeConfig.CNIDeviceInfoFile"));
  rc.deviceInfoFile = info.value_or("");
  return rc;
}

// A key that is true, false or "auto", into `out` (an enum with kOn, kOff and kAuto); absent or null
// leaves `out` as it is. `accepted` is the error's explanation of the values.
template <class TriState>
cni::Result<void> boolOrAuto(const json& j, const char* key, TriState& out, const char* accepted) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    return {};
  }
  if (it->is_boolean()) {
    out = it->get<bool>() ? TriState::kOn : TriState::kOff;
  } else if (it->is_string() && it->get<std::string>() == "auto") {
    out = TriState::kAuto;
  } else {
    return invalid(key, *it, accepted);
  }
  return {};
}

// vfio (sriov mode): true, false or "auto". true has no meaning in ipoib mode, which creates its
// device.
cni::Result<void> parseVfio(const json& j, NetConf& c) {
  if (auto r = boolOrAuto(j, "vfio", c.vfio,
                          "accepted values: \"auto\" (a VF bound to vfio-pci goes to a VM, any other to the pod), "
                          "true (a network for VMs: the VF must be bound to vfio-pci), false (a network for pods)");
      !r) {
    return r;
  }
  if (c.vfio == VfioUse::kOn && c.mode == Mode::kIpoib) {
    return invalid("vfio", j.at("vfio"),
                   "is a sriov-mode key: ipoib mode creates an IPoIB child in the pod, which no VM can take; use "
                   "\"mode\": \"sriov\" with the VF's deviceID");
  }
  return {};
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

  if (auto r = boolOrAuto(j, "rdmaIsolation", c.rdmaIsolation,
                          "accepted values: true (move the RDMA device, the node must be in exclusive mode), false, "
                          "\"auto\" (move it when the node is in exclusive mode)");
      !r) {
    return r;
  }
  return parseVfio(j, c);
}

// guidPool (sriov mode): kept as a result, as the embedded IPAM's object is. ADD and CHECK refuse a
// broken one here; DEL, GC and STATUS keep its error in c.guidPool and go on (DEL still puts the
// VF's GUIDs back).
cni::Result<void> parseGuidPool(const json& j, NetConf& c, cni::Command command) {
  const json* pool = memberGiven(j, "guidPool");
  if (pool == nullptr) {
    return {};
  }
  if (c.mode == Mode::kIpoib) {
    c.guidPool = cni::Result<GuidPoolConf>(invalid(
        "guidPool", *pool, "is a sriov-mode key: ipoib mode creates an IPoIB child, which has no VF GUID to "
                           "assign; remove guidPool, or use \"mode\": \"sriov\""));
  } else {
    c.guidPool = guidPoolObject(*pool, c.name);
  }
  if (!*c.guidPool && (command == cni::Command::kAdd || command == cni::Command::kCheck)) {
    return std::unexpected(c.guidPool->error());
  }
  return {};
}

// ipoib mode's keys: the parent (master, or rdmaDevice + port), ipoibMode, umcast. deviceID and
// pciBusID (which Multus injects when the network names a resource) are not used (deviceIdField).
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

// An integer member of policyRouting from `low` to `high`, leaving out the kernel's own tables
// (253 default, 254 main, 255 local) when `table`.
cni::Result<void> policyNumber(const json& obj, const char* key, std::int64_t low, std::int64_t high, bool table,
                               std::optional<std::uint32_t>& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return {};
  }
  const std::string field = std::string("policyRouting.") + key;
  const bool inRange = it->is_number_integer() && it->get<std::int64_t>() >= low && it->get<std::int64_t>() <= high;
  if (!inRange) {
    return invalid(field, *it, "must be an integer from " + std::to_string(low) + " to " + std::to_string(high));
  }
  if (table && it->get<std::int64_t>() >= 253 && it->get<std::int64_t>() <= 255) {
    return invalid(field, *it, "names one of the kernel's own tables (253 default, 254 main, 255 local): pick "
                               "another, or leave it out to derive one from the interface's name");
  }
  out = it->get<std::uint32_t>();
  return {};
}

// policyRouting: true, false, or {"table": 1-2147483647, "priority": 1-32765}.
cni::Result<void> parsePolicyRouting(const json& j, NetConf& c) {
  auto it = j.find("policyRouting");
  if (it == j.end() || it->is_null() || (it->is_boolean() && !it->get<bool>())) {
    return {};
  }
  PolicyRouting policy;
  if (it->is_object()) {
    std::optional<std::uint32_t> priority;
    if (auto r = policyNumber(*it, "table", 1, 2147483647, true, policy.table); !r) {
      return r;
    }
    // Below the kernel's `from all lookup main` (32766); 0 is its local table's rule.
    if (auto r = policyNumber(*it, "priority", 1, 32765, false, priority); !r) {
      return r;
    }
    policy.priority = priority.value_or(policy.priority);
  } else if (!it->is_boolean()) {
    return invalid("policyRouting", *it,
                   "must be true, false or an object such as {\"table\": 101, \"priority\": 1000}");
  }
  c.policyRouting = policy;
  return {};
}

// verbsCheck: {"mode": "off"|"warn"|"require", "timeoutMs": 1-60000, "probe": "none"|"qp"}.
cni::Result<void> parseVerbsCheck(const json& j, NetConf& c) {
  const json* vc = nullptr;
  IBCNI_TRY_ASSIGN(vc, objectField(j, "verbsCheck", "must be an object such as {\"mode\": \"require\"}"));
  if (vc == nullptr) {
    return {};
  }
  auto mode = stringField(*vc, "mode", "verbsCheck.mode");
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
  if (auto t = vc->find("timeoutMs"); t != vc->end() && !t->is_null()) {
    if (!t->is_number_integer() || t->get<std::int64_t>() < 1 || t->get<std::int64_t>() > 60000) {
      return invalid("verbsCheck.timeoutMs", *t, "must be an integer from 1 to 60000 (milliseconds)");
    }
    c.verbsCheck.timeoutMs = t->get<std::uint32_t>();
  }
  auto probe = stringField(*vc, "probe", "verbsCheck.probe");
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
      "linkState", "link_state", "pkey", "rdmaIsolation", "vfio", "master", "rdmaDevice", "port", "ipoibMode",
      "umcast", "verbsCheck", "policyRouting",
      "guidPool", "ipam", "dns", "logLevel", "logFile", "stateDir", "runtimeConfig", "args", "prevResult",
      "capabilities"};
  return keys;
}

// The keys only ibcni itself reads. ibcni-ipam, run as an IPAM plugin, gets the configuration of
// whatever plugin delegated to it (macvlan's "mode", host-device's "device", ...) and must leave
// those keys alone.
// Which device sriov mode moves: runtimeConfig.deviceID, deviceID, pciBusID, or a host netdev by
// name; ADD and CHECK may take it from the device-info file (plugin/commands/device_info.cpp).
cni::Result<void> parseDeviceSelection(const json& j, NetConf& c) {
  if (auto it = j.find("runtimeConfig"); it != j.end() && !it->is_null()) {
    IBCNI_TRY_ASSIGN(c.runtime, parseRuntimeConfig(*it, c.mode));
  }
  std::optional<net::PciAddress> deviceId;
  IBCNI_TRY_ASSIGN(deviceId, deviceIdField(j, "deviceID", "deviceID", c.mode));
  std::optional<net::PciAddress> pciBusId;
  IBCNI_TRY_ASSIGN(pciBusId, deviceIdField(j, "pciBusID", "pciBusID", c.mode));
  // Multus injects deviceID (and pciBusID) at the top level; a runtimeConfig deviceID from the
  // capability is the most specific.
  c.deviceId = c.runtime.deviceId ? c.runtime.deviceId : (deviceId ? deviceId : pciBusId);
  // The device-info file (runtimeConfig.CNIDeviceInfoFile) is read by ADD and CHECK, not here
  // (plugin/commands/device_info.cpp, deviceFromInfoFile).
  std::optional<std::string> device;
  IBCNI_TRY_ASSIGN(device, stringField(j, "device", "device"));
  if (device) {
    if (!net::isValidIfName(*device)) {
      return invalid("device", *device, "must be a host network interface name (1-15 bytes, no '/', ':' or spaces)");
    }
    c.device = *device;
  }
  if (c.deviceId && !c.device.empty()) {
    return cni::fail(kBad, "both deviceID = \"" + c.deviceId->text + "\" and device = \"" + c.device +
                               "\" are set: select the device one way only (deviceID is what Multus "
                               "injects from the NetworkAttachmentDefinition's resourceName)");
  }
  return {};
}

// logLevel, logFile and stateDir: where ibcni writes, under the path rules of os/safe_path.h.
cni::Result<void> parseLoggingAndState(const json& j, NetConf& c) {
  std::optional<std::string> logLevel;
  IBCNI_TRY_ASSIGN(logLevel, stringField(j, "logLevel", "logLevel"));
  if (logLevel) {
    auto l = logLevelFromText(*logLevel);
    if (!l) {
      return invalid("logLevel", *logLevel, "accepted values: \"error\", \"warn\", \"info\", \"debug\"");
    }
    c.logLevel = *l;
  }
  std::optional<std::string> logFile;
  IBCNI_TRY_ASSIGN(logFile, stringField(j, "logFile", "logFile"));
  if (logFile && !logFile->empty()) {
    if (auto bad = badPath("logFile", *logFile, os::logFileSpellingProblem(*logFile), "\"/var/log/ibcni.log\"")) {
      return *bad;
    }
    c.logFile = *logFile;
  }
  std::optional<std::string> stateDir;
  IBCNI_TRY_ASSIGN(stateDir, stringField(j, "stateDir", "stateDir"));
  if (stateDir) {
    if (auto bad = badPath("stateDir", *stateDir, os::pathSpellingProblem(*stateDir),
                           "\"" + std::string(kDefaultStateDir) + "\"")) {
      return *bad;
    }
    c.stateDir = *stateDir;
  }
  return {};
}

}  // namespace

cni::Result<void> pluginKeys(const json& j, NetConf& c, cni::Command command) {
  std::optional<std::string> mode;
  IBCNI_TRY_ASSIGN(mode, stringField(j, "mode", "mode"));
  if (mode && *mode != "sriov" && *mode != "ipoib") {
    return invalid("mode", *mode,
                   "accepted values: \"sriov\" (move a VF or netdev into the pod), \"ipoib\" (create an IPoIB pkey "
                   "child of an IPoIB parent in the pod)");
  }
  if (mode && *mode == "ipoib") {
    c.mode = Mode::kIpoib;
  }
  if (auto r = parseDeviceSelection(j, c); !r) {
    return r;
  }
  if (c.mode == Mode::kIpoib) {
    if (auto r = parseIpoibKeys(j, c, command); !r) {
      return r;
    }
  } else if ((command == cni::Command::kAdd || command == cni::Command::kCheck) && !c.deviceId && c.device.empty() &&
             c.runtime.deviceInfoFile.empty()) {
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
    return r;
  }
  if (auto r = parseGuidPool(j, c, command); !r) {
    return r;
  }
  if (auto r = parseVerbsCheck(j, c); !r) {
    return r;
  }
  if (auto r = parsePolicyRouting(j, c); !r) {
    return r;
  }
  if (auto it = j.find("dns"); it != j.end() && !it->is_null()) {
    IBCNI_TRY_ASSIGN(c.dns, dnsObject(*it, "dns"));
  }
  if (auto r = parseLoggingAndState(j, c); !r) {
    return r;
  }
  for (const auto& [key, value] : j.items()) {
    if (!knownKeys().contains(key) && !key.starts_with("cni.dev/")) {
      c.unknownKeys.push_back(key);
    }
  }
  return {};
}

}  // namespace ibcni::config
