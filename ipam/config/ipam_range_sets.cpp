// SPDX-License-Identifier: Apache-2.0
// The embedded IPAM's range sets: ipam.ranges and host-local's legacy single range (ipam.subnet),
// each range canonicalized as host-local's Range.Canonicalize does, with stricter checks; and the
// checks of exclusions, gateways and reservations that need every range.
#include <sys/socket.h>
#include <map>
#include <set>

#include "ipam/config/ipam_config.h"
#include "ibcni/config/ipam_conf.h"
#include "ibcni/net/address_math.h"

namespace ibcni::config {

namespace {

std::string addr(net::U128 v, int family) { return net::fromInt(v, family).toString(); }

// ipam.subnet or a range's subnet: a CIDR with host addresses and no host bits set.
cni::Result<net::IpPrefix> parseSubnet(const json& obj, const std::string& path) {
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
  return *subnet;
}

// The addresses of a subnet a range may name (gateway, rangeStart, rangeEnd): not its network
// address, nor (IPv4) its broadcast address.
struct HostAddresses {
  explicit HostAddresses(const net::IpPrefix& s)
      : subnet(s),
        family(s.address.family),
        first(net::firstOf(s)),
        last(net::lastOf(s)),
        v4(family == AF_INET),
        lastUsable(v4 ? last - 1 : last),  // IPv4 broadcast is never an address to hand out
        inside("give an address of " + s.toString() + " from " + addr(first + 1, family) + " to " +
               addr(lastUsable, family) +
               (v4 ? " (not its network or broadcast address)" : " (not its network address)")) {}

  cni::Result<void> check(const net::IpAddress& ip, const std::string& field) const {
    if (ip.family != family) {
      return invalid(field, ip.toString(),
                         "is " + familyName(ip.family) + " but subnet " + subnet.toString() + " is " +
                             familyName(family) + "; " + inside);
    }
    net::U128 v = net::toInt(ip);
    if (v < first || v > last) {
      return invalid(field, ip.toString(), "is not inside subnet " + subnet.toString() + "; " + inside);
    }
    if (v == first) {
      return invalid(field, ip.toString(), "is the network address of " + subnet.toString() + "; " + inside);
    }
    if (v4 && v == last) {
      return invalid(field, ip.toString(), "is the broadcast address of " + subnet.toString() + "; " + inside);
    }
    return {};
  }

