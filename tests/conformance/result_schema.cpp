// SPDX-License-Identifier: Apache-2.0
#include "conformance/result_schema.h"

#include <arpa/inet.h>

#include <cctype>
#include <set>

namespace ibcni::conformance {

using nlohmann::json;

namespace {

using Problems = std::vector<std::string>;

bool hasIpVersionField(const std::string& v) { return v == "0.3.0" || v == "0.3.1" || v == "0.4.0"; }
bool hasV11Fields(const std::string& v) { return v == "1.1.0"; }
bool isKnownResultVersion(const std::string& v) {
  return v == "0.3.0" || v == "0.3.1" || v == "0.4.0" || v == "1.0.0" || v == "1.1.0";
}

bool isUint(const json& j) { return j.is_number_unsigned() || (j.is_number_integer() && j.get<std::int64_t>() >= 0); }

bool isUint32(const json& j) { return isUint(j) && j.get<std::uint64_t>() <= 0xffffffffULL; }

// Linux's rule for interface names, which CNI_IFNAME and interfaces[].name follow.
bool isIfName(const std::string& s) {
  if (s.empty() || s.size() > 15 || s == "." || s == "..") {
    return false;
  }
  for (unsigned char c : s) {
    if (c == '/' || c == ':' || std::isspace(c) != 0 || c < 0x20) {
      return false;
    }
  }
  return true;
}

// "xx:xx:...": exactly `octets` two-digit hex octets separated by colons.
bool isHwAddress(const std::string& s, std::size_t octets) {
  if (s.size() != octets * 3 - 1) {
    return false;
  }
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i % 3 == 2) {
      if (s[i] != ':') {
        return false;
      }
    } else if (std::isxdigit(static_cast<unsigned char>(s[i])) == 0) {
      return false;
    }
  }
  return true;
}

// DDDD:BB:DD.F (domain, bus, device 0-1f, function 0-7), as sysfs names PCI functions.
bool isPciAddress(const std::string& s) {
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') {
    return false;
  }
  for (std::size_t i : {0U, 1U, 2U, 3U, 5U, 6U, 8U, 9U}) {
    if (std::isxdigit(static_cast<unsigned char>(s[i])) == 0) {
      return false;
    }
  }
  const int device = std::stoi(s.substr(8, 2), nullptr, 16);
  return device <= 0x1f && s[11] >= '0' && s[11] <= '7';
}

void checkKeys(const json& obj, const std::set<std::string>& allowed, const std::string& path, Problems& out,
               const std::string& why = "") {
  for (const auto& [key, value] : obj.items()) {
    if (!allowed.contains(key)) {
      out.push_back(path + "." + key + ": not a field of this object" + (why.empty() ? "" : " (" + why + ")"));
    }
  }
}

// A string field: absent is fine unless `required`; present must be a string.
const json* stringField(const json& obj, const char* key, const std::string& path, bool required, Problems& out) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) {
      out.push_back(path + "." + key + ": required");
    }
    return nullptr;
  }
  if (!it->is_string()) {
    out.push_back(path + "." + key + ": must be a string, is " + it->dump());
    return nullptr;
  }
  return &*it;
}

void uintFields(const json& obj, const std::vector<const char*>& keys, const std::string& path, Problems& out) {
  for (const char* key : keys) {
    if (auto it = obj.find(key); it != obj.end() && !isUint32(*it)) {
      out.push_back(path + "." + key + ": must be an unsigned integer, is " + it->dump());
    }
  }
}

