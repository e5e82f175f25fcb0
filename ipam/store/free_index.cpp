// SPDX-License-Identifier: Apache-2.0
#include "ipam/store/free_index.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "ibcni/os/text.h"
#include "ipam/store/record_codec.h"

namespace ibcni::ipam {

namespace {

// The bitmap's words as the file keeps them: 8 bytes each, little-endian whatever the host (a
// plain copy on the hosts ibcni builds for).
void storeLittleEndian(const std::uint64_t* words, std::size_t count, char* out) {
  if constexpr (std::endian::native == std::endian::little) {
    if (count != 0) {
      std::memcpy(out, words, count * 8);
    }
  } else {
    for (std::size_t w = 0; w < count; ++w) {
      for (std::size_t b = 0; b < 8; ++b) {
        out[w * 8 + b] = static_cast<char>((words[w] >> (8 * b)) & 0xff);
      }
    }
  }
}

void loadLittleEndian(const char* in, std::size_t count, std::uint64_t* words) {
  if constexpr (std::endian::native == std::endian::little) {
    if (count != 0) {
      std::memcpy(words, in, count * 8);
    }
  } else {
    for (std::size_t w = 0; w < count; ++w) {
      std::uint64_t v = 0;
      for (std::size_t b = 8; b-- > 0;) {
        v = (v << 8) | static_cast<unsigned char>(in[w * 8 + b]);
      }
      words[w] = v;
    }
  }
}

constexpr const char* kIndexKind = "index";

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) {
    h = (h ^ ch) * 1099511628211ull;
  }
  return h;
}

}  // namespace

FreeIndex::FreeIndex(const RangeSetSpans& spans, const IdentSpace& space) : space_(&space) {
  for (const auto& s : spans) {
    spec_ += (spec_.empty() ? "" : ",") + s.start.toString() + "-" + s.end.toString();
    Range r;
    r.start = toInt(s.start);
    r.end = toInt(s.end);
    r.bitmap = r.end - r.start < kMaxBitmapRange;
    ranges_.push_back(r);
    family_ = s.start.family;
  }
  id_ = "set-" + os::hex64(fnv1a(spec_));
}

std::size_t FreeIndex::wordsOf(const Range& r) const {
  return r.bitmap ? static_cast<std::size_t>((r.end - r.start) / 64 + 1) : 0;
}

std::string FreeIndex::rangeLine(const Range& r) const {
  return "range " + fromInt(r.start, family_).toString() + "-" + fromInt(r.end, family_).toString() + " " +
         (r.bitmap ? "bitmap" : "probe") + " ";
}

bool FreeIndex::covers(const net::IpAddress& ip) const {
  if (ip.family != family_) {
    return false;
  }
  U128 v = toInt(ip);
  for (const auto& r : ranges_) {
    if (r.start <= v && v <= r.end) {
      return true;
    }
  }
  return false;
}

void FreeIndex::forget() noexcept {
  known_ = false;
  dirty_ = false;
  cursor_.reset();
  for (auto& r : ranges_) {
    r.words.clear();
  }
}

void FreeIndex::rebuild(const std::vector<std::string>& claimNames) {
  for (auto& r : ranges_) {
    r.words.assign(wordsOf(r), 0);
  }
  cursor_.reset();
  for (const auto& name : claimNames) {
    auto ip = space_->fromClaimName(name);
    if (!ip || ip->family != family_) {
      continue;
    }
    U128 v = toInt(*ip);
    for (auto& r : ranges_) {
      if (r.bitmap && r.start <= v && v <= r.end) {
        auto bit = static_cast<std::uint64_t>(v - r.start);
        r.words[bit / 64] |= std::uint64_t{1} << (bit % 64);
      }
    }
  }
  known_ = true;
  dirty_ = true;
}

void FreeIndex::setCursor(const net::IpAddress& ip) {
  cursor_ = ip;
  dirty_ = true;
}

