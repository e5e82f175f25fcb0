// SPDX-License-Identifier: Apache-2.0
#include "ipam/cluster/cluster_definition.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "ipam/policy/allocation_space.h"
#include "ibcni/net/address_math.h"

namespace ibcni::ipam {

namespace {

using nlohmann::json;

constexpr const char* kFields[] = {"ranges", "blockSize", "reservations", "exclude"};
constexpr const char* kGuidFields[] = {"kind", "guidRanges", "blockSize"};
constexpr const char* kGuidKind = "guid";

bool isGuidPool(const json& j) { return j.is_object() && j.value("kind", "") == kGuidKind; }

struct Span {
  int family = 0;
  net::Interval span;
};

/// Every range's [rangeStart, rangeEnd] of a definition text (a GUID pool's: [first, last]); nullopt
/// when it is not one.
std::optional<std::vector<Span>> spansOf(const json& j) {
  const bool guids = isGuidPool(j);
  const char* key = guids ? "guidRanges" : "ranges";
  if (!j.is_object() || !j.contains(key) || !j[key].is_array()) {
    return std::nullopt;
  }
  const auto value = [&](const json& r, const char* field) {
    const std::string text = r.is_object() ? r.value(field, "") : "";
    return guids ? guidSpace().fromClaimName(text) : net::IpAddress::parse(text);
  };
  std::vector<Span> out;
  for (const auto& set : j[key]) {
    for (const auto& r : set.is_array() ? set : json::array()) {
      auto start = value(r, guids ? "first" : "rangeStart");
      auto end = value(r, guids ? "last" : "rangeEnd");
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
  const std::uint32_t blockSize = config.cluster ? config.cluster->blockSize : 0;
  if (spaceOf(config).kind == SpaceKind::kGuid) {
    json sets = json::array();
    for (const auto& set : config.rangeSets) {
      json rs = json::array();
      for (const auto& r : set.ranges) {
        rs.push_back(json{{"first", guidSpace().claimName(r.rangeStart)}, {"last", guidSpace().claimName(r.rangeEnd)}});
      }
      sets.push_back(std::move(rs));
    }
    return json{{"kind", kGuidKind}, {"guidRanges", sets}, {"blockSize", blockSize}}.dump();
  }
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
  return json{{"ranges", ranges}, {"blockSize", blockSize}, {"reservations", reservations}, {"exclude", exclude}}
      .dump();
}

std::optional<FieldDifference> compareDefinitions(const std::string& mine, const std::string& theirs) {
  if (mine == theirs) {
    return std::nullopt;  // both written by definitionFields(): every steady ADD's case, without a parse
  }
  const json a = json::parse(mine, nullptr, false);
  const json b = json::parse(theirs, nullptr, false);
  if (!a.is_object() || !b.is_object()) {
    return FieldDifference{"ranges", mine, theirs};
  }
  const bool guids = isGuidPool(a) || isGuidPool(b);
  for (const char* f : guids ? std::span<const char* const>(kGuidFields) : std::span<const char* const>(kFields)) {
    const json x = a.contains(f) ? a[f] : json();
    const json y = b.contains(f) ? b[f] : json();
    if (x != y) {
      return FieldDifference{f, x.dump(), y.dump()};
    }
  }
  return std::nullopt;
}

std::optional<std::string> overlapOf(const std::string& a, const std::string& b) {
  const json ja = json::parse(a, nullptr, false);
  const json jb = json::parse(b, nullptr, false);
  auto x = spansOf(ja);
  auto y = spansOf(jb);
  if (!x || !y || isGuidPool(ja) != isGuidPool(jb)) {
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