void checkInterfaces(const json& list, const ResultContext& ctx, Problems& out) {
  if (!list.is_array()) {
    out.push_back("interfaces: must be a list, is " + list.dump());
    return;
  }
  std::set<std::string> allowed = {"name", "mac", "sandbox"};
  if (hasV11Fields(ctx.version)) {
    allowed.insert({"mtu", "socketPath", "pciID"});
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& e = list[i];
    const std::string path = "interfaces[" + std::to_string(i) + "]";
    if (!e.is_object()) {
      out.push_back(path + ": must be an object, is " + e.dump());
      continue;
    }
    checkKeys(e, allowed, path, out, hasV11Fields(ctx.version) ? "" : "mtu, socketPath and pciID came in 1.1.0");
    if (const json* name = stringField(e, "name", path, true, out); name && !isIfName(name->get<std::string>())) {
      out.push_back(path + ".name: \"" + name->get<std::string>() + "\" is not an interface name");
    }
    if (const json* mac = stringField(e, "mac", path, false, out)) {
      const std::string m = mac->get<std::string>();
      if (!isHwAddress(m, 6) && !isHwAddress(m, 20)) {
        out.push_back(path + ".mac: \"" + m + "\" is neither a 6-byte Ethernet nor a 20-byte IPoIB address");
      }
    }
    if (const json* sandbox = stringField(e, "sandbox", path, false, out)) {
      const std::string s = sandbox->get<std::string>();
      if (!s.empty() && s.front() != '/') {
        out.push_back(path + ".sandbox: \"" + s + "\" is not an absolute path");
      }
    }
    if (hasV11Fields(ctx.version)) {
      uintFields(e, {"mtu"}, path, out);
      if (auto mtu = e.find("mtu"); mtu != e.end() && isUint32(*mtu) && mtu->get<std::uint64_t>() == 0) {
        out.push_back(path + ".mtu: 0 is not an MTU (leave the field out instead)");
      }
      stringField(e, "socketPath", path, false, out);
      if (const json* pci = stringField(e, "pciID", path, false, out); pci && !isPciAddress(pci->get<std::string>())) {
        out.push_back(path + ".pciID: \"" + pci->get<std::string>() + "\" is not a PCI address (0000:af:06.1)");
      }
    }
  }
  if (ctx.ifName) {
    bool found = false;
    for (const json& e : list) {
      if (e.is_object() && e.value("name", "") == *ctx.ifName) {
        found = true;
        if (ctx.sandbox && e.value("sandbox", "") != *ctx.sandbox) {
          out.push_back("interfaces: " + *ctx.ifName + " has sandbox \"" + e.value("sandbox", "") +
                        "\", the request's CNI_NETNS is \"" + *ctx.sandbox + "\"");
        }
      }
    }
    if (!found) {
      out.push_back("interfaces: no interface named CNI_IFNAME=" + *ctx.ifName);
    }
  }
}

void checkIps(const json& list, const json* interfaces, const ResultContext& ctx, Problems& out) {
  if (!list.is_array()) {
    out.push_back("ips: must be a list, is " + list.dump());
    return;
  }
  std::set<std::string> allowed = {"address", "gateway", "interface"};
  if (hasIpVersionField(ctx.version)) {
    allowed.insert("version");
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& e = list[i];
    const std::string path = "ips[" + std::to_string(i) + "]";
    if (!e.is_object()) {
      out.push_back(path + ": must be an object, is " + e.dump());
      continue;
    }
    checkKeys(e, allowed, path, out, hasIpVersionField(ctx.version) ? "" : "ips[].version was removed in 1.0.0");
    int family = 0;
    if (const json* addr = stringField(e, "address", path, true, out)) {
      const std::string a = addr->get<std::string>();
      if (!isCidr(a)) {
        out.push_back(path + ".address: \"" + a + "\" is not in CIDR form (10.1.2.3/24)");
      } else {
        family = ipFamily(a.substr(0, a.find('/')));
      }
    }
    if (const json* gw = stringField(e, "gateway", path, false, out)) {
      const int gwFamily = ipFamily(gw->get<std::string>());
      if (gwFamily == 0) {
        out.push_back(path + ".gateway: \"" + gw->get<std::string>() + "\" is not an IP address");
      } else if (family != 0 && gwFamily != family) {
        out.push_back(path + ".gateway: \"" + gw->get<std::string>() + "\" is not of the address's family");
      }
    }
    if (hasIpVersionField(ctx.version)) {
      if (const json* v = stringField(e, "version", path, true, out)) {
        const std::string vs = v->get<std::string>();
        if (vs != "4" && vs != "6") {
          out.push_back(path + ".version: must be \"4\" or \"6\", is \"" + vs + "\"");
        } else if (family != 0 && vs != std::to_string(family)) {
          out.push_back(path + ".version: \"" + vs + "\" but the address is IPv" + std::to_string(family));
        }
      }
    }
    auto idx = e.find("interface");
    if (ctx.kind == ResultKind::kIpam) {
      if (idx != e.end()) {
        out.push_back(path + ".interface: an IPAM plugin's result has no interfaces to point at");
      }
      continue;
    }
    if (idx == e.end()) {
      out.push_back(path + ".interface: an interface plugin must say which interface the address is on");
      continue;
    }
    if (!isUint(*idx)) {
      out.push_back(path + ".interface: must be an unsigned index, is " + idx->dump());
      continue;
    }
    const auto n = idx->get<std::uint64_t>();
    if (interfaces == nullptr || !interfaces->is_array() || n >= interfaces->size()) {
      out.push_back(path + ".interface: " + std::to_string(n) + " is not an index into interfaces");
      continue;
    }
    const json& target = (*interfaces)[n];
    if (!target.is_object() || target.value("sandbox", "").empty()) {
      out.push_back(path + ".interface: " + std::to_string(n) +
                    " points at an interface without a sandbox, "
                    "not a container interface");
    }
  }
}