void FreeIndex::mark(const net::IpAddress& ip, bool held) {
  if (ip.family != family_) {
    return;
  }
  U128 v = toInt(ip);
  for (auto& r : ranges_) {
    if (r.start <= v && v <= r.end) {
      if (!r.bitmap) {
        return;
      }
      auto bit = static_cast<std::uint64_t>(v - r.start);
      std::uint64_t mask = std::uint64_t{1} << (bit % 64);
      std::uint64_t& word = r.words[bit / 64];
      if (((word & mask) != 0) != held) {
        word ^= mask;
        dirty_ = true;
      }
      return;
    }
  }
}

os::SysResult<std::optional<net::IpAddress>> FreeIndex::firstFree(std::size_t range, const net::IpAddress& lo,
                                                                  const net::IpAddress& hi, const ClaimCheck& claimed) {
  Range& r = ranges_[range];
  U128 from = std::max(toInt(lo), r.start);
  U128 to = std::min(toInt(hi), r.end);
  if (from > to) {
    return std::optional<net::IpAddress>();
  }
  if (!r.bitmap) {
    // Too large for a bitmap (an IPv6 /64): probe the claims from `from`. Held addresses are a
    // vanishing fraction of such a range, so this ends after a probe or two.
    for (U128 v = from;; ++v) {
      auto ip = fromInt(v, family_);
      auto exists = claimed(ip);
      if (!exists) {
        return std::unexpected(exists.error());
      }
      if (!*exists) {
        return std::optional<net::IpAddress>(ip);
      }
      if (v == to) {
        return std::optional<net::IpAddress>();
      }
    }
  }
  auto pos = static_cast<std::uint64_t>(from - r.start);
  auto last = static_cast<std::uint64_t>(to - r.start);
  while (pos <= last) {
    std::uint64_t w = pos / 64;
    std::uint64_t freeBits = ~r.words[w] & (~std::uint64_t{0} << (pos % 64));
    if (freeBits == 0) {
      pos = (w + 1) * 64;
      continue;
    }
    std::uint64_t bit = w * 64 + static_cast<std::uint64_t>(std::countr_zero(freeBits));
    if (bit > last) {
      break;
    }
    auto ip = fromInt(r.start + bit, family_);
    // The bitmap may lag behind ips/ when a process died between claiming and indexing: the
    // claim is the truth, and the bit is repaired on the way.
    auto exists = claimed(ip);
    if (!exists) {
      return std::unexpected(exists.error());
    }
    if (!*exists) {
      return std::optional<net::IpAddress>(ip);
    }
    r.words[w] |= std::uint64_t{1} << (bit % 64);
    dirty_ = true;
    pos = bit + 1;
  }
  return std::optional<net::IpAddress>();
}

std::uint64_t FreeIndex::countMarked() const {
  std::uint64_t n = 0;
  for (const auto& r : ranges_) {
    for (auto w : r.words) {
      n += static_cast<std::uint64_t>(std::popcount(w));
    }
  }
  return n;
}

bool FreeIndex::hasProbedRange() const {
  for (const auto& r : ranges_) {
    if (!r.bitmap) {
      return true;
    }
  }
  return false;
}

std::uint64_t FreeIndex::countInProbedRanges(const std::vector<std::string>& claimNames) const {
  std::uint64_t n = 0;
  for (const auto& name : claimNames) {
    auto ip = space_->fromClaimName(name);
    if (!ip || ip->family != family_) {
      continue;
    }
    U128 v = toInt(*ip);
    for (const auto& r : ranges_) {
      if (!r.bitmap && r.start <= v && v <= r.end) {
        ++n;
      }
    }
  }
  return n;
}

std::vector<net::IpAddress> FreeIndex::marked() const {
  std::vector<net::IpAddress> out;
  for (const auto& r : ranges_) {
    for (std::size_t w = 0; w < r.words.size(); ++w) {
      for (std::uint64_t bits = r.words[w]; bits != 0; bits &= bits - 1) {
        auto bit = w * 64 + static_cast<std::size_t>(std::countr_zero(bits));
        out.push_back(fromInt(r.start + bit, family_));
      }
    }
  }
  return out;
}

