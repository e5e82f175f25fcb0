// SPDX-License-Identifier: Apache-2.0
// What the embedded IPAM hands out: IP addresses, or InfiniBand GUIDs (values of the net::kFamilyGuid
// family). The store and the allocator run the same code for both; an IdentSpace holds what differs
// between them: how a value is read from text, how its claim file is named, and what messages call it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ibcni/config/ipam_conf.h"
#include "ibcni/net/ip.h"

namespace ibcni::ipam {

enum class SpaceKind { kIp, kGuid };

/// The text conventions of one kind of value. The IP space reproduces the store's and the
/// allocator's IP texts byte for byte.
struct IdentSpace {
  SpaceKind kind = SpaceKind::kIp;
  std::string_view noun;   ///< "address" / "GUID"
  std::string_view aNoun;  ///< "an address" / "a GUID"

  /// A value written by a user or a record: IP: IpAddress::parse (IPv4 or IPv6 text); GUID:
  /// net::Guid::parse ("02:00:00:00:00:00:00:05"), as family kFamilyGuid. nullopt on anything else.
  [[nodiscard]] std::optional<net::Ident> parse(std::string_view text) const;
  /// The name of `value`'s claim file (ips/<name>): IP: toString(); GUID: 16 lower-case hex digits,
  /// no colons ("0200000000000005"), which no IPv4 or IPv6 text is.
  [[nodiscard]] std::string claimName(const net::Ident& value) const;
  /// The value a claim file's name stands for: IP: IpAddress::parse; GUID: exactly 16 hex digits.
  /// Callers that want the canonical name only compare claimName() of the result with `name`.
  [[nodiscard]] std::optional<net::Ident> fromClaimName(std::string_view name) const;
};

[[nodiscard]] const IdentSpace& ipSpace() noexcept;
[[nodiscard]] const IdentSpace& guidSpace() noexcept;
[[nodiscard]] const IdentSpace& spaceOf(SpaceKind kind) noexcept;
/// The space of `config`'s range sets: GUID when they are of family net::kFamilyGuid (a
/// configuration's range sets are all of one space), else IP.
[[nodiscard]] const IdentSpace& spaceOf(const config::IpamConfig& config) noexcept;

}  // namespace ibcni::ipam
