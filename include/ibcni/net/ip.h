// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ibcni::net {

/// An InfiniBand GUID (node or port), 8 octets written "xx:xx:xx:xx:xx:xx:xx:xx".
struct Guid {
  std::uint64_t value = 0;
  /// Parses exactly 8 colon-separated hex octets.
  [[nodiscard]] static std::optional<Guid> parse(std::string_view text);
  [[nodiscard]] std::string toString() const;
  bool operator==(const Guid&) const = default;
};

/// The family of an InfiniBand GUID kept in an IpAddress (Linux's AF_IB). The IPAM's stores and
/// pools hand out GUIDs with the same code as addresses; no text is ever parsed into this family by
/// IpAddress::parse (GUID text is also valid IPv6 text: "02:00:00:00:00:00:00:05").
inline constexpr int kFamilyGuid = 27;

/// Number of bits in a value of `family`: 32 (AF_INET), 64 (kFamilyGuid), else 128 (AF_INET6).
[[nodiscard]] constexpr int bitsOf(int family) noexcept {
  return family == 2 ? 32 : family == kFamilyGuid ? 64 : 128;
}

/// An IPv4 or IPv6 address, or an InfiniBand GUID (family kFamilyGuid). IPv4 uses the first 4
/// bytes of `bytes`, a GUID the first 8 (most significant first).
struct IpAddress {
  int family = 0;  ///< AF_INET, AF_INET6 or kFamilyGuid; 0 means "unset"
  std::array<std::uint8_t, 16> bytes{};

  /// Parses dotted-quad IPv4 or RFC 4291 IPv6 text. nullopt on anything else; never a GUID.
  [[nodiscard]] static std::optional<IpAddress> parse(std::string_view text);
  /// The value of family kFamilyGuid holding `guid`.
  [[nodiscard]] static IpAddress fromGuid(Guid guid) noexcept;
  /// The GUID held, or nullopt when this is not of family kFamilyGuid.
  [[nodiscard]] std::optional<Guid> guid() const noexcept;
  /// IPv4/IPv6 text, or GUID text ("02:00:00:00:00:00:00:05") for a GUID; empty when unset.
  [[nodiscard]] std::string toString() const;
  [[nodiscard]] bool isV4() const noexcept { return family == 2; }
  [[nodiscard]] bool isGuid() const noexcept { return family == kFamilyGuid; }
  [[nodiscard]] std::size_t size() const noexcept { return static_cast<std::size_t>(bitsOf(family) / 8); }
  [[nodiscard]] bool valid() const noexcept { return family != 0; }
  auto operator<=>(const IpAddress&) const = default;
};

/// An identifier handed out by the IPAM's allocator: an address or a GUID.
using Ident = IpAddress;

/// An address with a prefix length, as CNI writes it ("10.1.2.3/24"). The host bits are kept.
struct IpPrefix {
  IpAddress address;
  int prefixLen = 0;

  /// Parses "addr/len". With `allowBare`, a bare address gets the full-length prefix.
  [[nodiscard]] static std::optional<IpPrefix> parse(std::string_view text, bool allowBare = false);
  [[nodiscard]] std::string toString() const;
  /// The same prefix with the host bits cleared ("10.1.2.0/24").
  [[nodiscard]] IpPrefix network() const;
  [[nodiscard]] bool contains(const IpAddress& ip) const;
  auto operator<=>(const IpPrefix&) const = default;
};

/// A hardware address of any length (6 bytes for Ethernet, 20 for IPoIB), printed as
/// lower-case colon-separated hex.
struct HwAddress {
  std::string text;  ///< canonical lower-case "aa:bb:..."
  std::size_t length = 0;

  /// Parses colon-separated hex octets. nullopt on anything else.
  [[nodiscard]] static std::optional<HwAddress> parse(std::string_view text);
  [[nodiscard]] static HwAddress fromBytes(const std::uint8_t* data, std::size_t len);
  bool operator==(const HwAddress&) const = default;
};

/// A PCI function address, canonical form "dddd:bb:dd.f" in lower case.
struct PciAddress {
  std::string text;
  /// Accepts "dddd:bb:dd.f" or the short "bb:dd.f" (domain 0000), any hex case.
  [[nodiscard]] static std::optional<PciAddress> parse(std::string_view text);
  bool operator==(const PciAddress&) const = default;
};

/// True when `name` is a valid Linux interface name (1-15 bytes, not "." or "..", no '/', ':' or
/// whitespace: the kernel's dev_valid_name) that is also safe to print and to use as a file name:
/// no control character and no byte sequence that is not UTF-8.
[[nodiscard]] bool isValidIfName(std::string_view name);

}  // namespace ibcni::net