os::SysResult<std::size_t> FreeIndex::dropUnclaimed(const ClaimCheck& claimed) {
  std::size_t dropped = 0;
  for (auto& r : ranges_) {
    for (std::size_t w = 0; w < r.words.size(); ++w) {
      for (std::uint64_t bits = r.words[w]; bits != 0; bits &= bits - 1) {
        auto bit = static_cast<std::uint64_t>(std::countr_zero(bits));
        auto exists = claimed(fromInt(r.start + w * 64 + bit, family_));
        if (!exists) {
          return std::unexpected(exists.error());
        }
        if (!*exists) {
          r.words[w] &= ~(std::uint64_t{1} << bit);
          dirty_ = true;
          ++dropped;
        }
      }
    }
  }
  return dropped;
}

std::string FreeIndex::encode() const {
  std::string body = "spec " + spec_ + "\n";
  body += "cursor " + (cursor_ ? cursor_->toString() : std::string("-")) + "\n";
  for (const auto& r : ranges_) {
    std::size_t bytes = r.bitmap ? r.words.size() * 8 : 0;
    body += rangeLine(r) + std::to_string(bytes) + "\n";
    std::size_t at = body.size();
    body.resize(at + bytes);
    storeLittleEndian(r.bitmap ? r.words.data() : nullptr, bytes / 8, body.data() + at);
  }
  return codec::frame(kIndexKind, body);
}

os::SysResult<void> FreeIndex::decode(const std::string& text, const std::string& path, const std::string& fix) {
  auto framed = codec::unframe(text, kIndexKind, path, fix);
  if (!framed) {
    return std::unexpected(framed.error());
  }
  const std::string& body = *framed;
  std::size_t pos = 0;
  auto line = [&]() -> std::optional<std::string> {
    auto nl = body.find('\n', pos);
    if (nl == std::string::npos) {
      return std::nullopt;
    }
    std::string l = body.substr(pos, nl - pos);
    pos = nl + 1;
    return l;
  };
  auto spec = line();
  if (!spec || *spec != "spec " + spec_) {
    return codec::corruptFile(path, "it does not describe ranges " + spec_, fix);
  }
  auto cur = line();
  if (!cur || !cur->starts_with("cursor ")) {
    return codec::corruptFile(path, "no cursor line", fix);
  }
  std::string curText = cur->substr(7);
  std::optional<net::IpAddress> cursor;
  if (curText != "-") {
    auto ip = space_->parse(curText);
    if (!ip || ip->family != family_) {
      return codec::corruptFile(path, "bad cursor " + curText, fix);
    }
    cursor = *ip;
  }
  // Decoded aside and kept only when the whole file is good.
  std::vector<std::vector<std::uint64_t>> decoded;
  for (const auto& r : ranges_) {
    auto rl = line();
    std::size_t words = wordsOf(r);
    if (!rl || *rl != rangeLine(r) + std::to_string(words * 8)) {
      return codec::corruptFile(path, "bad range line", fix);
    }
    if (body.size() - pos < words * 8) {
      return codec::corruptFile(path, "bitmap cut short", fix);
    }
    std::vector<std::uint64_t>& out = decoded.emplace_back(words, 0);
    loadLittleEndian(body.data() + pos, words, out.data());
    pos += words * 8;
    if (r.bitmap) {
      std::uint64_t size = static_cast<std::uint64_t>(r.end - r.start) + 1;
      if (size % 64 != 0 && (out.back() >> (size % 64)) != 0) {
        return codec::corruptFile(path, "bits set past the end of a range", fix);
      }
    }
  }
  if (pos != body.size()) {
    return codec::corruptFile(path, "trailing bytes", fix);
  }
  for (std::size_t i = 0; i < ranges_.size(); ++i) {
    ranges_[i].words = std::move(decoded[i]);
  }
  cursor_ = cursor;
  known_ = true;
  dirty_ = false;
  return {};
}

}  // namespace ibcni::ipam
