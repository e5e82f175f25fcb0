// SPDX-License-Identifier: Apache-2.0
// The embedded IPAM's `ipam` object (ipam.type "ibcni-ipam"): host-local's keys (ranges and the
// legacy subnet keys, parsed by ipam_range_sets.cpp; routes, dns, resolvConf, dataDir) plus exclude
// and reservations.
#include <sys/socket.h>
#include <algorithm>
#include <set>
#include <sstream>

#include "lib/json/json_fields.h"
#include "ipam/config/ipam_config.h"
#include "ibcni/config/ipam_conf.h"
#include "ibcni/net/address_math.h"
#include "ibcni/os/safe_path.h"

namespace ibcni::config {

std::string familyName(int family) { return family == AF_INET ? "IPv4" : "IPv6"; }

const json* memberGiven(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

cni::Result<std::string> dataDirValue(const json& value, const std::string& path) {
  if (!value.is_string() || value.get<std::string>().empty() || value.get<std::string>().front() != '/') {
    return invalid(path, value, "must be an absolute directory path, e.g. \"/run/ibcni-ipam\"");
  }
  if (auto problem = os::pathSpellingProblem(value.get<std::string>()); !problem.empty()) {
    return invalid(path, value, problem + " (e.g. \"/run/ibcni-ipam\"; docs/security.md)");
  }
  std::string dir = value.get<std::string>();
  while (dir.size() > 1 && dir.back() == '/') {
    dir.pop_back();
  }
  return dir;
}

namespace {

cni::Result<std::vector<cni::Route>> parseRoutes(const json& j) {
  std::vector<cni::Route> out;
  if (!j.is_array()) {
    return invalid("ipam.routes", j, "must be a list of {\"dst\": \"<CIDR>\", \"gw\": \"<address>\"}");
  }
  for (std::size_t i = 0; i < j.size(); ++i) {
    std::string p = "ipam.routes[" + std::to_string(i) + "]";
    const auto& e = j[i];
    if (!e.is_object()) {
      return invalid(p, e, "must be an object {\"dst\": \"<CIDR>\", \"gw\": \"<address>\"}");
    }
    cni::Route r;
    auto dst = stringField(e, "dst", p + ".dst");
    if (!dst) {
      return std::unexpected(dst.error());
    }
    if (!*dst) {
      return cni::fail(kBad, p + ".dst is missing: give the destination as a CIDR, e.g. \"0.0.0.0/0\"");
    }
    auto prefix = net::IpPrefix::parse(**dst);
    if (!prefix) {
      return invalid(p + ".dst", **dst, "must be a CIDR such as \"0.0.0.0/0\" or \"10.2.0.0/16\"");
    }
    if (prefix->network() != *prefix) {
      return invalid(p + ".dst", **dst, "has host bits set (give \"" + prefix->network().toString() + "\")");
    }
    r.dst = *prefix;
    auto gw = addressField(e, "gw", p + ".gw", "10.1.2.1");
    if (!gw) {
      return std::unexpected(gw.error());
    }
    if (*gw) {
      if ((*gw)->family != prefix->address.family) {
        return invalid(p + ".gw", (*gw)->toString(),
                           "is " + familyName((*gw)->family) + " but dst " + prefix->toString() + " is " +
                               familyName(prefix->address.family) + "; give a gateway of the same family");
      }
      r.gw = **gw;
    }
    struct Field {
      const char* key;
      std::optional<std::uint32_t>* out;
    };
    for (auto [key, field] : {Field{"mtu", &r.mtu}, Field{"advmss", &r.advmss}, Field{"priority", &r.priority},
                              Field{"table", &r.table}, Field{"scope", &r.scope}}) {
      auto v = u32Field(e, key, p + "." + key);
      if (!v) {
        return std::unexpected(v.error());
      }
      *field = *v;
    }
    out.push_back(r);
  }
  return out;
}

std::string reservationPath(const std::string& pod) { return "ipam.reservations[" + json(pod).dump() + "]"; }

bool validPodKey(const std::string& key) {
  auto slash = key.find('/');
  return slash != std::string::npos && slash != 0 && slash + 1 < key.size() &&
         key.find('/', slash + 1) == std::string::npos;
}

// What the result carries besides addresses, and where the store lives: resolvConf (a path, read by
// ADD), dns, routes, dataDir.
cni::Result<void> parseResultAndStore(const json& j, IpamConfig& c) {
  if (auto it = j.find("resolvConf"); it != j.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>().empty()) {
      return invalid("ipam.resolvConf", *it, "must be the path of a resolv.conf file, e.g. \"/etc/resolv.conf\"");
    }
    c.resolvConf = it->get<std::string>();
    if (auto problem = os::pathSpellingProblem(c.resolvConf); !problem.empty()) {
      return invalid("ipam.resolvConf", *it, problem + ", e.g. \"/etc/resolv.conf\"");
    }
  }
  if (auto it = j.find("dns"); it != j.end() && !it->is_null()) {
    IBCNI_TRY_ASSIGN(c.dns, dnsObject(*it, "ipam.dns"));
    c.dnsDomainSet = it->contains("domain") && !it->at("domain").is_null();
  }
  if (auto it = j.find("routes"); it != j.end() && !it->is_null()) {
    IBCNI_TRY_ASSIGN(c.routes, parseRoutes(*it));
  }
  if (const json* dataDir = memberGiven(j, "dataDir")) {
    IBCNI_TRY_ASSIGN(c.dataDir, dataDirValue(*dataDir, "ipam.dataDir"));
  }
  return {};
}

// ipam.exclude: addresses and CIDRs never handed out.
cni::Result<void> parseExclude(const json& j, IpamConfig& c) {
  const json* exclude = memberGiven(j, "exclude");
  if (exclude == nullptr) {
    return {};
  }
  if (!exclude->is_array()) {
    return invalid("ipam.exclude", *exclude,
                   "must be a list of addresses and CIDRs, e.g. [\"10.1.2.5\", \"10.1.2.64/26\"]");
  }
  for (std::size_t i = 0; i < exclude->size(); ++i) {
    std::string p = "ipam.exclude[" + std::to_string(i) + "]";
    const auto& e = (*exclude)[i];
    if (!e.is_string()) {
      return invalid(p, e, "must be an address or CIDR string, e.g. \"10.1.2.5\" or \"10.1.2.64/26\"");
    }
    auto prefix = net::IpPrefix::parse(e.get<std::string>(), /*allowBare=*/true);
    if (!prefix) {
      return invalid(p, e, "must be an address or CIDR, e.g. \"10.1.2.5\" or \"10.1.2.64/26\"");
    }
    if (prefix->network() != *prefix) {
      return invalid(p, e, "has host bits set (give \"" + prefix->network().toString() + "\" or a bare address)");
    }
    c.exclude.push_back({*prefix, p});
  }
  return {};
}

// ipam.reservations: {"namespace/name": address or one address per range set}, sorted by pod.
cni::Result<void> parseReservations(const json& j, IpamConfig& c) {
  const json* reservations = memberGiven(j, "reservations");
  if (reservations == nullptr) {
    return {};
  }
  if (!reservations->is_object()) {
    return invalid("ipam.reservations", *reservations,
                   "must be an object {\"namespace/name\": \"10.1.2.7\"} (or a list of addresses for dual stack)");
  }
  for (const auto& [pod, value] : reservations->items()) {
    std::string p = reservationPath(pod);
    if (!validPodKey(pod)) {
      return invalid("ipam.reservations", pod,
                     "keys must be \"namespace/name\" of a pod (as K8S_POD_NAMESPACE/K8S_POD_NAME)");
    }
    Reservation res{pod, {}, p};
    std::vector<json> items;
    if (value.is_string()) {
      items.push_back(value);
    } else if (value.is_array() && !value.empty()) {
      items.assign(value.begin(), value.end());
    } else {
      return invalid(p, value, "must be an address (\"10.1.2.7\") or a list of addresses, one per range set");
    }
    for (const auto& item : items) {
      std::optional<net::IpAddress> ip;
      if (item.is_string()) {
        ip = net::IpAddress::parse(item.get<std::string>());
      }
      if (!ip) {
        return invalid(p, item, "must be a bare IP address such as \"10.1.2.7\" (no prefix length)");
      }
      res.addresses.push_back(*ip);
    }
    c.reservations.push_back(std::move(res));
  }
  std::sort(c.reservations.begin(), c.reservations.end(),
            [](const Reservation& a, const Reservation& b) { return a.pod < b.pod; });
  return {};
}

}  // namespace

// The `ipam` object, section by section; what it does not know is a warning, not an error.
cni::Result<IpamConfig> ipamObject(const json& j) {
  if (!j.is_object()) {
    return invalid("ipam", j, "must be an object {\"type\": \"ibcni-ipam\", \"ranges\": [...], ...}");
  }
  IpamConfig c;
  std::optional<std::string> type;
  IBCNI_TRY_ASSIGN(type, stringField(j, "type", "ipam.type"));
  c.type = type.value_or("");
  for (auto section : {parseRangeSets, parseResultAndStore, parseExclude, parseReservations}) {
    if (auto r = section(j, c); !r) {
      return std::unexpected(r.error());
    }
  }
  if (auto v = validateAgainstRanges(c); !v) {
    return std::unexpected(v.error());
  }
  if (const json* cluster = memberGiven(j, "cluster")) {
    IBCNI_TRY_ASSIGN(c.cluster, clusterObject(*cluster, c));
  }
  static const std::set<std::string> known = {"type",     "ranges",  "subnet",       "rangeStart",
                                              "rangeEnd", "gateway", "routes",       "dns",
                                              "dataDir",  "exclude", "reservations", "resolvConf",
                                              "cluster"};
  for (const auto& [key, value] : j.items()) {
    if (!known.contains(key)) {
      c.warnings.push_back("ignoring unknown key ipam." + key);
    }
  }
  return c;
}

cni::Dns parseResolvConf(std::string_view text) {
  cni::Dns dns;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    if (!(fields >> key) || key[0] == '#' || key[0] == ';') {
      continue;
    }
    std::vector<std::string> rest;
    for (std::string f; fields >> f;) {
      rest.push_back(f);
    }
    if (rest.empty()) {
      continue;
    }
    if (key == "nameserver") {
      dns.nameservers.push_back(rest[0]);
    } else if (key == "domain") {
      dns.domain = rest[0];
    } else if (key == "search") {
      dns.search.insert(dns.search.end(), rest.begin(), rest.end());
    } else if (key == "options") {
      dns.options.insert(dns.options.end(), rest.begin(), rest.end());
    }
  }
  return dns;
}

cni::Result<IpamConfig> parseIpamConfig(std::string_view ipamJson) {
  json j = json::parse(ipamJson, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return cni::fail(cni::Errc::kDecodingFailure, "the ipam configuration is not a JSON object",
                     std::string(ipamJson.substr(0, 200)));
  }
  return ipamObject(j);
}

}  // namespace ibcni::config