  net::IpPrefix subnet;
  int family;
  net::U128 first;
  net::U128 last;
  bool v4;
  net::U128 lastUsable;
  std::string inside;  // what to give instead, for the messages
};

// gateway, rangeStart, rangeEnd: inside the subnet when given (`given`), else `fallback`.
cni::Result<net::IpAddress> rangeBound(const json& obj, const std::string& path, const char* key,
                                       const HostAddresses& hosts, net::U128 example, net::U128 fallback,
                                       bool& given) {
  const std::string field = path + "." + key;
  std::optional<net::IpAddress> ip;
  IBCNI_TRY_ASSIGN(ip, addressField(obj, key, field, addr(example, hosts.family)));
  given = ip.has_value();
  if (!ip) {
    return net::fromInt(fallback, hosts.family);
  }
  if (auto c = hosts.check(*ip, field); !c) {
    return std::unexpected(c.error());
  }
  return *ip;
}

// The gateway (default: the first host address) and the range's bounds (default: every host
// address but the gateway), with rangeStart not after rangeEnd.
cni::Result<void> parseBounds(const json& obj, Range& r) {
  const HostAddresses hosts(r.subnet);
  const net::U128 first = hosts.first;
  bool gatewayGiven = false;
  bool startGiven = false;
  bool endGiven = false;
  IBCNI_TRY_ASSIGN(r.gateway, rangeBound(obj, r.path, "gateway", hosts, first + 1, first + 1, gatewayGiven));
  const net::U128 gwv = net::toInt(r.gateway);
  IBCNI_TRY_ASSIGN(r.rangeStart, rangeBound(obj, r.path, "rangeStart", hosts, first + 2,
                                            gwv == first + 1 ? first + 2 : first + 1, startGiven));
  IBCNI_TRY_ASSIGN(r.rangeEnd, rangeBound(obj, r.path, "rangeEnd", hosts, hosts.lastUsable, hosts.lastUsable, endGiven));
  if (net::toInt(r.rangeStart) > net::toInt(r.rangeEnd)) {
    if (endGiven) {
      return invalid(r.path + ".rangeEnd", r.rangeEnd.toString(),
                         "comes before rangeStart " + r.rangeStart.toString() +
                             "; rangeEnd must not be lower than "
                             "rangeStart");
    }
    return invalid(r.path + ".rangeStart", r.rangeStart.toString(),
                       "comes after the last usable address " + r.rangeEnd.toString() + " of " + r.subnet.toString());
  }
  return {};
}

// Parses one range object (or the legacy keys of the ipam object, `prefix` = "ipam") and
// canonicalizes it as host-local's Range.Canonicalize does, with stricter checks.
cni::Result<Range> parseRange(const json& obj, const std::string& path, std::vector<std::string>& warnings,
                              bool legacy) {
  Range r;
  r.path = path;
  IBCNI_TRY_ASSIGN(r.subnet, parseSubnet(obj, path));
  if (auto b = parseBounds(obj, r); !b) {
    return std::unexpected(b.error());
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

// An exclusion that touches no range excludes nothing: a warning.
void warnExclusionsOutsideRanges(IpamConfig& c) {
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
}

// The range set holding the reserved address `ip` of `res` (its last, when several would).
cni::Result<std::size_t> reservedSetOf(const IpamConfig& c, const Reservation& res, const net::IpAddress& ip) {
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
  return setIdx;
}

// A reserved address must be one that can be handed out: no gateway, network or broadcast
// address, nothing ipam.exclude takes away.
cni::Result<void> checkReservable(const IpamConfig& c, const Reservation& res, const net::IpAddress& ip) {
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
  return {};
}

// Every reserved address inside a range and reservable; one per range set for a pod, one pod per
// address.
cni::Result<void> checkReservations(const IpamConfig& c) {
  std::map<net::IpAddress, std::string> reservedBy;
  for (const auto& res : c.reservations) {
    std::set<std::size_t> setsUsed;
    for (const auto& ip : res.addresses) {
      std::size_t setIdx = 0;
      IBCNI_TRY_ASSIGN(setIdx, reservedSetOf(c, res, ip));
      if (auto r = checkReservable(c, res, ip); !r) {
        return std::unexpected(r.error());
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
  return {};
}

// A range set with nothing to hand out is a configuration mistake, not a full pool.
cni::Result<void> checkEverySetAllocatable(const IpamConfig& c) {
  for (const auto& s : c.rangeSets) {
    // Every gateway of the family and every exclusion of it.
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
    net::U128 allowed = 0;
    for (const auto& r : s.ranges) {
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

}  // namespace

// The range sets: host-local's legacy single range (ipam.subnet, converted to the first set) and
// ipam.ranges; at least one, none overlapping another.
cni::Result<void> parseRangeSets(const json& j, IpamConfig& c) {
  if (memberGiven(j, "subnet") != nullptr) {
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
      if (const json* v = memberGiven(j, key)) {
        return invalid(
            std::string("ipam.") + key, *v,
            "needs ipam.subnet; with ipam.ranges, put it inside a range: ipam.ranges[i][j]." + std::string(key));
      }
    }
  }
  if (const json* ranges = memberGiven(j, "ranges")) {
    if (!ranges->is_array()) {
      return invalid("ipam.ranges", *ranges, "must be a list of range sets, e.g. [[{\"subnet\": \"10.1.2.0/24\"}]]");
    }
    for (std::size_t i = 0; i < ranges->size(); ++i) {
      auto set = parseRangeSet((*ranges)[i], "ipam.ranges[" + std::to_string(i) + "]", c.warnings);
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

// Exclusions, gateways, reservations: checks that need every range.
cni::Result<void> validateAgainstRanges(IpamConfig& c) {
  warnExclusionsOutsideRanges(c);
  if (auto r = checkReservations(c); !r) {
    return r;
  }
  return checkEverySetAllocatable(c);
}

}  // namespace ibcni::config
