// SPDX-License-Identifier: Apache-2.0
// The free-address index of the embedded IPAM's store: which addresses of a range set are held,
// as one bitmap per range, and the round-robin cursor; and the body of the index file that keeps
// them (index/set-<hash>). It makes an ADD cost independent of how full the pool is. No I/O:
// FileStore reads and writes the file and answers, through a ClaimCheck, whether an address is
// claimed (ips/<address>), which is the truth the index only summarises.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/net/address_math.h"
#include "ibcni/net/ip.h"
#include "ibcni/os/sys_error.h"
#include "ipam/policy/allocation_space.h"
#include "ipam/store/store.h"

namespace ibcni::ipam {

/// Whether `ip` is claimed; an error stops the caller and is returned as is.
using ClaimCheck = std::function<os::SysResult<bool>(const net::IpAddress& ip)>;

/// The index of one range set (a Store's `set`). Each range of at most kMaxBitmapRange addresses
/// has a bitmap whose bit i says that start + i is held ("marked"); larger ranges (IPv6 /64s)
/// have none and are probed address by address, which finds a free one at once in a sparse range.
///
/// Guarantees:
///   - a mark is never trusted to mean "free": firstFree() confirms each candidate with the
///     ClaimCheck, so a mark that lags behind the claims (a process died between claiming and
///     marking) costs one check and is repaired, never hands out a held address;
///   - firstFree() steps over 64 marks at a time, whatever the fill;
///   - decode(encode()) gives back the same marks and cursor, and decode() accepts only an index
///     of exactly these ranges (else EUCLEAN naming the file), changing nothing when it fails;
///   - dirty() tells whether the marks or the cursor changed since the last decode() or
///     markSaved(), i.e. whether the file needs writing.
///
/// Until rebuild() or decode() the index knows nothing (known() is false): the other calls need
/// one of them first. forget() returns to that state.
class FreeIndex {
 public:
  /// Ranges of at most this many addresses get a bitmap (128 KiB).
  static constexpr std::uint64_t kMaxBitmapRange = std::uint64_t{1} << 20;

  /// `space` reads the claim names and the cursor (IP: addresses; GUID: kFamilyGuid values).
  explicit FreeIndex(const RangeSetSpans& spans, const IdentSpace& space = ipSpace());

  /// "set-<16 hex>", a hash of the ranges: the file name under index/. Other ranges, other name.
  [[nodiscard]] const std::string& fileName() const noexcept { return id_; }
  [[nodiscard]] std::size_t rangeCount() const noexcept { return ranges_.size(); }
  /// Whether `ip` is inside one of the ranges.
  [[nodiscard]] bool covers(const net::IpAddress& ip) const;

  [[nodiscard]] bool known() const noexcept { return known_; }
  [[nodiscard]] bool dirty() const noexcept { return dirty_; }
  /// The current state was written to the file.
  void markSaved() noexcept { dirty_ = false; }
  /// Drops the marks and the cursor (another process may change the files now).
  void forget() noexcept;

  /// Marks exactly the addresses among `claimNames` (the names in ips/) that fall in a bitmap
  /// range; no cursor. The index is then dirty.
  void rebuild(const std::vector<std::string>& claimNames);
  /// The round-robin cursor: the address last handed out from this set, or nullopt.
  [[nodiscard]] const std::optional<net::IpAddress>& cursor() const noexcept { return cursor_; }
  void setCursor(const net::IpAddress& ip);
  /// Marks `ip` held or free, in the first range that holds it; no-op outside bitmap ranges.
  void mark(const net::IpAddress& ip, bool held);

  /// The lowest address in [lo, hi] of range `range` (< rangeCount()) that `claimed` says is free,
  /// or nullopt. Only unmarked addresses are asked about in a bitmap range; one found claimed gets
  /// its mark.
  [[nodiscard]] os::SysResult<std::optional<net::IpAddress>> firstFree(std::size_t range, const net::IpAddress& lo,
                                                                       const net::IpAddress& hi,
                                                                       const ClaimCheck& claimed);

  /// How many addresses are marked.
  [[nodiscard]] std::uint64_t countMarked() const;
  /// Whether a range has no bitmap: counting its held addresses takes the claim names.
  [[nodiscard]] bool hasProbedRange() const;
  /// How many of `claimNames` fall in ranges without a bitmap (once per such range holding it).
  [[nodiscard]] std::uint64_t countInProbedRanges(const std::vector<std::string>& claimNames) const;
  /// Every marked address, range by range in ascending order.
  [[nodiscard]] std::vector<net::IpAddress> marked() const;
  /// Clears the marks `claimed` says have no claim. @return how many.
  [[nodiscard]] os::SysResult<std::size_t> dropUnclaimed(const ClaimCheck& claimed);

  /// The framed index file.
  [[nodiscard]] std::string encode() const;
  /// Loads the framed index file `text`; a corrupt one is an EUCLEAN error naming `path` and `fix`.
  [[nodiscard]] os::SysResult<void> decode(const std::string& text, const std::string& path, const std::string& fix);

 private:
  struct Range {
    U128 start = 0;
    U128 end = 0;
    bool bitmap = false;
    std::vector<std::uint64_t> words;  // bit i: start + i is held
  };

  [[nodiscard]] std::size_t wordsOf(const Range& r) const;
  [[nodiscard]] std::string rangeLine(const Range& r) const;

  std::string id_;    // "set-<16 hex>"
  std::string spec_;  // "start-end,start-end": what the file must describe
  int family_ = 0;
  const IdentSpace* space_;
  std::vector<Range> ranges_;
  std::optional<net::IpAddress> cursor_;
  bool known_ = false;
  bool dirty_ = false;
};

}  // namespace ibcni::ipam
