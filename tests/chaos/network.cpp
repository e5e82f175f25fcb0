// SPDX-License-Identifier: Apache-2.0
#include "network.h"

#include <arpa/inet.h>

#include <cstdlib>

#include "ibcni/net/ip.h"

namespace ibcni::chaos {

namespace {

constexpr const char* kGuidRange = "02:00:00:00:00:c7:00:00-02:00:00:00:00:c7:00:1f";

}  // namespace

NetworkDef baseNetwork(const std::string& name) {
  NetworkDef d;
  d.name = name;
  if (name == "g1" || name == "g2") {
    d.pool = "gshared";
    d.guid = true;
    d.guidRange = kGuidRange;
    d.blockSize = 4;
    return d;
  }
  if (name == "n3") {
    d.pool = "n3";
    d.poolKey = false;
    d.rangeSets = {{"10.78.0.0/27"}};
    d.blockSize = 4;
    return d;
  }
  d.pool = "shared";
  d.rangeSets = {{"10.77.0.0/26"}};
  d.blockSize = 8;
  d.exclude = {"10.77.0.60/30"};
  d.reservations = {{"chaos/sts-0", "10.77.0.20"}, {"chaos/sts-1", "10.77.0.45"}};
  return d;
}

std::vector<std::string> networkNames(int count, bool guids) {
  std::vector<std::string> names{"n1", "n2"};
  if (count >= 3) {
    names.emplace_back("n3");
  }
  if (guids) {
    names.insert(names.end(), {"g1", "g2"});
  }
  return names;
}

const std::map<std::string, std::string>& configChanges() {
  static const std::map<std::string, std::string> changes{
      {"widen-n1", "n1"}, {"resv-n2", "n2"}, {"n3-overlap", "n3"}};
  return changes;
}

NetworkDef applyChange(const NetworkDef& def, const std::string& change) {
  NetworkDef d = def;
  if (change == "widen-n1") {
    d.rangeSets = {{"10.77.0.0/26", "10.77.1.0/26"}};
  } else if (change == "resv-n2") {
    d.reservations = {{"chaos/sts-0", "10.77.0.21"}};
  } else if (change == "n3-overlap") {
    d.pool = "other";
    d.poolKey = true;
    d.rangeSets = {{"10.77.0.0/26"}};
    d.blockSize = 8;
  }
  return d;
}

std::vector<std::string> requestableAddresses(const std::string& net) {
  if (net == "n3") {
    return {"10.78.0.9", "10.78.0.18", "10.78.0.27"};
  }
  if (net == "g1" || net == "g2") {
    return {"02:00:00:00:00:c7:00:05", "02:00:00:00:00:c7:00:0e", "02:00:00:00:00:c7:00:1b"};
  }
  return {"10.77.0.9", "10.77.0.33", "10.77.0.50"};
}

std::optional<std::uint32_t> parseIpv4(const std::string& text) {
  in_addr a{};
  if (::inet_pton(AF_INET, text.c_str(), &a) != 1) {
    return std::nullopt;
  }
  return ntohl(a.s_addr);
}

std::string ipv4Text(std::uint32_t address) {
  in_addr a{};
  a.s_addr = htonl(address);
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

std::uint32_t Cidr::last() const {
  return prefix == 0 ? 0xffffffffU : network | (0xffffffffU >> prefix);
}

std::optional<Cidr> parseCidr(const std::string& text) {
  const auto slash = text.find('/');
  const auto addr = parseIpv4(text.substr(0, slash));
  if (!addr) {
    return std::nullopt;
  }
  Cidr c;
  c.prefix = slash == std::string::npos ? 32 : std::atoi(text.c_str() + slash + 1);
  if (c.prefix < 0 || c.prefix > 32) {
    return std::nullopt;
  }
  const std::uint32_t mask = c.prefix == 0 ? 0 : 0xffffffffU << (32 - c.prefix);
  c.network = *addr & mask;
  return c;
}

std::string forbiddenReason(const NetworkDef& def, std::uint32_t address) {
  bool inside = false;
  for (const auto& set : def.rangeSets) {
    for (const auto& subnet : set) {
      const auto c = parseCidr(subnet);
      if (!c || !c->contains(address)) {
        continue;
      }
      inside = true;
      if (address == c->first()) {
        return "the network address of " + subnet;
      }
      if (address == c->last()) {
        return "the broadcast address of " + subnet;
      }
      if (address == c->first() + 1) {
        return "the gateway of " + subnet;
      }
    }
  }
  if (!inside) {
    return "outside every range of network " + def.name;
  }
  for (const auto& e : def.exclude) {
    const auto c = parseCidr(e);
    if (c && c->contains(address)) {
      return "excluded by " + e;
    }
  }
  return {};
}

std::set<std::uint32_t> allocatable(const NetworkDef& def) {
  std::set<std::uint32_t> reserved;
  for (const auto& [pod, a] : def.reservations) {
    if (const auto v = parseIpv4(a)) {
      reserved.insert(*v);
    }
  }
  std::set<std::uint32_t> out;
  for (const auto& set : def.rangeSets) {
    for (const auto& subnet : set) {
      const auto c = parseCidr(subnet);
      if (!c) {
        continue;
      }
      for (std::uint64_t a = c->first(); a <= c->last(); ++a) {
        const auto v = static_cast<std::uint32_t>(a);
        if (!reserved.contains(v) && forbiddenReason(def, v).empty()) {
          out.insert(v);
        }
      }
    }
  }
  return out;
}

std::pair<std::uint64_t, std::uint64_t> guidRangeOf(const NetworkDef& def) {
  const auto dash = def.guidRange.find('-');
  const auto first = net::Guid::parse(def.guidRange.substr(0, dash));
  const auto last = dash == std::string::npos ? std::nullopt : net::Guid::parse(def.guidRange.substr(dash + 1));
  return {first ? first->value : 1, last ? last->value : 0};
}

std::string guidForbiddenReason(const NetworkDef& def, const std::string& guid) {
  const auto g = net::Guid::parse(guid);
  if (!g) {
    return "not a GUID";
  }
  if (g->value == 0 || g->value == ~std::uint64_t{0}) {
    return "no valid port GUID";
  }
  const auto [first, last] = guidRangeOf(def);
  if (g->value < first || g->value > last) {
    return "outside guidPool.range " + def.guidRange + " of network " + def.name;
  }
  return {};
}

bool rangesOverlap(const NetworkDef& a, const NetworkDef& b) {
  for (const auto& sa : a.rangeSets) {
    for (const auto& na : sa) {
      for (const auto& sb : b.rangeSets) {
        for (const auto& nb : sb) {
          const auto x = parseCidr(na);
          const auto y = parseCidr(nb);
          if (x && y && x->first() <= y->last() && y->first() <= x->last()) {
            return true;
          }
        }
      }
    }
  }
  return false;
}

}  // namespace ibcni::chaos
