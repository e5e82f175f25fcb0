// SPDX-License-Identifier: Apache-2.0
#include "ipam_config.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "address_math.h"
#include "ibcni/os/file_io.h"
#include "ibcni/os/safe_path.h"
#include "ibcni/os/unique_fd.h"

namespace ibcni::ipam {

using nlohmann::json;

namespace {

constexpr cni::Errc kBad = cni::Errc::kInvalidConfig;

std::string shortDump(const json& j) {
  // Strings from the environment (CNI_ARGS) may hold any byte: replace invalid UTF-8, never throw.
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 80) {
    s = s.substr(0, 77) + "...";
  }
  return s;
}

std::unexpected<cni::Error> invalid(const std::string& field, const json& value, const std::string& accepted) {
  return cni::fail(kBad, "invalid " + field + " = " + shortDump(value) + ": " + accepted);
}

std::unexpected<cni::Error> invalidText(const std::string& field, const std::string& value,
                                        const std::string& accepted) {
  return invalid(field, json(value), accepted);
}

std::string familyName(int family) { return family == AF_INET ? "IPv4" : "IPv6"; }

std::string addr(U128 v, int family) { return fromInt(v, family).toString(); }

// An optional string member: nullopt when absent or null, an error when not a string.
cni::Result<std::optional<std::string>> optString(const json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return std::optional<std::string>();
  }
  if (!it->is_string()) {
    return invalid(path, *it, "must be a string");
  }
  return std::optional<std::string>(it->get<std::string>());
}

cni::Result<std::optional<net::IpAddress>> optAddress(const json& obj, const char* key, const std::string& path,
                                                      const std::string& example) {
  auto s = optString(obj, key, path);
  if (!s) {
    return std::unexpected(s.error());
  }
  if (!*s) {
    return std::optional<net::IpAddress>();
  }
  auto ip = net::IpAddress::parse(**s);
  if (!ip) {
    return invalidText(path, **s, "must be an IP address such as \"" + example + "\"");
  }
  return std::optional<net::IpAddress>(*ip);
}

