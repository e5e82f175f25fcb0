// SPDX-License-Identifier: Apache-2.0
// What the embedded IPAM hands out: IP addresses, or InfiniBand GUIDs (values of the net::kFamilyGuid
// family). The store and the allocator run the same code for both; an IdentSpace holds what differs
// between them: how a value is read from text, how its claim file is named, what messages call it,
// and (for a cluster pool) how its blocks and its pool are named in a backend.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ibcni/config/ipam_conf.h"
#include "ibcni/net/address_math.h"
#include "ibcni/net/ip.h"

namespace ibcni::ipam {

enum class SpaceKind { kIp, kGuid };

/// The values a block key names, whatever the configuration: their family and span.
struct KeySpan {
  int family = 0;
  net::Interval span;
  [[nodiscard]] bool contains(const net::IpAddress& ip) const {
    return ip.family == family && net::toInt(ip) >= span.lo && net::toInt(ip) <= span.hi;
  }
};

/// The text conventions of one kind of value. The IP space reproduces the store's and the
/// allocator's IP texts byte for byte.
struct IdentSpace {
  SpaceKind kind = SpaceKind::kIp;
  std::string_view noun;   ///< "address" / "GUID"
  std::string_view aNoun;  ///< "an address" / "a GUID"
  std::string_view nouns;  ///< "addresses" / "GUIDs"

  /// A value written by a user or a record: IP: IpAddress::parse (IPv4 or IPv6 text); GUID:
  /// net::Guid::parse ("02:00:00:00:00:00:00:05"), as family kFamilyGuid. nullopt on anything else.
  [[nodiscard]] std::optional<net::Ident> parse(std::string_view text) const;
  /// The name of `value`'s claim file (ips/<name>): IP: toString(); GUID: 16 lower-case hex digits,
  /// no colons ("0200000000000005"), which no IPv4 or IPv6 text is.
  [[nodiscard]] std::string claimName(const net::Ident& value) const;
  /// The value a claim file's name stands for: IP: IpAddress::parse; GUID: exactly 16 hex digits.
  /// Callers that want the canonical name only compare claimName() of the result with `name`.
  [[nodiscard]] std::optional<net::Ident> fromClaimName(std::string_view name) const;

  /// The name a backend claims for the aligned block of 2^log2size values from `first`: IP: the
  /// network address and the prefix length ("10.56.0.32-27", "fd00::20-123"); GUID: the first
  /// value as claimName() writes it and log2size ("0200000000000100-8"), which no IP key is.
  [[nodiscard]] std::string blockKey(const net::Ident& first, int log2size) const;
  /// The values block key `key` names; nullopt when it is not a block key of this space (a GUID
  /// key's first value must be aligned on its block size).
  [[nodiscard]] std::optional<KeySpan> spanOfKey(std::string_view key) const;
  /// A block for people: IP: its CIDR ("10.56.0.32/27"); GUID: its first and last values
  /// ("02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:ff").
  [[nodiscard]] std::string describeBlock(const net::Ident& first, int log2size) const;
  /// The name of cluster pool `pool` in a backend (its keys, Leases and registry entry): IP: `pool`;
  /// GUID: "guid_" + pool. An IP pool's name never holds '_' (ipam.cluster.pool's rules), so a GUID
  /// pool and an IP pool of one name never share a backend object.
  [[nodiscard]] std::string backendPool(const std::string& pool) const;
};

[[nodiscard]] const IdentSpace& ipSpace() noexcept;
[[nodiscard]] const IdentSpace& guidSpace() noexcept;
[[nodiscard]] const IdentSpace& spaceOf(SpaceKind kind) noexcept;
/// The space of `config`'s range sets: GUID when they are of family net::kFamilyGuid (a
/// configuration's range sets are all of one space), else IP.
[[nodiscard]] const IdentSpace& spaceOf(const config::IpamConfig& config) noexcept;

}  // namespace ibcni::ipam