void checkRoutes(const json& list, const ResultContext& ctx, Problems& out) {
  if (!list.is_array()) {
    out.push_back("routes: must be a list, is " + list.dump());
    return;
  }
  std::set<std::string> allowed = {"dst", "gw"};
  if (hasV11Fields(ctx.version)) {
    allowed.insert({"mtu", "advmss", "priority", "table", "scope"});
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& e = list[i];
    const std::string path = "routes[" + std::to_string(i) + "]";
    if (!e.is_object()) {
      out.push_back(path + ": must be an object, is " + e.dump());
      continue;
    }
    checkKeys(e, allowed, path, out,
              hasV11Fields(ctx.version) ? "" : "mtu, advmss, priority, table and scope came in 1.1.0");
    int family = 0;
    if (const json* dst = stringField(e, "dst", path, true, out)) {
      const std::string d = dst->get<std::string>();
      if (!isCidr(d)) {
        out.push_back(path + ".dst: \"" + d + "\" is not in CIDR form (0.0.0.0/0)");
      } else {
        family = ipFamily(d.substr(0, d.find('/')));
      }
    }
    if (const json* gw = stringField(e, "gw", path, false, out)) {
      const int gwFamily = ipFamily(gw->get<std::string>());
      if (gwFamily == 0) {
        out.push_back(path + ".gw: \"" + gw->get<std::string>() + "\" is not an IP address");
      } else if (family != 0 && gwFamily != family) {
        out.push_back(path + ".gw: \"" + gw->get<std::string>() + "\" is not of dst's family");
      }
    }
    if (hasV11Fields(ctx.version)) {
      uintFields(e, {"mtu", "advmss", "priority", "table", "scope"}, path, out);
    }
  }
}

void checkStringList(const json& obj, const char* key, const std::string& path, bool ips, Problems& out) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    return;
  }
  if (!it->is_array()) {
    out.push_back(path + "." + key + ": must be a list of strings, is " + it->dump());
    return;
  }
  for (const auto& s : *it) {
    if (!s.is_string()) {
      out.push_back(path + "." + key + ": " + s.dump() + " is not a string");
    } else if (ips && ipFamily(s.get<std::string>()) == 0) {
      out.push_back(path + "." + key + ": \"" + s.get<std::string>() + "\" is not an IP address");
    }
  }
}

void checkDns(const json& dns, Problems& out) {
  if (!dns.is_object()) {
    out.push_back("dns: must be an object, is " + dns.dump());
    return;
  }
  checkKeys(dns, {"nameservers", "domain", "search", "options"}, "dns", out);
  checkStringList(dns, "nameservers", "dns", true, out);
  stringField(dns, "domain", "dns", false, out);
  checkStringList(dns, "search", "dns", false, out);
  checkStringList(dns, "options", "dns", false, out);
}

}  // namespace

int ipFamily(const std::string& text) {
  unsigned char buf[16];
  if (::inet_pton(AF_INET, text.c_str(), buf) == 1) {
    return 4;
  }
  if (::inet_pton(AF_INET6, text.c_str(), buf) == 1) {
    return 6;
  }
  return 0;
}

bool isCidr(const std::string& text) {
  const auto slash = text.find('/');
  if (slash == std::string::npos || slash + 1 >= text.size() || text.size() - slash > 4) {
    return false;
  }
  const int family = ipFamily(text.substr(0, slash));
  if (family == 0) {
    return false;
  }
  const std::string bits = text.substr(slash + 1);
  for (char c : bits) {
    if (c < '0' || c > '9') {
      return false;
    }
  }
  if (bits.size() > 1 && bits.front() == '0') {
    return false;
  }
  const int n = std::stoi(bits);
  return n <= (family == 4 ? 32 : 128);
}