// Parses one range object (or the legacy keys of the ipam object, `prefix` = "ipam") and
// canonicalizes it as host-local's Range.Canonicalize does, with stricter checks.
cni::Result<Range> parseRange(const json& obj, const std::string& path, std::vector<std::string>& warnings,
                              bool legacy) {
  Range r;
  r.path = path;
  std::string sub = path + ".subnet";
  auto subnetText = optString(obj, "subnet", sub);
  if (!subnetText) {
    return std::unexpected(subnetText.error());
  }
  if (!*subnetText) {
    return cni::fail(kBad, sub + " is missing: give the subnet to allocate from as a CIDR, e.g. \"10.1.2.0/24\"");
  }
  auto subnet = net::IpPrefix::parse(**subnetText);
  if (!subnet) {
    return invalidText(sub, **subnetText, "must be a CIDR such as \"10.1.2.0/24\" or \"fd00:1::/64\"");
  }
  int family = subnet->address.family;
  int bits = bitsOf(subnet->address);
  if (subnet->prefixLen > bits - 2) {
    return invalidText(sub, **subnetText,
                       "too small to allocate from: " + familyName(family) + " subnets must be /" +
                           std::to_string(bits - 2) + " or larger (/31, /32, /127 and /128 have no host addresses)");
  }
  if (subnet->network() != *subnet) {
    auto net = subnet->network();
    return invalidText(sub, **subnetText,
                       "has host bits set: the network address of this /" + std::to_string(subnet->prefixLen) + " is " +
                           net.address.toString() + " (give \"" + net.toString() + "\")");
  }
  r.subnet = *subnet;
  U128 first = firstOf(*subnet);
  U128 last = lastOf(*subnet);
  bool v4 = family == AF_INET;
  U128 lastUsable = v4 ? last - 1 : last;  // IPv4 broadcast is never an address to hand out
  std::string inside = "give an address of " + subnet->toString() + " from " + addr(first + 1, family) + " to " +
                       addr(lastUsable, family) +
                       (v4 ? " (not its network or broadcast address)" : " (not its network address)");

  auto checkInside = [&](const net::IpAddress& ip, const std::string& field) -> cni::Result<void> {
    if (ip.family != family) {
      return invalidText(field, ip.toString(),
                         "is " + familyName(ip.family) + " but subnet " + subnet->toString() + " is " +
                             familyName(family) + "; " + inside);
    }
    U128 v = toInt(ip);
    if (v < first || v > last) {
      return invalidText(field, ip.toString(), "is not inside subnet " + subnet->toString() + "; " + inside);
    }
    if (v == first) {
      return invalidText(field, ip.toString(), "is the network address of " + subnet->toString() + "; " + inside);
    }
    if (v4 && v == last) {
      return invalidText(field, ip.toString(), "is the broadcast address of " + subnet->toString() + "; " + inside);
    }
    return {};
  };

  std::string gwPath = path + ".gateway";
  auto gw = optAddress(obj, "gateway", gwPath, addr(first + 1, family));
  if (!gw) {
    return std::unexpected(gw.error());
  }
  if (*gw) {
    if (auto c = checkInside(**gw, gwPath); !c) {
      return std::unexpected(c.error());
    }
    r.gateway = **gw;
  } else {
    r.gateway = fromInt(first + 1, family);
  }
  U128 gwv = toInt(r.gateway);

  std::string startPath = path + ".rangeStart";
  auto start = optAddress(obj, "rangeStart", startPath, addr(first + 2, family));
  if (!start) {
    return std::unexpected(start.error());
  }
  if (*start) {
    if (auto c = checkInside(**start, startPath); !c) {
      return std::unexpected(c.error());
    }
    r.rangeStart = **start;
  } else {
    r.rangeStart = fromInt(gwv == first + 1 ? first + 2 : first + 1, family);
  }

  std::string endPath = path + ".rangeEnd";
  auto end = optAddress(obj, "rangeEnd", endPath, addr(lastUsable, family));
  if (!end) {
    return std::unexpected(end.error());
  }
  if (*end) {
    if (auto c = checkInside(**end, endPath); !c) {
      return std::unexpected(c.error());
    }
    r.rangeEnd = **end;
  } else {
    r.rangeEnd = fromInt(lastUsable, family);
  }
  if (toInt(r.rangeStart) > toInt(r.rangeEnd)) {
    if (*end) {
      return invalidText(endPath, r.rangeEnd.toString(),
                         "comes before rangeStart " + r.rangeStart.toString() +
                             "; rangeEnd must not be lower than "
                             "rangeStart");
    }
    return invalidText(startPath, r.rangeStart.toString(),
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
  return toInt(a.rangeStart) <= toInt(b.rangeEnd) && toInt(b.rangeStart) <= toInt(a.rangeEnd);
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
      return invalidText(p + ".subnet", r->subnet.toString(),
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

// "10.1.2.3" or "10.1.2.3/24": the address (the prefix length of a requested address is ignored,
// as the range it falls in decides it).
std::optional<net::IpAddress> parseAddressMaybePrefix(const std::string& s) {
  auto p = net::IpPrefix::parse(s, /*allowBare=*/true);
  if (!p) {
    return std::nullopt;
  }
  return p->address;
}

cni::Result<std::vector<net::IpAddress>> ipList(const json& obj, const char* key, const std::string& path) {
  std::vector<net::IpAddress> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return out;
  }
  if (!it->is_array()) {
    return invalid(path, *it, "must be a list of IP addresses such as [\"10.1.2.3\", \"fd00::3/64\"]");
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    const auto& e = (*it)[i];
    std::string p = path + "[" + std::to_string(i) + "]";
    if (!e.is_string()) {
      return invalid(p, e, "must be an IP address string such as \"10.1.2.3\" or \"10.1.2.3/24\"");
    }
    auto ip = parseAddressMaybePrefix(e.get<std::string>());
    if (!ip) {
      return invalid(p, e, "must be an IP address such as \"10.1.2.3\" or \"10.1.2.3/24\"");
    }
    out.push_back(*ip);
  }
  return out;
}

cni::Result<std::optional<std::uint32_t>> optU32(const json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return std::optional<std::uint32_t>();
  }
  if (!it->is_number_integer() || it->get<std::int64_t>() < 0 ||
      it->get<std::int64_t>() > std::numeric_limits<std::uint32_t>::max()) {
    return invalid(path, *it, "must be an integer from 0 to 4294967295");
  }
  return std::optional<std::uint32_t>(static_cast<std::uint32_t>(it->get<std::int64_t>()));
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
    auto dst = optString(e, "dst", p + ".dst");
    if (!dst) {
      return std::unexpected(dst.error());
    }
    if (!*dst) {
      return cni::fail(kBad, p + ".dst is missing: give the destination as a CIDR, e.g. \"0.0.0.0/0\"");
    }
    auto prefix = net::IpPrefix::parse(**dst);
    if (!prefix) {
      return invalidText(p + ".dst", **dst, "must be a CIDR such as \"0.0.0.0/0\" or \"10.2.0.0/16\"");
    }
    if (prefix->network() != *prefix) {
      return invalidText(p + ".dst", **dst, "has host bits set (give \"" + prefix->network().toString() + "\")");
    }
    r.dst = *prefix;
    auto gw = optAddress(e, "gw", p + ".gw", "10.1.2.1");
    if (!gw) {
      return std::unexpected(gw.error());
    }
    if (*gw) {
      if ((*gw)->family != prefix->address.family) {
        return invalidText(p + ".gw", (*gw)->toString(),
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
      auto v = optU32(e, key, p + "." + key);
      if (!v) {
        return std::unexpected(v.error());
      }
      *field = *v;
    }
    out.push_back(r);
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
  for (std::size_t i = 0; i < it->size(); ++i) {
    if (!(*it)[i].is_string()) {
      return invalid(path + "[" + std::to_string(i) + "]", (*it)[i], "must be a string");
    }
    out.push_back((*it)[i].get<std::string>());
  }
  return out;
}

cni::Result<cni::Dns> parseDns(const json& j, cni::Dns base) {
  if (!j.is_object()) {
    return invalid("ipam.dns", j,
                   "must be an object {\"nameservers\": [...], \"domain\": ..., \"search\": [...], "
                   "\"options\": [...]}");
  }
  auto ns = stringList(j, "nameservers", "ipam.dns.nameservers");
  if (!ns) {
    return std::unexpected(ns.error());
  }
  for (std::size_t i = 0; i < ns->size(); ++i) {
    if (!net::IpAddress::parse((*ns)[i])) {
      return invalidText("ipam.dns.nameservers[" + std::to_string(i) + "]", (*ns)[i],
                         "must be an IP address such as \"10.96.0.10\"");
    }
  }
  auto domain = optString(j, "domain", "ipam.dns.domain");
  if (!domain) {
    return std::unexpected(domain.error());
  }
  auto search = stringList(j, "search", "ipam.dns.search");
  if (!search) {
    return std::unexpected(search.error());
  }
  auto options = stringList(j, "options", "ipam.dns.options");
  if (!options) {
    return std::unexpected(options.error());
  }
  // Each field given here replaces the one read from resolvConf.
  if (!ns->empty()) {
    base.nameservers = *ns;
  }
  if (*domain) {
    base.domain = **domain;
  }
  if (!search->empty()) {
    base.search = *search;
  }
  if (!options->empty()) {
    base.options = *options;
  }
  return base;
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
        if (r.subnet.address.family == e.prefix.address.family && firstOf(e.prefix) <= toInt(r.rangeEnd) &&
            toInt(r.rangeStart) <= lastOf(e.prefix)) {
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
        return invalidText(res.path, ip.toString(),
                           "is not inside any range (" + all +
                               "); a reserved address must lie between a range's rangeStart "
                               "and rangeEnd");
      }
      for (const auto& s : c.rangeSets) {
        for (const auto& r : s.ranges) {
          if (r.gateway == ip) {
            return invalidText(res.path, ip.toString(),
                               "is the gateway of " + r.path +
                                   "; gateways are never handed out, reserve another "
                                   "address");
          }
          if (r.subnet.address.family == ip.family && toInt(ip) == firstOf(r.subnet)) {
            return invalidText(res.path, ip.toString(), "is the network address of " + r.subnet.toString());
          }
          if (ip.isV4() && r.subnet.address.family == ip.family && toInt(ip) == lastOf(r.subnet)) {
            return invalidText(res.path, ip.toString(), "is the broadcast address of " + r.subnet.toString());
          }
        }
      }
      for (const auto& e : c.exclude) {
        if (e.prefix.contains(ip)) {
          return invalidText(res.path, ip.toString(),
                             "is excluded by " + e.path + " = " + e.prefix.toString() +
                                 "; remove it from ipam.exclude or reserve another address");
        }
      }
      if (!setsUsed.insert(setIdx).second) {
        return invalidText(res.path, ip.toString(),
                           "is the second address of this pod in " + c.rangeSets[setIdx].path +
                               "; a pod gets one address per range set");
      }
      auto [it, fresh] = reservedBy.emplace(ip, res.pod);
      if (!fresh) {
        return invalidText(
            res.path, ip.toString(),
            "is already reserved for pod " + it->second + "; an address can be reserved for one pod only");
      }
    }
  }

  // A range set with nothing to hand out is a configuration mistake, not a full pool.
  for (const auto& s : c.rangeSets) {
    U128 allowed = 0;
    for (const auto& r : s.ranges) {
      std::vector<Interval> holes;
      for (const auto& s2 : c.rangeSets) {
        for (const auto& r2 : s2.ranges) {
          if (r2.subnet.address.family == s.family) {
            holes.push_back({toInt(r2.gateway), toInt(r2.gateway)});
          }
        }
      }
      for (const auto& e : c.exclude) {
        if (e.prefix.address.family == s.family) {
          holes.push_back({firstOf(e.prefix), lastOf(e.prefix)});
        }
      }
      allowed += totalSize(subtract({toInt(r.rangeStart), toInt(r.rangeEnd)}, normalized(holes)));
    }
    if (allowed == 0) {
      return cni::fail(kBad, "invalid " + s.path + " = " + s.describe() +
                                 ": has no address that can be handed out once gateways and ipam.exclude are taken "
                                 "away; widen the range or shrink ipam.exclude");
    }
  }
  return {};
}

// Reads a configuration side file (resolv.conf): at most 1 MiB, opened with O_CLOEXEC.
// A regular file only: a FIFO would block every verb, and a device node may act when opened.
os::SysResult<std::string> readSmallFile(const std::string& path) {
  return os::readRegularFile(path, std::size_t{1} << 20);
}

cni::Result<IpamConfig> parseIpamObject(const json& j) {
  if (!j.is_object()) {
    return invalid("ipam", j, "must be an object {\"type\": \"ibcni-ipam\", \"ranges\": [...], ...}");
  }
  IpamConfig c;
  auto type = optString(j, "type", "ipam.type");
  if (!type) {
    return std::unexpected(type.error());
  }
  c.type = type->value_or("");

  // host-local's legacy single range: converted to the first range set.
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

  if (auto it = j.find("resolvConf"); it != j.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>().empty()) {
      return invalid("ipam.resolvConf", *it, "must be the path of a resolv.conf file, e.g. \"/etc/resolv.conf\"");
    }
    c.resolvConf = it->get<std::string>();
    if (auto problem = os::pathSpellingProblem(c.resolvConf); !problem.empty()) {
      return invalid("ipam.resolvConf", *it, problem + ", e.g. \"/etc/resolv.conf\"");
    }
    auto text = readSmallFile(c.resolvConf);
    if (!text) {
      return invalid("ipam.resolvConf", *it,
                     "cannot be read (" + text.error().describe() + "); give the path of a readable resolv.conf file");
    }
    c.dns = parseResolvConf(*text);
  }
  if (auto it = j.find("dns"); it != j.end() && !it->is_null()) {
    auto dns = parseDns(*it, c.dns);
    if (!dns) {
      return std::unexpected(dns.error());
    }
    c.dns = *dns;
  }
  if (auto it = j.find("routes"); it != j.end() && !it->is_null()) {
    auto routes = parseRoutes(*it);
    if (!routes) {
      return std::unexpected(routes.error());
    }
    c.routes = *routes;
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
  if (auto it = j.find("exclude"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) {
      return invalid("ipam.exclude", *it,
                     "must be a list of addresses and CIDRs, e.g. [\"10.1.2.5\", \"10.1.2.64/26\"]");
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
  }
  if (auto it = j.find("reservations"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) {
      return invalid("ipam.reservations", *it,
                     "must be an object {\"namespace/name\": \"10.1.2.7\"} (or a list of addresses for dual stack)");
    }
    for (const auto& [pod, value] : it->items()) {
      std::string p = reservationPath(pod);
      if (!validPodKey(pod)) {
        return invalidText("ipam.reservations", pod,
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
  }
  if (auto v = validateAgainstRanges(c); !v) {
    return std::unexpected(v.error());
  }

  static const std::set<std::string> known = {"type",     "ranges",  "subnet",       "rangeStart",
                                              "rangeEnd", "gateway", "routes",       "dns",
                                              "dataDir",  "exclude", "reservations", "resolvConf"};
  for (const auto& [key, value] : j.items()) {
    if (!known.contains(key)) {
      c.warnings.push_back("ignoring unknown key ipam." + key);
    }
  }
  return c;
}

cni::Result<json> parseJsonObject(std::string_view text, const char* what) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return cni::fail(cni::Errc::kDecodingFailure, std::string(what) + " is not a JSON object",
                     std::string(text.substr(0, 200)));
  }
  return j;
}

bool validNetworkName(const std::string& name) {
  if (name.empty() || name.size() > 200 || !std::isalnum(static_cast<unsigned char>(name[0]))) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '-';
  });
}

cni::Result<std::vector<AttachmentKey>> parseAttachments(const json& j, const std::string& path) {
  if (!j.is_array()) {
    return invalid(path, j, "must be a list of {\"containerID\": ..., \"ifname\": ...}");
  }
  std::vector<AttachmentKey> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    std::string p = path + "[" + std::to_string(i) + "]";
    const auto& e = j[i];
    if (!e.is_object()) {
      return invalid(p, e, "must be an object {\"containerID\": ..., \"ifname\": ...}");
    }
    auto cid = optString(e, "containerID", p + ".containerID");
    if (!cid) {
      return std::unexpected(cid.error());
    }
    auto ifn = optString(e, "ifname", p + ".ifname");
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

}  // namespace

bool Range::contains(const net::IpAddress& ip) const {
  if (ip.family != rangeStart.family) {
    return false;
  }
  U128 v = toInt(ip);
  return toInt(rangeStart) <= v && v <= toInt(rangeEnd);
}

std::string Range::describe() const {
  return subnet.toString() + " (" + rangeStart.toString() + "-" + rangeEnd.toString() + ")";
}

const Range* RangeSet::find(const net::IpAddress& ip) const {
  for (const auto& r : ranges) {
    if (r.contains(ip)) {
      return &r;
    }
  }
  return nullptr;
}

std::string RangeSet::describe() const {
  std::string out;
  for (const auto& r : ranges) {
    out += (out.empty() ? "" : ", ") + r.describe();
  }
  return out;
}

const Reservation* IpamConfig::reservationOf(const std::string& pod) const {
  auto it = std::lower_bound(reservations.begin(), reservations.end(), pod,
                             [](const Reservation& r, const std::string& p) { return r.pod < p; });
  if (it == reservations.end() || it->pod != pod) {
    return nullptr;
  }
  return &*it;
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
  auto j = parseJsonObject(ipamJson, "the ipam configuration");
  if (!j) {
    return std::unexpected(j.error());
  }
  return parseIpamObject(*j);
}

cni::Result<NetworkConfig> parseNetworkConfig(std::string_view rawConfig) {
  auto parsed = parseJsonObject(rawConfig, "the network configuration");
  if (!parsed) {
    return std::unexpected(parsed.error());
  }
  const json& j = *parsed;
  NetworkConfig c;
  auto name = optString(j, "name", "name");
  if (!name) {
    return std::unexpected(name.error());
  }
  if (!*name) {
    return cni::fail(kBad, "name is missing: the network needs a name (its addresses are kept under <dataDir>/<name>)");
  }
  if (!validNetworkName(**name)) {
    return invalidText("name", **name,
                       "must start with a letter or digit, followed by letters, digits, '_', '.' or '-' (at most 200)");
  }
  c.name = **name;
  auto ipamIt = j.find("ipam");
  if (ipamIt == j.end() || ipamIt->is_null()) {
    return cni::fail(kBad, "ipam is missing: give {\"type\": \"ibcni-ipam\", \"ranges\": [...]}");
  }
  auto ipam = parseIpamObject(*ipamIt);
  if (!ipam) {
    return std::unexpected(ipam.error());
  }
  c.ipam = std::move(*ipam);

  if (auto it = j.find("runtimeConfig"); it != j.end() && it->is_object()) {
    auto ips = ipList(*it, "ips", "runtimeConfig.ips");
    if (!ips) {
      return std::unexpected(ips.error());
    }
    c.runtimeIps = *ips;
  }
  if (auto it = j.find("args"); it != j.end() && it->is_object()) {
    if (auto cniArgs = it->find("cni"); cniArgs != it->end() && cniArgs->is_object()) {
      auto ips = ipList(*cniArgs, "ips", "args.cni.ips");
      if (!ips) {
        return std::unexpected(ips.error());
      }
      c.argsIps = *ips;
    }
  }
  // libcni >= 1.2.3 sends both keys; the spec-v1.1.0 text names the second.
  for (const char* key : {"cni.dev/valid-attachments", "cni.dev/attachments"}) {
    if (auto it = j.find(key); it != j.end() && !it->is_null()) {
      auto list = parseAttachments(*it, key);
      if (!list) {
        return std::unexpected(list.error());
      }
      c.validAttachments = std::move(*list);
      break;
    }
  }
  if (auto it = j.find("prevResult"); it != j.end() && it->is_object()) {
    if (auto ips = it->find("ips"); ips != it->end() && ips->is_array()) {
      for (const auto& e : *ips) {
        if (e.is_object() && e.contains("address") && e["address"].is_string()) {
          if (auto p = net::IpPrefix::parse(e["address"].get<std::string>())) {
            c.prevResultIps.push_back(*p);
          }
        }
      }
    }
  }
  return c;
}

}  // namespace ibcni::ipam
