// SPDX-License-Identifier: Apache-2.0
#include "ipam/policy/allocation_space.h"

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

const IdentSpace& ipSpace() noexcept {
  static const IdentSpace space{SpaceKind::kIp, "address", "an address"};
  return space;
}

const IdentSpace& guidSpace() noexcept {
  static const IdentSpace space{SpaceKind::kGuid, "GUID", "a GUID"};
  return space;
}

const IdentSpace& spaceOf(SpaceKind kind) noexcept { return kind == SpaceKind::kGuid ? guidSpace() : ipSpace(); }

const IdentSpace& spaceOf(const config::IpamConfig& config) noexcept {
  const bool guids = !config.rangeSets.empty() && config.rangeSets.front().family == net::kFamilyGuid;
  return guids ? guidSpace() : ipSpace();
}

}  // namespace ibcni::ipam
