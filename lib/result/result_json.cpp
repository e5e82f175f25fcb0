// SPDX-License-Identifier: Apache-2.0
#include "lib/result/result_json.h"

#include <nlohmann/json.hpp>

#include "lib/result/json_codec.h"

namespace ibcni::result {

using nlohmann::json;

namespace {

std::unexpected<cni::Error> bad(cni::Errc code, std::string_view where, const std::string& field,
                                const std::string& why) {
  return cni::fail(code, std::string(where) + "." + field + " " + why);
}

cni::Result<std::optional<std::uint32_t>> optUint(const json& obj, const char* key, cni::Errc code,
                                                  std::string_view where, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return std::optional<std::uint32_t>();
  }
  if (!it->is_number_integer() || it->get<std::int64_t>() < 0 ||
      it->get<std::int64_t>() > 0xffffffffLL) {
    return bad(code, where, path + "." + key, "= " + shortDump(*it) + " is not an unsigned integer");
  }
  return std::optional<std::uint32_t>(it->get<std::uint32_t>());
}

cni::Result<std::string> optString(const json& obj, const char* key, cni::Errc code,
                                   std::string_view where, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return std::string();
  }
  if (!it->is_string()) {
    return bad(code, where, path + "." + key, "= " + shortDump(*it) + " is not a string");
  }
  return it->get<std::string>();
}

cni::Result<std::optional<net::IpAddress>> optIp(const json& obj, const char* key, cni::Errc code,
                                                 std::string_view where, const std::string& path) {
  auto s = optString(obj, key, code, where, path);
  if (!s) {
    return std::unexpected(s.error());
  }
  if (s->empty()) {
    return std::optional<net::IpAddress>();
  }
  auto ip = net::IpAddress::parse(*s);
  if (!ip) {
    return bad(code, where, path + "." + key, "= \"" + *s + "\" is not an IP address");
  }
  return std::optional<net::IpAddress>(*ip);
}

cni::Result<std::vector<std::string>> stringList(const json& obj, const char* key, cni::Errc code,
                                                 std::string_view where, const std::string& path) {
  std::vector<std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return out;
  }
  if (!it->is_array()) {
    return bad(code, where, path + "." + key, "= " + shortDump(*it) + " is not a list of strings");
  }
  for (const auto& e : *it) {
    if (!e.is_string()) {
      return bad(code, where, path + "." + key, "= " + shortDump(*it) + " is not a list of strings");
    }
    out.push_back(e.get<std::string>());
  }
  return out;
}

/// The list at `key` of `j` (absent or null: none), each element an object that `parseOne(element,
/// code, where, path)` turns into one entry of `out`.
template <class T, class ParseOne>
cni::Result<void> objectList(const json& j, const char* key, cni::Errc code, std::string_view where,
                             std::vector<T>& out, ParseOne parseOne) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    return {};
  }
  if (!it->is_array()) {
    return bad(code, where, key, "is not a list");
  }
  for (std::size_t n = 0; n < it->size(); ++n) {
    const auto& e = (*it)[n];
    std::string path = std::string(key) + "[" + std::to_string(n) + "]";
    if (!e.is_object()) {
      return bad(code, where, path, "is not an object");
    }
    auto one = parseOne(e, code, where, path);
    if (!one) {
      return std::unexpected(one.error());
    }
    out.push_back(std::move(*one));
  }
  return {};
}

cni::Result<cni::Interface> interfaceFromJson(const json& e, cni::Errc code, std::string_view where,
                                              const std::string& path) {
  auto name = optString(e, "name", code, where, path);
  auto mac = optString(e, "mac", code, where, path);
  auto sandbox = optString(e, "sandbox", code, where, path);
  auto pci = optString(e, "pciID", code, where, path);
  auto sock = optString(e, "socketPath", code, where, path);
  auto mtu = optUint(e, "mtu", code, where, path);
  for (const auto* res : {&name, &mac, &sandbox, &pci, &sock}) {
    if (!*res) {
      return std::unexpected(res->error());
    }
  }
  if (!mtu) {
    return std::unexpected(mtu.error());
  }
  cni::Interface iface;
  iface.name = *name;
  iface.mac = *mac;
  iface.sandbox = *sandbox;
  iface.pciId = *pci;
  iface.socketPath = *sock;
  iface.mtu = *mtu;
  return iface;
}