std::vector<std::string> validateAddResult(const json& result, const ResultContext& ctx) {
  Problems out;
  if (!result.is_object()) {
    out.push_back("the result must be a JSON object, is " + result.dump());
    return out;
  }
  checkKeys(result, {"cniVersion", "interfaces", "ips", "routes", "dns"}, "result", out);
  if (const json* v = stringField(result, "cniVersion", "result", true, out)) {
    const std::string version = v->get<std::string>();
    if (!isKnownResultVersion(version)) {
      out.push_back("result.cniVersion: \"" + version + "\" is not a version with this result format");
    }
    if (version != ctx.version) {
      out.push_back("result.cniVersion: \"" + version + "\", the request's is \"" + ctx.version + "\"");
    }
  }
  auto interfaces = result.find("interfaces");
  if (ctx.kind == ResultKind::kIpam) {
    if (interfaces != result.end()) {
      out.push_back("interfaces: an IPAM plugin returns the abbreviated result, without interfaces");
    }
  } else if (interfaces != result.end()) {
    checkInterfaces(*interfaces, ctx, out);
  } else if (ctx.ifName) {
    out.push_back("interfaces: missing, but the plugin put CNI_IFNAME=" + *ctx.ifName + " into the container");
  }
  if (auto ips = result.find("ips"); ips != result.end()) {
    checkIps(*ips, interfaces != result.end() ? &*interfaces : nullptr, ctx, out);
  }
  if (auto routes = result.find("routes"); routes != result.end()) {
    checkRoutes(*routes, ctx, out);
  }
  if (auto dns = result.find("dns"); dns != result.end()) {
    checkDns(*dns, out);
  }
  return out;
}

std::vector<std::string> validateError(const json& error) {
  Problems out;
  if (!error.is_object()) {
    out.push_back("the error must be a JSON object, is " + error.dump());
    return out;
  }
  checkKeys(error, {"cniVersion", "code", "msg", "details"}, "error", out);
  auto code = error.find("code");
  if (code == error.end()) {
    out.push_back("error.code: required");
  } else if (!isUint32(*code)) {
    out.push_back("error.code: must be an unsigned integer, is " + code->dump());
  } else {
    const auto c = code->get<std::uint64_t>();
    const bool wellKnown = (c >= 1 && c <= 8) || c == 11 || c == 50 || c == 51;
    if (c == 0) {
      out.push_back("error.code: 0 is success, not an error code");
    } else if (c < 100 && !wellKnown) {
      out.push_back("error.code: " + std::to_string(c) +
                    " is reserved by the spec and has no meaning; plugin-specific codes start at 100");
    }
  }
  if (const json* msg = stringField(error, "msg", "error", true, out); msg && msg->get<std::string>().empty()) {
    out.push_back("error.msg: must not be empty");
  }
  stringField(error, "details", "error", false, out);
  stringField(error, "cniVersion", "error", false, out);
  return out;
}

std::vector<std::string> validateVersion(const json& answer) {
  Problems out;
  if (!answer.is_object()) {
    out.push_back("the VERSION answer must be a JSON object, is " + answer.dump());
    return out;
  }
  checkKeys(answer, {"cniVersion", "supportedVersions"}, "version", out);
  if (const json* v = stringField(answer, "cniVersion", "version", true, out); v && v->get<std::string>().empty()) {
    out.push_back("version.cniVersion: must not be empty");
  }
  auto list = answer.find("supportedVersions");
  if (list == answer.end()) {
    out.push_back("version.supportedVersions: required");
  } else if (!list->is_array() || list->empty()) {
    out.push_back("version.supportedVersions: must be a non-empty list, is " + list->dump());
  } else {
    for (const auto& e : *list) {
      bool ok = e.is_string();
      if (ok) {
        const std::string s = e.get<std::string>();
        int dots = 0;
        for (char c : s) {
          dots += c == '.' ? 1 : 0;
          ok = ok && (c == '.' || (c >= '0' && c <= '9'));
        }
        ok = ok && dots == 2 && s.front() != '.' && s.back() != '.' && s.find("..") == std::string::npos;
      }
      if (!ok) {
        out.push_back("version.supportedVersions: " + e.dump() + " is not a version string x.y.z");
      }
    }
  }
  return out;
}

std::string describeProblems(const std::vector<std::string>& problems) {
  std::string out;
  for (const auto& p : problems) {
    out += "  - " + p + "\n";
  }
  return out;
}

}  // namespace ibcni::conformance
