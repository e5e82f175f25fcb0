// SPDX-License-Identifier: Apache-2.0
// Cluster mode's geometry: the range sets of a pool cut into aligned blocks of blockSize addresses
// (or GUIDs: a GUID pool's range sets have no subnet, its blocks are aligned runs inside its ranges).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ipam/policy/allocation.h"
#include "ipam/policy/allocation_space.h"
#include "ibcni/config/ipam_conf.h"

namespace ibcni::ipam {

/// One block: an aligned run of blockSize values inside a range set (for addresses, a CIDR).
struct Block {
  std::size_t set = 0;
  net::IpPrefix cidr;  ///< the block's first value and its prefix length (64 - log2 blockSize for GUIDs)
  std::string key;     ///< "10.56.0.32-27", "fd00::20-123", "0200000000000100-8": the name a backend claims
  Interval span;       ///< every value of the block
  const IdentSpace* space = &ipSpace();

  /// For people: "10.56.0.32/27", "02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:ff".
  [[nodiscard]] std::string describe() const {
    return space->describeBlock(cidr.address, net::bitsOf(cidr.address.family) - cidr.prefixLen);
  }
};

/// "<network address>-<prefix length>" of `cidr` (ipSpace().blockKey).
[[nodiscard]] std::string blockKeyOf(const net::IpPrefix& cidr);

/// The span of IP block key `key` ("10.56.0.32-27"); nullopt when it is not one (ipSpace().spanOfKey).
[[nodiscard]] std::optional<KeySpan> spanOfKey(std::string_view key);

/// The seed of node `node`'s own order of range set `set`'s blocks (BlockGrid::candidates draws with
/// it): the same on every run and every build (FNV-1a of the name), different from node to node, so
/// that nodes claiming at once rarely meet and a node whose ledger was lost meets its blocks first.
[[nodiscard]] std::uint64_t preferenceSeed(std::string_view node, std::size_t set);

/// The blocks of a pool's range sets. A block belongs to a range set when it overlaps one of its
/// ranges; it is a candidate for claiming only when it holds an address the allocator may hand out
/// (not all gateway, excluded or reserved).
class BlockGrid {
 public:
  /// `allowed[set]`: the addresses round-robin may hand out in each range set (Allocator::allowed).
  /// The space (keys, descriptions) is spaceOf(config).
  BlockGrid(const config::IpamConfig& config, std::uint32_t blockSize, std::vector<std::vector<Interval>> allowed);

  /// The block `key` names, when it is one of this pool's.
  [[nodiscard]] std::optional<Block> byKey(std::string_view key) const;
  /// The block any key of this space names, this pool's or not (set 0 when it is not one of this
  /// pool's); nullopt when `key` is no block key.
  [[nodiscard]] std::optional<Block> anyByKey(std::string_view key) const;
  /// The block holding `ip`, when it lies in a range set's blocks.
  [[nodiscard]] std::optional<Block> blockOf(const net::IpAddress& ip) const;
  /// How many blocks range set `set` has (saturating).
  [[nodiscard]] U128 count(std::size_t set) const;
  /// Up to `max` blocks of range set `set`, in random order, that are not in `taken` (keys) and
  /// hold an allocatable address: random draws first (no key formatted for blocks not picked); when
  /// they find too few (a nearly full pool), every free block of a set of up to 2^20 blocks.
  [[nodiscard]] std::vector<Block> candidates(std::size_t set, const std::set<std::string>& taken, std::size_t max,
                                              std::mt19937_64& rng) const;
  /// The pool's shape: every range (subnet, start, end; a GUID range has no subnet) of every range
  /// set, and the block size.
  /// Two configurations with the same fingerprint cut the same blocks.
  [[nodiscard]] const std::string& fingerprint() const { return fingerprint_; }
  [[nodiscard]] std::uint32_t blockSize() const { return blockSize_; }
  [[nodiscard]] const IdentSpace& space() const { return *space_; }

 private:
  [[nodiscard]] Block blockAt(std::size_t set, U128 start, int family) const;
  [[nodiscard]] bool allocatable(std::size_t set, const Interval& span) const;

  const IdentSpace* space_;
  std::uint32_t blockSize_;
  std::vector<int> families_;
  /// Per set: the starts of its blocks as intervals of block indexes (start / blockSize).
  std::vector<std::vector<Interval>> indexes_;
  std::vector<std::vector<Interval>> allowed_;
  std::string fingerprint_;
};

}  // namespace ibcni::ipam