/// What an IP and a route both hold, into `prefix` and `gateway`: a CIDR (`prefixKey`; an absent
/// one is empty, and not a CIDR either, `expected` names the form) and an optional gateway address
/// (`gatewayKey`).
cni::Result<void> prefixAndGateway(const json& e, const char* prefixKey, const char* expected, const char* gatewayKey,
                                   cni::Errc code, std::string_view where, const std::string& path,
                                   net::IpPrefix& prefix, std::optional<net::IpAddress>& gateway) {
  auto text = optString(e, prefixKey, code, where, path);
  if (!text) {
    return std::unexpected(text.error());
  }
  auto parsed = net::IpPrefix::parse(*text);
  if (!parsed) {
    return bad(code, where, path + "." + prefixKey, "= \"" + *text + "\" is not " + expected);
  }
  auto gw = optIp(e, gatewayKey, code, where, path);
  if (!gw) {
    return std::unexpected(gw.error());
  }
  prefix = *parsed;
  gateway = *gw;
  return {};
}

cni::Result<cni::IpConfig> ipFromJson(const json& e, cni::Errc code, std::string_view where,
                                      const std::string& path) {
  cni::IpConfig ip;
  if (auto read = prefixAndGateway(e, "address", "an address in CIDR form (10.1.2.3/24)", "gateway", code, where,
                                   path, ip.address, ip.gateway);
      !read) {
    return std::unexpected(read.error());
  }
  if (auto idx = e.find("interface"); idx != e.end() && !idx->is_null()) {
    if (!idx->is_number_integer() || idx->get<std::int64_t>() < 0) {
      return bad(code, where, path + ".interface", "= " + shortDump(*idx) + " is not an index");
    }
    ip.interface = idx->get<int>();
  }
  return ip;
}

cni::Result<cni::Route> routeFromJson(const json& e, cni::Errc code, std::string_view where,
                                      const std::string& path) {
  cni::Route rt;
  if (auto read = prefixAndGateway(e, "dst", "a CIDR (0.0.0.0/0)", "gw", code, where, path, rt.dst, rt.gw); !read) {
    return std::unexpected(read.error());
  }
  std::pair<const char*, std::optional<std::uint32_t>*> extras[] = {
      {"mtu", &rt.mtu}, {"advmss", &rt.advmss}, {"priority", &rt.priority},
      {"table", &rt.table}, {"scope", &rt.scope}};
  for (auto& [key, slot] : extras) {
    auto value = optUint(e, key, code, where, path);
    if (!value) {
      return std::unexpected(value.error());
    }
    *slot = *value;
  }
  return rt;
}

/// The "dns" object (absent or null: `dns` stays empty).
cni::Result<void> dnsFromJson(const json& j, cni::Errc code, std::string_view where, cni::Dns& dns) {
  auto it = j.find("dns");
  if (it == j.end() || it->is_null()) {
    return {};
  }
  if (!it->is_object()) {
    return bad(code, where, "dns", "is not an object");
  }
  auto ns = stringList(*it, "nameservers", code, where, "dns");
  auto search = stringList(*it, "search", code, where, "dns");
  auto options = stringList(*it, "options", code, where, "dns");
  auto domain = optString(*it, "domain", code, where, "dns");
  for (const auto* res : {&ns, &search, &options}) {
    if (!*res) {
      return std::unexpected(res->error());
    }
  }
  if (!domain) {
    return std::unexpected(domain.error());
  }
  dns.nameservers = *ns;
  dns.search = *search;
  dns.options = *options;
  dns.domain = *domain;
  return {};
}

/// Sets `key` of `obj` to `value`, unless the value is empty (then the member is left out).
template <class T>
void putUnlessEmpty(json& obj, const char* key, const T& value) {
  if (!value.empty()) {
    obj[key] = value;
  }
}

json interfacesToJson(const std::vector<cni::Interface>& interfaces, cni::SpecVersion v) {
  json list = json::array();
  for (const auto& i : interfaces) {
    json e = {{"name", i.name}};
    putUnlessEmpty(e, "mac", i.mac);
    if (cni::hasV11Fields(v)) {
      if (i.mtu) {
        e["mtu"] = *i.mtu;
      }
      putUnlessEmpty(e, "pciID", i.pciId);
      putUnlessEmpty(e, "socketPath", i.socketPath);
    }
    putUnlessEmpty(e, "sandbox", i.sandbox);
    list.push_back(std::move(e));
  }
  return list;
}

json ipsToJson(const std::vector<cni::IpConfig>& ips, cni::SpecVersion v) {
  json list = json::array();
  for (const auto& ip : ips) {
    json e = json::object();
    if (cni::hasIpVersionField(v)) {
      e["version"] = ip.address.address.isV4() ? "4" : "6";
    }
    if (ip.interface) {
      e["interface"] = *ip.interface;
    }
    e["address"] = ip.address.toString();
    if (ip.gateway) {
      e["gateway"] = ip.gateway->toString();
    }
    list.push_back(std::move(e));
  }
  return list;
}

