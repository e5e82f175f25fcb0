// SPDX-License-Identifier: Apache-2.0
#include "ipam/cluster/cluster_definition.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "ibcni/net/address_math.h"

namespace ibcni::ipam {

namespace {

using nlohmann::json;

constexpr const char* kFields[] = {"ranges", "blockSize", "reservations", "exclude"};

struct Span {
  int family = 0;
  net::Interval span;
};

/// Every range's [rangeStart, rangeEnd] of a definition text; nullopt when it is not one.
std::optional<std::vector<Span>> spansOf(const std::string& fields) {
  const json j = json::parse(fields, nullptr, false);
  if (!j.is_object() || !j.contains("ranges") || !j["ranges"].is_array()) {
    return std::nullopt;
  }
  std::vector<Span> out;
  for (const auto& set : j["ranges"]) {
    for (const auto& r : set.is_array() ? set : json::array()) {
      auto start = r.is_object() ? net::IpAddress::parse(r.value("rangeStart", "")) : std::nullopt;
      auto end = r.is_object() ? net::IpAddress::parse(r.value("rangeEnd", "")) : std::nullopt;
      if (!start || !end || start->family != end->family) {
        return std::nullopt;
      }
      out.push_back(Span{start->family, {net::toInt(*start), net::toInt(*end)}});
    }
  }
  return out;
}

}  // namespace

std::string definitionFields(const config::IpamConfig& config) {
  json ranges = json::array();
  for (const auto& set : config.rangeSets) {
    json rs = json::array();
    for (const auto& r : set.ranges) {
      rs.push_back(json{{"subnet", r.subnet.toString()},
                        {"rangeStart", r.rangeStart.toString()},
                        {"rangeEnd", r.rangeEnd.toString()},
                        {"gateway", r.gateway.toString()}});
    }
    ranges.push_back(std::move(rs));
  }
  json reservations = json::object();
  for (const auto& res : config.reservations) {
    json addrs = json::array();
    for (const auto& a : res.addresses) {
      addrs.push_back(a.toString());
    }
    reservations[res.pod] = std::move(addrs);
  }
  std::vector<std::string> exclude;
  for (const auto& e : config.exclude) {
    exclude.push_back(e.prefix.toString());
  }
  std::sort(exclude.begin(), exclude.end());
  exclude.erase(std::unique(exclude.begin(), exclude.end()), exclude.end());
  const std::uint32_t blockSize = config.cluster ? config.cluster->blockSize : 0;
  return json{{"ranges", ranges}, {"blockSize", blockSize}, {"reservations", reservations}, {"exclude", exclude}}
      .dump();
}

std::optional<FieldDifference> compareDefinitions(const std::string& mine, const std::string& theirs) {
  const json a = json::parse(mine, nullptr, false);
  const json b = json::parse(theirs, nullptr, false);
  if (!a.is_object() || !b.is_object()) {
    return FieldDifference{"ranges", mine, theirs};
  }
  for (const char* f : kFields) {
    const json x = a.contains(f) ? a[f] : json();
    const json y = b.contains(f) ? b[f] : json();
    if (x != y) {
      return FieldDifference{f, x.dump(), y.dump()};
    }
  }
  return std::nullopt;
}

std::optional<std::string> overlapOf(const std::string& a, const std::string& b) {
  auto x = spansOf(a);
  auto y = spansOf(b);
  if (!x || !y) {
    return std::nullopt;
  }
  for (const auto& s : *x) {
    for (const auto& t : *y) {
      if (s.family == t.family && s.span.lo <= t.span.hi && t.span.lo <= s.span.hi) {
        return net::fromInt(std::max(s.span.lo, t.span.lo), s.family).toString();
      }
    }
  }
  return std::nullopt;
}

}  // namespace ibcni::ipam
