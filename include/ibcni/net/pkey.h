// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

namespace ibcni::net {

/// An InfiniBand partition key: 16 bits, the top one the full-membership bit, the low 15 the key
/// (IBTA vol. 1, 10.9.1). The kernel (IFLA_IPOIB_PKEY), sysfs (ports/N/pkeys/*) and libibverbs
/// (ibv_query_pkey) report it with the membership bit; a config and an attachment record hold the
/// key alone (`partition()`). Key 0 (0x0000, 0x8000) is the invalid partition key.
///
/// `==` is exact (the 16 bits, so a struct holding a Pkey compares what was reported);
/// `samePartition` is the comparison that ignores membership.
class Pkey {
 public:
  static constexpr std::uint16_t kFullMemberBit = 0x8000;
  static constexpr std::uint16_t kKeyMask = 0x7fff;

  /// Why a text is not a partition key, for a message that says what is accepted.
  enum class ParseError {
    kBadLength,   ///< no digits, or more than 8
    kNotANumber,  ///< a character that is not a digit of its base
    kOver16Bits,  ///< more than 0xffff
    kInvalidKey,  ///< 0x0000 or 0x8000
  };

  /// 0x0000: the invalid key (what a link without IPoIB data reports).
  constexpr Pkey() = default;

  /// A pkey as the kernel, sysfs and libibverbs report it, membership bit included.
  [[nodiscard]] static constexpr Pkey fromWire(std::uint16_t wire) noexcept { return Pkey(wire); }

  /// Parses hex ("0x7fff", "0X7FFF") or decimal ("32767"), at most 8 digits: 0x0001-0x7fff, or
  /// 0x8001-0xffff with the full-membership bit (kept). 0x0000/0x8000 and anything beyond 16
  /// bits are refused.
  [[nodiscard]] static std::expected<Pkey, ParseError> parseOrExplain(std::string_view text);
  /// parseOrExplain without the reason.
  [[nodiscard]] static std::optional<Pkey> parse(std::string_view text);

  /// The 16 bits, as IFLA_IPOIB_PKEY carries them.
  [[nodiscard]] constexpr std::uint16_t wire() const noexcept { return wire_; }
  /// The low 15 bits: the partition without the membership bit.
  [[nodiscard]] constexpr std::uint16_t key() const noexcept { return wire_ & kKeyMask; }
  [[nodiscard]] constexpr bool isFullMember() const noexcept { return (wire_ & kFullMemberBit) != 0; }
  /// False for key 0, the invalid partition key.
  [[nodiscard]] constexpr bool valid() const noexcept { return key() != 0; }
  /// The same partition with the full-membership bit set: what an IPoIB child is created with.
  [[nodiscard]] constexpr Pkey fullMember() const noexcept { return Pkey(wire_ | kFullMemberBit); }
  /// The same partition without the membership bit: what a config and a record hold.
  [[nodiscard]] constexpr Pkey partition() const noexcept { return Pkey(key()); }
  /// True when both name the same partition, whatever their membership.
  [[nodiscard]] constexpr bool samePartition(Pkey other) const noexcept { return key() == other.key(); }

  /// "0x%04x" of the 16 bits ("0x7fff", "0xffff"): the one text form of a pkey.
  [[nodiscard]] std::string hex() const;

  constexpr bool operator==(const Pkey&) const = default;

 private:
  constexpr explicit Pkey(std::uint16_t wire) noexcept : wire_(wire) {}

  std::uint16_t wire_ = 0;
};

}  // namespace ibcni::net
