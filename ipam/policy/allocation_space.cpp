// SPDX-License-Identifier: Apache-2.0
#include "ipam/policy/allocation_space.h"

#include <algorithm>
#include <charconv>

#include "ibcni/os/text.h"

namespace ibcni::ipam {

std::optional<net::Ident> IdentSpace::parse(std::string_view text) const {
  if (kind == SpaceKind::kIp) {
    return net::IpAddress::parse(text);
  }
  auto guid = net::Guid::parse(text);
  if (!guid) {
    return std::nullopt;
  }
  return net::IpAddress::fromGuid(*guid);
}

std::string IdentSpace::claimName(const net::Ident& value) const {
  auto guid = value.guid();
  if (kind == SpaceKind::kIp || !guid) {
    return value.toString();
  }
  return os::hex64(guid->value);
}

std::optional<net::Ident> IdentSpace::fromClaimName(std::string_view name) const {
  if (kind == SpaceKind::kIp) {
    return net::IpAddress::parse(name);
  }
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), v, 16);
  if (name.size() != 16 || ec != std::errc() || end != name.data() + name.size()) {
    return std::nullopt;
  }
  return net::IpAddress::fromGuid(net::Guid{v});
}

std::string IdentSpace::blockKey(const net::Ident& first, int log2size) const {
  if (kind == SpaceKind::kGuid) {
    return claimName(first) + "-" + std::to_string(log2size);
  }
  const net::IpPrefix cidr{first, net::bitsOf(first.family) - log2size};
  return cidr.network().address.toString() + "-" + std::to_string(cidr.prefixLen);
}

std::optional<KeySpan> IdentSpace::spanOfKey(std::string_view key) const {
  const auto dash = key.rfind('-');
  if (dash == std::string_view::npos) {
    return std::nullopt;
  }
  auto first = fromClaimName(key.substr(0, dash));
  const auto lenText = key.substr(dash + 1);
  if (!first || lenText.empty() || lenText.size() > 3 ||
      !std::all_of(lenText.begin(), lenText.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  const int len = std::stoi(std::string(lenText));
  const int bits = net::bitsOf(first->family);
  if (len > bits) {
    return std::nullopt;
  }
  if (kind == SpaceKind::kIp) {
    const net::IpPrefix cidr{*first, len};
    return KeySpan{first->family, {net::firstOf(cidr), net::lastOf(cidr)}};
  }
  const net::U128 lo = net::toInt(*first);
  const net::U128 size = net::U128{1} << len;
  if (lo % size != 0) {
    return std::nullopt;
  }
  return KeySpan{first->family, {lo, lo + size - 1}};
}

std::string IdentSpace::describeBlock(const net::Ident& first, int log2size) const {
  if (kind == SpaceKind::kIp) {
    return net::IpPrefix{first, net::bitsOf(first.family) - log2size}.toString();
  }
  const net::U128 lo = net::toInt(first);
  return first.toString() + "-" + net::fromInt(lo + (net::U128{1} << log2size) - 1, first.family).toString();
}

std::string IdentSpace::backendPool(const std::string& pool) const {
  return kind == SpaceKind::kGuid ? "guid_" + pool : pool;
}

const IdentSpace& ipSpace() noexcept {
  static const IdentSpace space{SpaceKind::kIp, "address", "an address", "addresses"};
  return space;
}

const IdentSpace& guidSpace() noexcept {
  static const IdentSpace space{SpaceKind::kGuid, "GUID", "a GUID", "GUIDs"};
  return space;
}

const IdentSpace& spaceOf(SpaceKind kind) noexcept { return kind == SpaceKind::kGuid ? guidSpace() : ipSpace(); }

const IdentSpace& spaceOf(const config::IpamConfig& config) noexcept {
  const bool guids = !config.rangeSets.empty() && config.rangeSets.front().family == net::kFamilyGuid;
  return guids ? guidSpace() : ipSpace();
}

}  // namespace ibcni::ipam
