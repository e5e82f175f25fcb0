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
    json list = json::array();
    for (const auto& i : r.interfaces) {
      json e = {{"name", i.name}};
      if (!i.mac.empty()) {
        e["mac"] = i.mac;
      }
      if (cni::hasV11Fields(v)) {
        if (i.mtu) {
          e["mtu"] = *i.mtu;
        }
        if (!i.pciId.empty()) {
          e["pciID"] = i.pciId;
        }
        if (!i.socketPath.empty()) {
          e["socketPath"] = i.socketPath;
        }
      }
      if (!i.sandbox.empty()) {
        e["sandbox"] = i.sandbox;
      }
      list.push_back(std::move(e));
    }
    out["interfaces"] = std::move(list);
  }
  if (!r.ips.empty()) {
    json list = json::array();
    for (const auto& ip : r.ips) {
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
    out["ips"] = std::move(list);
  }
  if (!r.routes.empty()) {
    json list = json::array();
    for (const auto& rt : r.routes) {
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
    out["routes"] = std::move(list);
  }
  if (!r.dns.empty()) {
    json d = json::object();
    if (!r.dns.nameservers.empty()) {
      d["nameservers"] = r.dns.nameservers;
    }
    if (!r.dns.domain.empty()) {
      d["domain"] = r.dns.domain;
    }
    if (!r.dns.search.empty()) {
      d["search"] = r.dns.search;
    }
    if (!r.dns.options.empty()) {
      d["options"] = r.dns.options;
    }
    out["dns"] = std::move(d);
  }
  return out;
}

cni::Result<cni::AddResult> resultFromJson(const json& j, cni::Errc code, std::string_view where) {
  if (!j.is_object()) {
    return cni::fail(code, std::string(where) + " = " + shortDump(j) + " is not a JSON object");
  }
  cni::AddResult r;
  if (auto it = j.find("interfaces"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) {
      return bad(code, where, "interfaces", "is not a list");
    }
    for (std::size_t n = 0; n < it->size(); ++n) {
      const auto& e = (*it)[n];
      std::string path = "interfaces[" + std::to_string(n) + "]";
      if (!e.is_object()) {
        return bad(code, where, path, "is not an object");
      }
      cni::Interface iface;
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
      iface.name = *name;
      iface.mac = *mac;
      iface.sandbox = *sandbox;
      iface.pciId = *pci;
      iface.socketPath = *sock;
      iface.mtu = *mtu;
      r.interfaces.push_back(std::move(iface));
    }
  }
  if (auto it = j.find("ips"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) {
      return bad(code, where, "ips", "is not a list");
    }
    for (std::size_t n = 0; n < it->size(); ++n) {
      const auto& e = (*it)[n];
      std::string path = "ips[" + std::to_string(n) + "]";
      if (!e.is_object()) {
        return bad(code, where, path, "is not an object");
      }
      cni::IpConfig ip;
      auto addr = optString(e, "address", code, where, path);
      if (!addr) {
        return std::unexpected(addr.error());
      }
      auto prefix = net::IpPrefix::parse(*addr);
      if (!prefix) {
        return bad(code, where, path + ".address",
                   "= \"" + *addr + "\" is not an address in CIDR form (10.1.2.3/24)");
      }
      ip.address = *prefix;
      auto gw = optIp(e, "gateway", code, where, path);
      if (!gw) {
        return std::unexpected(gw.error());
      }
      ip.gateway = *gw;
      if (auto idx = e.find("interface"); idx != e.end() && !idx->is_null()) {
        if (!idx->is_number_integer() || idx->get<std::int64_t>() < 0) {
          return bad(code, where, path + ".interface", "= " + shortDump(*idx) + " is not an index");
        }
        ip.interface = idx->get<int>();
      }
      r.ips.push_back(std::move(ip));
    }
  }
  if (auto it = j.find("routes"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) {
      return bad(code, where, "routes", "is not a list");
    }
    for (std::size_t n = 0; n < it->size(); ++n) {
      const auto& e = (*it)[n];
      std::string path = "routes[" + std::to_string(n) + "]";
      if (!e.is_object()) {
        return bad(code, where, path, "is not an object");
      }
      cni::Route rt;
      auto dst = optString(e, "dst", code, where, path);
      if (!dst) {
        return std::unexpected(dst.error());
      }
      auto prefix = net::IpPrefix::parse(*dst);
      if (!prefix) {
        return bad(code, where, path + ".dst", "= \"" + *dst + "\" is not a CIDR (0.0.0.0/0)");
      }
      rt.dst = *prefix;
      auto gw = optIp(e, "gw", code, where, path);
      if (!gw) {
        return std::unexpected(gw.error());
      }
      rt.gw = *gw;
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
      r.routes.push_back(std::move(rt));
    }
  }
  if (auto it = j.find("dns"); it != j.end() && !it->is_null()) {
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
    r.dns.nameservers = *ns;
    r.dns.search = *search;
    r.dns.options = *options;
    r.dns.domain = *domain;
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
