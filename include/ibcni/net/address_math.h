// SPDX-License-Identifier: Apache-2.0
// Addresses as 128-bit integers, and sorted interval lists over them: the arithmetic behind
// ranges, exclusions and the free-address index. IPv4 and IPv6 values share the integer type but
// are never mixed in one list; nor are GUIDs (64 bits).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ibcni/net/ip.h"

namespace ibcni::net {

/// An address as an unsigned integer (IPv4 in the low 32 bits). GCC's __int128 is an extension;
/// __extension__ keeps -Wpedantic quiet about it.
__extension__ typedef unsigned __int128 U128;

/// The address's value, most significant byte first.
[[nodiscard]] U128 toInt(const IpAddress& ip);
/// The value of `family` (AF_INET/AF_INET6/kFamilyGuid) with value `v` (truncated to its bits).
[[nodiscard]] IpAddress fromInt(U128 v, int family);
/// Decimal text of `v`, for messages ("65533").
[[nodiscard]] std::string toDecimal(U128 v);
/// First (network) and last (IPv4 broadcast) address of `prefix`.
[[nodiscard]] U128 firstOf(const IpPrefix& prefix);
[[nodiscard]] U128 lastOf(const IpPrefix& prefix);
/// Number of bits in a value of `ip`'s family (32, 64 for a GUID, or 128).
[[nodiscard]] inline int bitsOf(const IpAddress& ip) { return bitsOf(ip.family); }

/// An inclusive interval [lo, hi] of addresses of one family.
struct Interval {
  U128 lo = 0;
  U128 hi = 0;
  bool operator==(const Interval&) const = default;
};

/// Sorts `v` and merges overlapping or adjacent intervals.
[[nodiscard]] std::vector<Interval> normalized(std::vector<Interval> v);

/// `base` without the addresses in `holes` (which must be normalized), as sorted intervals.
[[nodiscard]] std::vector<Interval> subtract(Interval base, const std::vector<Interval>& holes);

/// Number of addresses in normalized `v` (saturates at the maximum value).
[[nodiscard]] U128 totalSize(const std::vector<Interval>& v);

/// Index of the interval of normalized `v` that holds `x`, or -1.
[[nodiscard]] long findInterval(const std::vector<Interval>& v, U128 x);

}  // namespace ibcni::net
