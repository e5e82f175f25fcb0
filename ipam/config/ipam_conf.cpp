// SPDX-License-Identifier: Apache-2.0
// The embedded IPAM's `ipam` object (ipam.type "ibcni-ipam"): host-local's keys (ranges, legacy
// subnet keys, routes, dns, resolvConf, dataDir) plus exclude and reservations, canonicalized as
// host-local's Range.Canonicalize does, with stricter checks.
#include <sys/socket.h>
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "lib/json/json_fields.h"
#include "ipam/config/ipam_config.h"
#include "ibcni/config/ipam_conf.h"
#include "ibcni/net/address_math.h"
#include "ibcni/os/safe_path.h"

namespace ibcni::config {

namespace {

std::string familyName(int family) { return family == AF_INET ? "IPv4" : "IPv6"; }

std::string addr(net::U128 v, int family) { return net::fromInt(v, family).toString(); }

// Parses one range object (or the legacy keys of the ipam object, `prefix` = "ipam") and
// canonicalizes it as host-local's Range.Canonicalize does, with stricter checks.
cni::Result<Range> parseRange(const json& obj, const std::string& path, std::vector<std::string>& warnings,
                              bool legacy) {
  Range r;
  r.path = path;
  std::string sub = path + ".subnet";
  auto subnetText = stringField(obj, "subnet", sub);
  if (!subnetText) {
    return std::unexpected(subnetText.error());
  }
  if (!*subnetText) {
    return cni::fail(kBad, sub + " is missing: give the subnet to allocate from as a CIDR, e.g. \"10.1.2.0/24\"");
  }
  auto subnet = net::IpPrefix::parse(**subnetText);
  if (!subnet) {
    return invalid(sub, **subnetText, "must be a CIDR such as \"10.1.2.0/24\" or \"fd00:1::/64\"");
  }
  int family = subnet->address.family;
  int bits = net::bitsOf(subnet->address);
  if (subnet->prefixLen > bits - 2) {
    return invalid(sub, **subnetText,
                       "too small to allocate from: " + familyName(family) + " subnets must be /" +
                           std::to_string(bits - 2) + " or larger (/31, /32, /127 and /128 have no host addresses)");
  }
  if (subnet->network() != *subnet) {
    auto net = subnet->network();
    return invalid(sub, **subnetText,
                       "has host bits set: the network address of this /" + std::to_string(subnet->prefixLen) + " is " +
                           net.address.toString() + " (give \"" + net.toString() + "\")");
  }
  r.subnet = *subnet;
  net::U128 first = net::firstOf(*subnet);
  net::U128 last = net::lastOf(*subnet);
  bool v4 = family == AF_INET;
  net::U128 lastUsable = v4 ? last - 1 : last;  // IPv4 broadcast is never an address to hand out
  std::string inside = "give an address of " + subnet->toString() + " from " + addr(first + 1, family) + " to " +
                       addr(lastUsable, family) +
                       (v4 ? " (not its network or broadcast address)" : " (not its network address)");

  auto checkInside = [&](const net::IpAddress& ip, const std::string& field) -> cni::Result<void> {
    if (ip.family != family) {
      return invalid(field, ip.toString(),
                         "is " + familyName(ip.family) + " but subnet " + subnet->toString() + " is " +
                             familyName(family) + "; " + inside);
    }
    net::U128 v = net::toInt(ip);
    if (v < first || v > last) {
      return invalid(field, ip.toString(), "is not inside subnet " + subnet->toString() + "; " + inside);
    }
    if (v == first) {
      return invalid(field, ip.toString(), "is the network address of " + subnet->toString() + "; " + inside);
    }
    if (v4 && v == last) {
      return invalid(field, ip.toString(), "is the broadcast address of " + subnet->toString() + "; " + inside);
    }
    return {};
  };

  // gateway, rangeStart, rangeEnd: inside the subnet when given, else the default.
  auto bound = [&](const char* key, net::U128 example, net::U128 fallback, bool& given) -> cni::Result<net::IpAddress> {
    const std::string field = path + "." + key;
    std::optional<net::IpAddress> ip;
    IBCNI_TRY_ASSIGN(ip, addressField(obj, key, field, addr(example, family)));
    given = ip.has_value();
    if (!ip) {
      return net::fromInt(fallback, family);
    }
    if (auto c = checkInside(*ip, field); !c) {
      return std::unexpected(c.error());
    }
    return *ip;
  };
  bool gatewayGiven = false;
  bool startGiven = false;
  bool endGiven = false;
  IBCNI_TRY_ASSIGN(r.gateway, bound("gateway", first + 1, first + 1, gatewayGiven));
  const net::U128 gwv = net::toInt(r.gateway);
  IBCNI_TRY_ASSIGN(r.rangeStart, bound("rangeStart", first + 2, gwv == first + 1 ? first + 2 : first + 1, startGiven));
  IBCNI_TRY_ASSIGN(r.rangeEnd, bound("rangeEnd", lastUsable, lastUsable, endGiven));
  const std::string startPath = path + ".rangeStart";
  const std::string endPath = path + ".rangeEnd";
  if (net::toInt(r.rangeStart) > net::toInt(r.rangeEnd)) {
    if (endGiven) {
      return invalid(endPath, r.rangeEnd.toString(),
                         "comes before rangeStart " + r.rangeStart.toString() +
                             "; rangeEnd must not be lower than "
                             "rangeStart");
    }
    return invalid(startPath, r.rangeStart.toString(),
                       "comes after the last usable address " + r.rangeEnd.toString() + " of " + subnet->toString());
  }

  static const std::set<std::string> rangeKeys = {"subnet", "rangeStart", "rangeEnd", "gateway"};
  if (!legacy) {
    for (const auto& [key, value] : obj.items()) {
      if (!rangeKeys.contains(key)) {
        warnings.push_back("ignoring unknown key " + path + "." + key);
      }
    }
  }
  return r;
}

bool overlaps(const Range& a, const Range& b) {
  if (a.subnet.address.family != b.subnet.address.family) {
    return false;
  }
  return net::toInt(a.rangeStart) <= net::toInt(b.rangeEnd) && net::toInt(b.rangeStart) <= net::toInt(a.rangeEnd);
}

std::unexpected<cni::Error> overlapError(const Range& a, const Range& b) {
  return cni::fail(kBad, "invalid " + b.path + " = " + b.describe() + ": overlaps " + a.path + " = " + a.describe() +
                             "; ranges must not share addresses (give disjoint rangeStart/rangeEnd)");
}

cni::Result<RangeSet> parseRangeSet(const json& j, const std::string& path, std::vector<std::string>& warnings) {
  if (!j.is_array() || j.empty()) {
    return invalid(path, j,
                   "must be a non-empty list of ranges, e.g. [{\"subnet\": \"10.1.2.0/24\"}]; dual stack is one "
                   "range set per family");
  }
  RangeSet set;
  set.path = path;
  for (std::size_t i = 0; i < j.size(); ++i) {
    std::string p = path + "[" + std::to_string(i) + "]";
    if (!j[i].is_object()) {
      return invalid(p, j[i],
                     "must be an object {\"subnet\": ..., \"rangeStart\": ..., \"rangeEnd\": ..., "
                     "\"gateway\": ...}");
    }
    auto r = parseRange(j[i], p, warnings, false);
    if (!r) {
      return std::unexpected(r.error());
    }
    if (i == 0) {
      set.family = r->subnet.address.family;
    } else if (r->subnet.address.family != set.family) {
      return invalid(p + ".subnet", r->subnet.toString(),
                         "range set " + path +
                             " mixes IPv4 and IPv6; put each family in its own range set "
                             "(dual stack is one range set per family)");
    }
    for (const auto& other : set.ranges) {
      if (overlaps(other, *r)) {
        return overlapError(other, *r);
      }
    }
    set.ranges.push_back(std::move(*r));
  }
  return set;
}

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

// Exclusions, gateways, reservations: checks that need every range.
cni::Result<void> validateAgainstRanges(IpamConfig& c) {
  for (const auto& e : c.exclude) {
    bool touches = false;
    for (const auto& s : c.rangeSets) {
      for (const auto& r : s.ranges) {
        if (r.subnet.address.family == e.prefix.address.family && net::firstOf(e.prefix) <= net::toInt(r.rangeEnd) &&
            net::toInt(r.rangeStart) <= net::lastOf(e.prefix)) {
          touches = true;
        }
      }
    }
    if (!touches) {
      c.warnings.push_back(e.path + " = " + e.prefix.toString() + " is outside every range: it excludes nothing");
    }
  }

  std::map<net::IpAddress, std::string> reservedBy;
  for (const auto& res : c.reservations) {
    std::set<std::size_t> setsUsed;
    for (const auto& ip : res.addresses) {
      std::size_t setIdx = c.rangeSets.size();
      for (std::size_t s = 0; s < c.rangeSets.size(); ++s) {
        if (c.rangeSets[s].find(ip) != nullptr) {
          setIdx = s;
        }
      }
      if (setIdx == c.rangeSets.size()) {
        std::string all;
        for (const auto& s : c.rangeSets) {
          all += (all.empty() ? "" : ", ") + s.describe();
        }
        return invalid(res.path, ip.toString(),
                           "is not inside any range (" + all +
                               "); a reserved address must lie between a range's rangeStart "
                               "and rangeEnd");
      }
      for (const auto& s : c.rangeSets) {
        for (const auto& r : s.ranges) {
          if (r.gateway == ip) {
            return invalid(res.path, ip.toString(),
                               "is the gateway of " + r.path +
                                   "; gateways are never handed out, reserve another "
                                   "address");
          }
          if (r.subnet.address.family == ip.family && net::toInt(ip) == net::firstOf(r.subnet)) {
            return invalid(res.path, ip.toString(), "is the network address of " + r.subnet.toString());
          }
          if (ip.isV4() && r.subnet.address.family == ip.family && net::toInt(ip) == net::lastOf(r.subnet)) {
            return invalid(res.path, ip.toString(), "is the broadcast address of " + r.subnet.toString());
          }
        }
      }
      for (const auto& e : c.exclude) {
        if (e.prefix.contains(ip)) {
          return invalid(res.path, ip.toString(),
                             "is excluded by " + e.path + " = " + e.prefix.toString() +
                                 "; remove it from ipam.exclude or reserve another address");
        }
      }
      if (!setsUsed.insert(setIdx).second) {
        return invalid(res.path, ip.toString(),
                           "is the second address of this pod in " + c.rangeSets[setIdx].path +
                               "; a pod gets one address per range set");
      }
      auto [it, fresh] = reservedBy.emplace(ip, res.pod);
      if (!fresh) {
        return invalid(
            res.path, ip.toString(),
            "is already reserved for pod " + it->second + "; an address can be reserved for one pod only");
      }
    }
  }

  // A range set with nothing to hand out is a configuration mistake, not a full pool.
  for (const auto& s : c.rangeSets) {
    net::U128 allowed = 0;
    for (const auto& r : s.ranges) {
      std::vector<net::Interval> holes;
      for (const auto& s2 : c.rangeSets) {
        for (const auto& r2 : s2.ranges) {
          if (r2.subnet.address.family == s.family) {
            holes.push_back({net::toInt(r2.gateway), net::toInt(r2.gateway)});
          }
        }
      }
      for (const auto& e : c.exclude) {
        if (e.prefix.address.family == s.family) {
          holes.push_back({net::firstOf(e.prefix), net::lastOf(e.prefix)});
        }
      }
      allowed += net::totalSize(net::subtract({net::toInt(r.rangeStart), net::toInt(r.rangeEnd)}, net::normalized(holes)));
    }
    if (allowed == 0) {
      return cni::fail(kBad, "invalid " + s.path + " = " + s.describe() +
                                 ": has no address that can be handed out once gateways and ipam.exclude are taken "
                                 "away; widen the range or shrink ipam.exclude");
    }
  }
  return {};
}

// The range sets: host-local's legacy single range (ipam.subnet, converted to the first set) and
// ipam.ranges; at least one, none overlapping another.
cni::Result<void> parseRangeSets(const json& j, IpamConfig& c) {
  auto legacySubnet = j.find("subnet");
  if (legacySubnet != j.end() && !legacySubnet->is_null()) {
    auto r = parseRange(j, "ipam", c.warnings, true);
    if (!r) {
      return std::unexpected(r.error());
    }
    RangeSet set;
    set.path = "ipam.subnet";
    set.family = r->subnet.address.family;
    set.ranges.push_back(std::move(*r));
    c.rangeSets.push_back(std::move(set));
  } else {
    for (const char* key : {"rangeStart", "rangeEnd", "gateway"}) {
      if (auto it = j.find(key); it != j.end() && !it->is_null()) {
        return invalid(
            std::string("ipam.") + key, *it,
            "needs ipam.subnet; with ipam.ranges, put it inside a range: ipam.ranges[i][j]." + std::string(key));
      }
    }
  }
  if (auto it = j.find("ranges"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) {
      return invalid("ipam.ranges", *it, "must be a list of range sets, e.g. [[{\"subnet\": \"10.1.2.0/24\"}]]");
    }
    for (std::size_t i = 0; i < it->size(); ++i) {
      auto set = parseRangeSet((*it)[i], "ipam.ranges[" + std::to_string(i) + "]", c.warnings);
      if (!set) {
        return std::unexpected(set.error());
      }
      c.rangeSets.push_back(std::move(*set));
    }
  }
  if (c.rangeSets.empty()) {
    return cni::fail(kBad,
                     "ipam has no addresses to allocate from: give ipam.ranges (a list of range sets, e.g. "
                     "[[{\"subnet\": \"10.1.2.0/24\"}]]) or ipam.subnet");
  }
  for (std::size_t a = 0; a < c.rangeSets.size(); ++a) {
    for (std::size_t b = a + 1; b < c.rangeSets.size(); ++b) {
      for (const auto& ra : c.rangeSets[a].ranges) {
        for (const auto& rb : c.rangeSets[b].ranges) {
          if (overlaps(ra, rb)) {
            return overlapError(ra, rb);
          }
        }
      }
    }
  }
  return {};
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
  if (auto it = j.find("dataDir"); it != j.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>().empty() || it->get<std::string>().front() != '/') {
      return invalid("ipam.dataDir", *it, "must be an absolute directory path, e.g. \"/run/ibcni-ipam\"");
    }
    if (auto problem = os::pathSpellingProblem(it->get<std::string>()); !problem.empty()) {
      return invalid("ipam.dataDir", *it, problem + " (e.g. \"/run/ibcni-ipam\"; README \"Security model\")");
    }
    c.dataDir = it->get<std::string>();
    while (c.dataDir.size() > 1 && c.dataDir.back() == '/') {
      c.dataDir.pop_back();
    }
  }
  return {};
}

// ipam.exclude: addresses and CIDRs never handed out.
cni::Result<void> parseExclude(const json& j, IpamConfig& c) {
  auto it = j.find("exclude");
  if (it == j.end() || it->is_null()) {
    return {};
  }
  if (!it->is_array()) {
    return invalid("ipam.exclude", *it, "must be a list of addresses and CIDRs, e.g. [\"10.1.2.5\", \"10.1.2.64/26\"]");
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    std::string p = "ipam.exclude[" + std::to_string(i) + "]";
    const auto& e = (*it)[i];
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
  auto it = j.find("reservations");
  if (it == j.end() || it->is_null()) {
    return {};
  }
  if (!it->is_object()) {
    return invalid("ipam.reservations", *it,
                   "must be an object {\"namespace/name\": \"10.1.2.7\"} (or a list of addresses for dual stack)");
  }
  for (const auto& [pod, value] : it->items()) {
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
  if (auto it = j.find("cluster"); it != j.end() && !it->is_null()) {
    IBCNI_TRY_ASSIGN(c.cluster, clusterObject(*it, c));
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