json routesToJson(const std::vector<cni::Route>& routes, cni::SpecVersion v) {
  json list = json::array();
  for (const auto& rt : routes) {
    json e = {{"dst", rt.dst.toString()}};
    if (rt.gw) {
      e["gw"] = rt.gw->toString();
    }
    if (cni::hasV11Fields(v)) {
      const std::pair<const char*, const std::optional<std::uint32_t>*> extras[] = {
          {"mtu", &rt.mtu}, {"advmss", &rt.advmss}, {"priority", &rt.priority},
          {"table", &rt.table}, {"scope", &rt.scope}};
      for (const auto& [key, value] : extras) {
        if (*value) {
          e[key] = **value;
        }
      }
    }
    list.push_back(std::move(e));
  }
  return list;
}

json dnsToJson(const cni::Dns& dns) {
  json d = json::object();
  putUnlessEmpty(d, "nameservers", dns.nameservers);
  putUnlessEmpty(d, "domain", dns.domain);
  putUnlessEmpty(d, "search", dns.search);
  putUnlessEmpty(d, "options", dns.options);
  return d;
}

}  // namespace

std::string shortDump(const json& j) {
  // Strings from the request or the environment may hold any byte: invalid UTF-8 is replaced, the
  // dump never throws.
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 80) {
    s = s.substr(0, 77) + "...";
  }
  return s;
}

json resultToJson(const cni::AddResult& r, cni::SpecVersion v) {
  json out = json::object();
  out["cniVersion"] = std::string(cni::toString(v));
  if (!r.interfaces.empty()) {
    out["interfaces"] = interfacesToJson(r.interfaces, v);
  }
  if (!r.ips.empty()) {
    out["ips"] = ipsToJson(r.ips, v);
  }
  if (!r.routes.empty()) {
    out["routes"] = routesToJson(r.routes, v);
  }
  if (!r.dns.empty()) {
    out["dns"] = dnsToJson(r.dns);
  }
  return out;
}

cni::Result<cni::AddResult> resultFromJson(const json& j, cni::Errc code, std::string_view where) {
  if (!j.is_object()) {
    return cni::fail(code, std::string(where) + " = " + shortDump(j) + " is not a JSON object");
  }
  cni::AddResult r;
  if (auto read = objectList(j, "interfaces", code, where, r.interfaces, interfaceFromJson); !read) {
    return std::unexpected(read.error());
  }
  if (auto read = objectList(j, "ips", code, where, r.ips, ipFromJson); !read) {
    return std::unexpected(read.error());
  }
  if (auto read = objectList(j, "routes", code, where, r.routes, routeFromJson); !read) {
    return std::unexpected(read.error());
  }
  if (auto read = dnsFromJson(j, code, where, r.dns); !read) {
    return std::unexpected(read.error());
  }
  return r;
}

std::string printResult(const cni::AddResult& r, cni::SpecVersion v) {
  return resultToJson(r, v).dump();
}

std::string printError(const cni::Error& e, std::string_view cniVersion) {
  json out = json::object();
  // The request's version, echoed when it is one (an unsupported one may be any string).
  if (!cniVersion.empty() && cniVersion.size() <= 16) {
    out["cniVersion"] = std::string(cniVersion);
  }
  // Bounded whatever went into them (an IPAM plugin's output, a kernel message, a long value): the
  // runtime stores the error in the pod's events.
  constexpr std::size_t kMaxField = 4096;
  auto bounded = [](const std::string& text) {
    return text.size() <= kMaxField ? text
                                    : text.substr(0, kMaxField) + "... (" + std::to_string(text.size()) + " bytes)";
  };
  out["code"] = static_cast<std::uint32_t>(e.code);
  out["msg"] = bounded(e.msg);
  if (!e.details.empty()) {
    out["details"] = bounded(e.details);
  }
  // Replace invalid UTF-8 (a path or a kernel message could carry any byte) instead of throwing.
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string printVersion(std::string_view cniVersion) {
  json out = json::object();
  out["cniVersion"] = std::string(cniVersion);
  json list = json::array();
  for (auto v : cni::kSupportedVersions) {
    list.push_back(std::string(cni::toString(v)));
  }
  out["supportedVersions"] = std::move(list);
  return out.dump();
}

cni::Result<cni::AddResult> parseResult(std::string_view text, cni::Errc code, std::string_view what) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return cni::fail(code, std::string(what) + " printed something that is not JSON",
                     std::string(text.substr(0, 200)));
  }
  return resultFromJson(j, code, what);
}

std::optional<cni::Error> parseError(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return std::nullopt;
  }
  auto code = j.find("code");
  if (code == j.end() || !code->is_number_unsigned()) {
    return std::nullopt;
  }
  cni::Error e;
  e.code = static_cast<cni::Errc>(code->get<std::uint32_t>());
  if (auto m = j.find("msg"); m != j.end() && m->is_string()) {
    e.msg = m->get<std::string>();
  }
  if (auto d = j.find("details"); d != j.end() && d->is_string()) {
    e.details = d->get<std::string>();
  }
  return e;
}

}  // namespace ibcni::result
