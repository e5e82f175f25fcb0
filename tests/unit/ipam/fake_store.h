// SPDX-License-Identifier: Apache-2.0
// In-memory Store and os::NetnsChecker for unit tests of the IPAM policy.
#pragma once

#include <cerrno>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ibcni/net/address_math.h"
#include "ibcni/os/netns_checker.h"
#include "ipam/store/store.h"

namespace ibcni::ipam::testing {

/// A Store kept in maps. Counts calls so that tests can check the policy's cost, and can be told
/// to fail lock().
class FakeStore final : public Store {
 public:
  explicit FakeStore(std::vector<RangeSetSpans> sets) : sets_(std::move(sets)), cursors_(sets_.size()) {}

  os::SysResult<void> lock() override {
    if (lockError != 0) {
      return os::sysFail(lockError, "lock fake store");
    }
    if (locked_) {
      return os::sysFail(EDEADLK, "fake store locked twice");
    }
    locked_ = true;
    ++locks;
    return {};
  }
  void unlock() noexcept override { locked_ = false; }

  os::SysResult<std::optional<Allocation>> find(const AttachmentKey& key) override {
    if (auto l = requireLock(); !l) {
      return std::unexpected(l.error());
    }
    auto it = records_.find(key);
    if (it == records_.end()) {
      return std::optional<Allocation>();
    }
    return std::optional<Allocation>(it->second);
  }

  os::SysResult<std::optional<AttachmentKey>> ownerOf(const net::IpAddress& ip) override {
    if (auto l = requireLock(); !l) {
      return std::unexpected(l.error());
    }
    auto it = claims_.find(ip);
    if (it == claims_.end()) {
      return std::optional<AttachmentKey>();
    }
    return std::optional<AttachmentKey>(it->second);
  }

  os::SysResult<std::optional<net::IpAddress>> firstFree(std::size_t, std::size_t, const net::IpAddress& lo,
                                                         const net::IpAddress& hi) override {
    if (auto l = requireLock(); !l) {
      return std::unexpected(l.error());
    }
    ++firstFreeCalls;
    // Walk the held addresses from lo: the first gap is the answer.
    U128 v = toInt(lo);
    U128 end = toInt(hi);
    for (auto it = claims_.lower_bound(lo); it != claims_.end() && it->first.family == lo.family; ++it) {
      U128 c = toInt(it->first);
      if (c != v || v > end) {
        break;
      }
      ++v;
    }
    if (v > end || v < toInt(lo)) {
      return std::optional<net::IpAddress>();
    }
    return std::optional<net::IpAddress>(fromInt(v, lo.family));
  }

  os::SysResult<std::optional<net::IpAddress>> lastReserved(std::size_t set) override {
    if (auto l = requireLock(); !l) {
      return std::unexpected(l.error());
    }
    return cursors_.at(set);
  }

  os::SysResult<std::uint64_t> countInUse(std::size_t set) override {
    if (auto l = requireLock(); !l) {
      return std::unexpected(l.error());
    }
    std::uint64_t n = 0;
    for (const auto& [ip, key] : claims_) {
      if (setOf(ip) == set) {
        ++n;
      }
    }
    return n;
  }

  os::SysResult<void> reserve(const Allocation& allocation) override {
    if (auto l = requireLock(); !l) {
      return l;
    }
    for (const auto& a : allocation.addresses) {
      auto it = claims_.find(a);
      if (it != claims_.end() && it->second != allocation.key) {
        return os::sysFail(EEXIST, "address " + a.toString() + " is held by " + it->second.toString());
      }
    }
    if (auto old = records_.find(allocation.key); old != records_.end()) {
      for (const auto& a : old->second.addresses) {
        if (std::find(allocation.addresses.begin(), allocation.addresses.end(), a) == allocation.addresses.end()) {
          claims_.erase(a);
        }
      }
    }
    for (const auto& a : allocation.addresses) {
      if (claims_.emplace(a, allocation.key).second) {
        if (auto s = setOf(a)) {
          cursors_[*s] = a;
        }
      }
    }
    records_[allocation.key] = allocation;
    ++reserves;
    return {};
  }

  os::SysResult<bool> release(const AttachmentKey& key) override {
    if (auto l = requireLock(); !l) {
      return std::unexpected(l.error());
    }
    auto it = records_.find(key);
    if (it == records_.end()) {
      return false;
    }
    for (const auto& a : it->second.addresses) {
      if (auto c = claims_.find(a); c != claims_.end() && c->second == key) {
        claims_.erase(c);
      }
    }
    records_.erase(it);
    return true;
  }

  os::SysResult<std::vector<Allocation>> list() override {
    if (auto l = requireLock(); !l) {
      return std::unexpected(l.error());
    }
    std::vector<Allocation> out;
    for (const auto& [k, a] : records_) {
      out.push_back(a);
    }
    return out;
  }

  os::SysResult<std::size_t> dropOrphans() override { return std::size_t{0}; }

  os::SysResult<void> commit() override { return requireLock(); }

  // Test access.
  [[nodiscard]] const std::map<net::IpAddress, AttachmentKey>& claims() const { return claims_; }
  [[nodiscard]] const std::map<AttachmentKey, Allocation>& records() const { return records_; }
  /// Puts a record and its claims in place directly, as if an earlier ADD had made them.
  void put(const Allocation& a) {
    records_[a.key] = a;
    for (const auto& ip : a.addresses) {
      claims_[ip] = a.key;
    }
  }

  int lockError = 0;
  int locks = 0;
  int reserves = 0;
  int firstFreeCalls = 0;

 private:
  os::SysResult<void> requireLock() const {
    if (!locked_) {
      return os::sysFail(ENOLCK, "fake store used without its lock");
    }
    return {};
  }
  std::optional<std::size_t> setOf(const net::IpAddress& ip) const {
    for (std::size_t s = 0; s < sets_.size(); ++s) {
      for (const auto& r : sets_[s]) {
        if (r.start.family == ip.family && toInt(r.start) <= toInt(ip) && toInt(ip) <= toInt(r.end)) {
          return s;
        }
      }
    }
    return std::nullopt;
  }

  std::vector<RangeSetSpans> sets_;
  std::vector<std::optional<net::IpAddress>> cursors_;
  std::map<net::IpAddress, AttachmentKey> claims_;
  std::map<AttachmentKey, Allocation> records_;
  bool locked_ = false;
};

static_assert(std::is_base_of_v<Store, FakeStore>);

/// A os::NetnsChecker answering from a table of path -> liveness (kUnknown for unlisted paths).
class FakeNetnsChecker final : public os::NetnsChecker {
 public:
  std::uint64_t identify(const std::string& path) override {
    auto it = inodes.find(path);
    return it == inodes.end() ? 0 : it->second;
  }
  os::NetnsLiveness check(const std::string& path, std::uint64_t) override {
    ++checks;
    auto it = state.find(path);
    return it == state.end() ? os::NetnsLiveness::kUnknown : it->second;
  }
  std::map<std::string, os::NetnsLiveness> state;
  std::map<std::string, std::uint64_t> inodes;
  int checks = 0;
};

}  // namespace ibcni::ipam::testing
