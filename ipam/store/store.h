// SPDX-License-Identifier: Apache-2.0
// The storage seam of the embedded IPAM: the policy (allocator.h) decides which address to hand
// out, a Store remembers who holds what. FileStore keeps it on disk; tests use FakeStore.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "ipam/policy/allocation.h"
#include "ibcni/net/ip.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::ipam {

/// The first and last address of one configured range (ipam.ranges[i][j]).
struct RangeSpan {
  net::IpAddress start;
  net::IpAddress end;
  bool operator==(const RangeSpan&) const = default;
};

/// The ranges of one range set, in configuration order. A store is built with the network's
/// range sets, and its per-set calls take an index into them.
using RangeSetSpans = std::vector<RangeSpan>;

/// Who holds which address, for one network. Every call except lock() must be made between
/// lock() and unlock(); everything done in between is one critical section against every other
/// process using the same network.
///
/// Errors are OS-level (SysError): ETIMEDOUT when the lock stayed busy, EUCLEAN when a stored
/// file is corrupt (op names the file), EEXIST when reserve() finds an address claimed by another
/// attachment, else the errno of the failing call.
class Store {
 public:
  virtual ~Store() = default;

  /// Takes the network's exclusive lock, waiting up to the store's timeout.
  [[nodiscard]] virtual os::SysResult<void> lock() = 0;
  /// Releases the lock. Changes not yet committed are kept only as far as they are safe without
  /// commit() (see commit()).
  virtual void unlock() noexcept = 0;

  /// The record of `key`, or nullopt. Its addresses are those the attachment was given, possibly
  /// plus ones it was about to claim when a process died: ownerOf() is the truth per address.
  [[nodiscard]] virtual os::SysResult<std::optional<Allocation>> find(const AttachmentKey& key) = 0;
  /// The attachment that holds `ip`, or nullopt when it is free.
  [[nodiscard]] virtual os::SysResult<std::optional<AttachmentKey>> ownerOf(const net::IpAddress& ip) = 0;

  /// The lowest address in [lo, hi] (inside range `range` of range set `set`) that nobody holds,
  /// or nullopt. Implementations answer without visiting every held address.
  [[nodiscard]] virtual os::SysResult<std::optional<net::IpAddress>> firstFree(std::size_t set, std::size_t range,
                                                                               const net::IpAddress& lo,
                                                                               const net::IpAddress& hi) = 0;
  /// The address most recently handed out from range set `set` (round-robin cursor), or nullopt.
  [[nodiscard]] virtual os::SysResult<std::optional<net::IpAddress>> lastReserved(std::size_t set) = 0;
  /// How many addresses inside the ranges of `set` are held.
  [[nodiscard]] virtual os::SysResult<std::uint64_t> countInUse(std::size_t set) = 0;

  /// Records `allocation` for its key, replacing an earlier record, claims each of its addresses,
  /// releases addresses the earlier record held that `allocation` no longer lists, and moves the
  /// cursor of each range set to the address newly claimed in it. Fails with EEXIST (nothing
  /// changed) when an address is held by another attachment.
  [[nodiscard]] virtual os::SysResult<void> reserve(const Allocation& allocation) = 0;
  /// Releases everything `key` holds and forgets its record.
  /// @return false when there was nothing to release.
  [[nodiscard]] virtual os::SysResult<bool> release(const AttachmentKey& key) = 0;
  /// Every record.
  [[nodiscard]] virtual os::SysResult<std::vector<Allocation>> list() = 0;
  /// Repairs what only outside hands can break (a record removed by hand, a restored backup):
  /// drops claims that no record lists, and free-index marks that have no claim. GC and reclaiming
  /// call it. @return how many such leftovers were fixed.
  [[nodiscard]] virtual os::SysResult<std::size_t> dropOrphans() = 0;
  /// Makes the cursor and free-index changes of the critical section durable. reserve() and
  /// release() are already durable on their own; commit() only saves index work.
  [[nodiscard]] virtual os::SysResult<void> commit() = 0;
};

/// Holds a Store's lock for a scope.
class [[nodiscard]] StoreLock {
 public:
  /// @return the lock() error.
  [[nodiscard]] static os::SysResult<StoreLock> acquire(Store& store) {
    if (auto r = store.lock(); !r) {
      return std::unexpected(r.error());
    }
    return StoreLock(store);
  }
  StoreLock(StoreLock&& other) noexcept : store_(other.store_) { other.store_ = nullptr; }
  StoreLock& operator=(StoreLock&&) = delete;
  StoreLock(const StoreLock&) = delete;
  StoreLock& operator=(const StoreLock&) = delete;
  ~StoreLock() {
    if (store_ != nullptr) {
      store_->unlock();
    }
  }

 private:
  explicit StoreLock(Store& store) : store_(&store) {}
  Store* store_;
};

}  // namespace ibcni::ipam
