// SPDX-License-Identifier: Apache-2.0
// Cluster mode's geometry: the range sets of a pool cut into aligned blocks of blockSize addresses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ipam/policy/allocation.h"
#include "ibcni/config/ipam_conf.h"

namespace ibcni::ipam {

/// One block: an aligned CIDR of blockSize addresses inside a range set.
struct Block {
  std::size_t set = 0;
  net::IpPrefix cidr;
  std::string key;  ///< "10.56.0.32-27", "fd00::20-123": the name a backend claims
  Interval span;    ///< every address of the CIDR

  /// "10.56.0.32/27"
  [[nodiscard]] std::string describe() const { return cidr.toString(); }
};

/// "<network address>-<prefix length>" of `cidr`.
[[nodiscard]] std::string blockKeyOf(const net::IpPrefix& cidr);

/// The addresses a block key names, whatever the configuration: its family and span.
struct KeySpan {
  int family = 0;
  Interval span;
  [[nodiscard]] bool contains(const net::IpAddress& ip) const {
    return ip.family == family && toInt(ip) >= span.lo && toInt(ip) <= span.hi;
  }
};
/// The span of block key `key` ("10.56.0.32-27"); nullopt when it is not one.
[[nodiscard]] std::optional<KeySpan> spanOfKey(std::string_view key);

/// The blocks of a pool's range sets. A block belongs to a range set when it overlaps one of its
/// ranges; it is a candidate for claiming only when it holds an address the allocator may hand out
/// (not all gateway, excluded or reserved).
class BlockGrid {
 public:
  /// `allowed[set]`: the addresses round-robin may hand out in each range set (Allocator::allowed).
  BlockGrid(const config::IpamConfig& config, std::uint32_t blockSize, std::vector<std::vector<Interval>> allowed);

  /// The block `key` names, when it is one of this pool's.
  [[nodiscard]] std::optional<Block> byKey(std::string_view key) const;
  /// The block holding `ip`, when it lies in a range set's blocks.
  [[nodiscard]] std::optional<Block> blockOf(const net::IpAddress& ip) const;
  /// How many blocks range set `set` has (saturating).
  [[nodiscard]] U128 count(std::size_t set) const;
  /// Up to `max` blocks of range set `set`, in random order, that are not in `taken` (keys) and
  /// hold an allocatable address: random draws first (no key formatted for blocks not picked); when
  /// they find too few (a nearly full pool), every free block of a set of up to 2^20 blocks.
  [[nodiscard]] std::vector<Block> candidates(std::size_t set, const std::set<std::string>& taken, std::size_t max,
                                              std::mt19937_64& rng) const;
  /// The pool's shape: every range (subnet, start, end) of every range set, and the block size.
  /// Two configurations with the same fingerprint cut the same blocks.
  [[nodiscard]] const std::string& fingerprint() const { return fingerprint_; }
  [[nodiscard]] std::uint32_t blockSize() const { return blockSize_; }

 private:
  [[nodiscard]] Block blockAt(std::size_t set, U128 start) const;
  [[nodiscard]] bool allocatable(std::size_t set, const Interval& span) const;

  std::uint32_t blockSize_;
  std::vector<int> families_;
  /// Per set: the starts of its blocks as intervals of block indexes (start / blockSize).
  std::vector<std::vector<Interval>> indexes_;
  std::vector<std::vector<Interval>> allowed_;
  std::string fingerprint_;
};

}  // namespace ibcni::ipam
