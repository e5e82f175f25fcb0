// SPDX-License-Identifier: Apache-2.0
#include "ipam/cluster/block_grid.h"

#include <algorithm>
#include <bit>

namespace ibcni::ipam {

namespace {

int log2Of(std::uint32_t v) { return std::countr_zero(v); }

// A uniform random number in [0, n), n > 0, for 128-bit counts.
U128 randomBelow(U128 n, std::mt19937_64& rng) {
  U128 r = (static_cast<U128>(rng()) << 64) | rng();
  return r % n;
}

}  // namespace

std::string blockKeyOf(const net::IpPrefix& cidr) {
  return ipSpace().blockKey(cidr.address, net::bitsOf(cidr.address.family) - cidr.prefixLen);
}

std::optional<KeySpan> spanOfKey(std::string_view key) { return ipSpace().spanOfKey(key); }

std::uint64_t preferenceSeed(std::string_view node, std::size_t set) {
  std::uint64_t h = 14695981039346656037ULL;  // FNV-1a, 64 bits
  const auto mix = [&](unsigned char c) {
    h ^= c;
    h *= 1099511628211ULL;
  };
  for (const char c : node) {
    mix(static_cast<unsigned char>(c));
  }
  mix(0);
  for (int shift = 0; shift < 64; shift += 8) {
    mix(static_cast<unsigned char>(static_cast<std::uint64_t>(set) >> shift));
  }
  return h;
}

BlockGrid::BlockGrid(const config::IpamConfig& config, std::uint32_t blockSize,
                     std::vector<std::vector<Interval>> allowed)
    : space_(&spaceOf(config)), blockSize_(blockSize), allowed_(std::move(allowed)) {
  const U128 bs = blockSize_;
  for (const auto& set : config.rangeSets) {
    families_.push_back(set.family);
    std::vector<Interval> idx;
    for (const auto& r : set.ranges) {
      idx.push_back({toInt(r.rangeStart) / bs, toInt(r.rangeEnd) / bs});
      const std::string subnet = space_->kind == SpaceKind::kIp ? r.subnet.toString() : "";
      fingerprint_ += (fingerprint_.empty() ? "" : " ") + subnet + "[" + r.rangeStart.toString() + "-" +
                      r.rangeEnd.toString() + "]";
    }
    fingerprint_ += ";";
    indexes_.push_back(normalized(std::move(idx)));
  }
  fingerprint_ += " blockSize " + std::to_string(blockSize_);
}

Block BlockGrid::blockAt(std::size_t set, U128 start, int family) const {
  const int log2 = log2Of(blockSize_);
  const net::IpAddress first = fromInt(start, family);
  return Block{set, net::IpPrefix{first, net::bitsOf(family) - log2}, space_->blockKey(first, log2),
               {start, start + blockSize_ - 1}, space_};
}

bool BlockGrid::allocatable(std::size_t set, const Interval& span) const {
  const auto& ivs = allowed_[set];
  auto it = std::lower_bound(ivs.begin(), ivs.end(), span.lo, [](const Interval& i, U128 v) { return i.hi < v; });
  return it != ivs.end() && it->lo <= span.hi;
}

std::optional<Block> BlockGrid::blockOf(const net::IpAddress& ip) const {
  const U128 v = toInt(ip);
  for (std::size_t s = 0; s < indexes_.size(); ++s) {
    if (families_[s] != ip.family) {
      continue;
    }
    if (findInterval(indexes_[s], v / blockSize_) >= 0) {
      return blockAt(s, v / blockSize_ * blockSize_, ip.family);
    }
  }
  return std::nullopt;
}

std::optional<Block> BlockGrid::byKey(std::string_view key) const {
  auto span = space_->spanOfKey(key);
  if (!span) {
    return std::nullopt;
  }
  auto b = blockOf(fromInt(span->span.lo, span->family));
  if (!b || b->key != key) {
    return std::nullopt;
  }
  return b;
}

std::optional<Block> BlockGrid::anyByKey(std::string_view key) const {
  if (auto b = byKey(key)) {
    return b;
  }
  auto span = space_->spanOfKey(key);
  if (!span) {
    return std::nullopt;
  }
  const net::IpAddress first = fromInt(span->span.lo, span->family);
  const int log2 = static_cast<int>(std::bit_width(static_cast<std::uint64_t>(span->span.hi - span->span.lo)));
  return Block{0, net::IpPrefix{first, net::bitsOf(span->family) - log2}, std::string(key), span->span, space_};
}

U128 BlockGrid::count(std::size_t set) const { return totalSize(indexes_.at(set)); }

std::vector<Block> BlockGrid::candidates(std::size_t set, const std::set<std::string>& taken, std::size_t max,
                                         std::mt19937_64& rng) const {
  std::vector<Block> out;
  const auto& idx = indexes_.at(set);
  const U128 total = totalSize(idx);
  if (total == 0 || max == 0) {
    return out;
  }
  auto startOf = [&](U128 n) {
    for (const auto& iv : idx) {
      const U128 size = iv.hi - iv.lo + 1;
      if (n < size) {
        return (iv.lo + n) * blockSize_;
      }
      n -= size;
    }
    return idx.back().hi * blockSize_;
  };
  // The taken blocks by their first address: no key is formatted for a block not picked.
  std::set<U128> takenStarts;
  for (const auto& key : taken) {
    if (auto b = byKey(key); b && b->set == set) {
      takenStarts.insert(b->span.lo);
    }
  }
  const auto usable = [&](U128 start) {
    return !takenStarts.contains(start) && allocatable(set, Interval{start, start + blockSize_ - 1});
  };
  // Random draws first: in a pool with room, a few find free blocks at once.
  for (std::size_t tries = 0; tries < max * 16 && out.size() < max; ++tries) {
    const U128 start = startOf(randomBelow(total, rng));
    if (!usable(start)) {
      continue;
    }
    takenStarts.insert(start);  // not twice
    out.push_back(blockAt(set, start, families_[set]));
  }
  constexpr U128 kEnumerate = 1U << 20;
  if (out.size() >= max || total > kEnumerate) {
    return out;
  }
  // A nearly full pool: every free block, in random order, so that the last ones are found too.
  std::vector<U128> free;
  for (U128 n = 0; n < total; ++n) {
    const U128 start = startOf(n);
    if (usable(start)) {
      free.push_back(start);
    }
  }
  std::shuffle(free.begin(), free.end(), rng);
  for (std::size_t i = 0; i < free.size() && out.size() < max; ++i) {
    out.push_back(blockAt(set, free[i], families_[set]));
  }
  return out;
}

}  // namespace ibcni::ipam
