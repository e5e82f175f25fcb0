// SPDX-License-Identifier: Apache-2.0
#include "ipam/policy/allocator.h"

#include <sys/socket.h>
#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <ctime>
#include <limits>
#include <set>

#include "ibcni/os/time_text.h"
#include "ipam/policy/allocation_text.h"
#include "lib/log/log.h"

namespace ibcni::ipam {

cni::Error storeError(const os::SysError& err, const std::string& action) {
  if (err.err == ETIMEDOUT) {
    return cni::Error{cni::Errc::kTryAgainLater, action + ": the ipam store is locked by another invocation; try again",
                      err.describe()};
  }
  if (err.err == EUCLEAN) {
    return cni::Error{cni::Errc::kIoFailure, action + ": " + err.op, err.describe()};
  }
  return cni::Error{cni::Errc::kIoFailure, action + ": ipam store failure: " + err.op, err.describe()};
}

Allocator::Allocator(const IpamConfig& config, Store& store, os::NetnsChecker& netns, Clock clock)
    : config_(config), space_(spaceOf(config)), store_(store), netns_(netns), clock_(std::move(clock)) {
  if (!clock_) {
    clock_ = [] { return std::chrono::system_clock::now(); };
  }
  // Every subnet's network and (IPv4) broadcast address and every gateway, in every range set:
  // none is ever handed out, whatever range it falls in.
  for (const auto& set : config_.rangeSets) {
    if (set.family == net::kFamilyGuid) {
      continue;  // GUIDs have no network, broadcast or gateway
    }
    for (const auto& r : set.ranges) {
      int fam = r.subnet.address.family;
      U128 first = firstOf(r.subnet);
      U128 last = lastOf(r.subnet);
      forbidden_[fam].push_back({{first, first}, "the network address of " + r.subnet.toString()});
      if (fam == AF_INET) {
        forbidden_[fam].push_back({{last, last}, "the broadcast address of " + r.subnet.toString()});
      }
      U128 gw = toInt(r.gateway);
      forbidden_[fam].push_back({{gw, gw}, "the gateway of " + r.path});
    }
  }
  for (const auto& e : config_.exclude) {
    forbidden_[e.prefix.address.family].push_back(
        {{firstOf(e.prefix), lastOf(e.prefix)}, "excluded by " + e.path + " = " + e.prefix.toString()});
  }
  for (const auto& res : config_.reservations) {
    for (const auto& a : res.addresses) {
      reservedFor_[a] = res.pod;
    }
  }
  // Round-robin walks these intervals: a whole excluded CIDR is one gap, skipped in one step.
  std::map<int, std::vector<Interval>> holes;
  for (const auto& [fam, list] : forbidden_) {
    for (const auto& f : list) {
      holes[fam].push_back(f.span);
    }
  }
  for (const auto& [ip, pod] : reservedFor_) {
    holes[ip.family].push_back({toInt(ip), toInt(ip)});
  }
  for (auto& [fam, list] : holes) {
    list = normalized(std::move(list));
  }
  for (const auto& set : config_.rangeSets) {
    std::vector<std::vector<Interval>> perRange;
    for (const auto& r : set.ranges) {
      perRange.push_back(subtract({toInt(r.rangeStart), toInt(r.rangeEnd)}, holes[set.family]));
    }
    allowed_.push_back(std::move(perRange));
  }
}

std::vector<RangeSetSpans> Allocator::spansOf(const IpamConfig& config) {
  std::vector<RangeSetSpans> out;
  for (const auto& set : config.rangeSets) {
    RangeSetSpans spans;
    for (const auto& r : set.ranges) {
      spans.push_back({r.rangeStart, r.rangeEnd});
    }
    out.push_back(std::move(spans));
  }
  return out;
}

std::string Allocator::now() const { return os::rfc3339(clock_()); }

cni::Result<StoreLock> Allocator::lockStore() {
  auto lock = StoreLock::acquire(store_);
  if (!lock) {
    return std::unexpected(storeError(lock.error(), "cannot lock the ipam store"));
  }
  if (blocks_ != nullptr) {
    if (auto b = blocks_->begin(); !b) {
      return std::unexpected(b.error());
    }
  }
  return std::move(*lock);
}

std::vector<Interval> Allocator::allowed(std::size_t set) const {
  std::vector<Interval> all;
  for (const auto& ivs : allowed_.at(set)) {
    all.insert(all.end(), ivs.begin(), ivs.end());
  }
  return normalized(std::move(all));
}

cni::Result<std::vector<Allocation>> Allocator::list() {
  auto lock = lockStore();
  if (!lock) {
    return std::unexpected(lock.error());
  }
  auto all = store_.list();
  if (!all) {
    return std::unexpected(storeError(all.error(), "cannot list allocations"));
  }
  return std::move(*all);
}

std::optional<std::size_t> Allocator::setOf(const net::IpAddress& ip) const {
  for (std::size_t s = 0; s < config_.rangeSets.size(); ++s) {
    if (config_.rangeSets[s].find(ip) != nullptr) {
      return s;
    }
  }
  return std::nullopt;
}

Lease Allocator::leaseOf(const net::IpAddress& ip, std::size_t set) const {
  return Lease{ip, set, *config_.rangeSets[set].find(ip)};
}

cni::Result<std::optional<net::IpAddress>> Allocator::roundRobin(std::size_t set) {
  const RangeSet& rs = config_.rangeSets[set];
  const auto& allowed = allowed_[set];
  std::size_t n = rs.ranges.size();
  auto cursor = store_.lastReserved(set);
  if (!cursor) {
    return std::unexpected(storeError(cursor.error(), "cannot allocate from " + rs.path));
  }
  // Start right after the address handed out last (host-local's order), wrapping around once.
  std::size_t startRange = 0;
  U128 startAt = toInt(rs.ranges[0].rangeStart);
  if (*cursor) {
    for (std::size_t r = 0; r < n; ++r) {
      if (rs.ranges[r].contains(**cursor)) {
        startRange = r;
        startAt = toInt(**cursor) + 1;
      }
    }
  }
  struct Segment {
    std::size_t range;
    U128 lo;
    U128 hi;
  };
  std::vector<Segment> segments;
  segments.push_back({startRange, startAt, toInt(rs.ranges[startRange].rangeEnd)});
  for (std::size_t k = 1; k < n; ++k) {
    std::size_t r = (startRange + k) % n;
    segments.push_back({r, toInt(rs.ranges[r].rangeStart), toInt(rs.ranges[r].rangeEnd)});
  }
  if (startAt > toInt(rs.ranges[startRange].rangeStart)) {
    segments.push_back({startRange, toInt(rs.ranges[startRange].rangeStart), startAt - 1});
  }
  for (const auto& seg : segments) {
    if (seg.lo > seg.hi) {
      continue;
    }
    const auto& ivs = allowed[seg.range];
    auto it = std::lower_bound(ivs.begin(), ivs.end(), seg.lo, [](const Interval& i, U128 v) { return i.hi < v; });
    for (; it != ivs.end() && it->lo <= seg.hi; ++it) {
      U128 lo = std::max(it->lo, seg.lo);
      U128 hi = std::min(it->hi, seg.hi);
      if (blocks_ != nullptr) {
        // Cluster mode: only inside the blocks this node holds.
        auto found = firstFreeOwned(set, seg.range, lo, hi);
        if (!found || *found) {
          return found;
        }
        continue;
      }
      auto found = store_.firstFree(set, seg.range, fromInt(lo, rs.family), fromInt(hi, rs.family));
      if (!found) {
        return std::unexpected(storeError(found.error(), "cannot allocate from " + rs.path));
      }
      if (*found) {
        return *found;
      }
    }
  }
  return std::optional<net::IpAddress>();
}

cni::Result<std::optional<net::IpAddress>> Allocator::firstFreeOwned(std::size_t set, std::size_t range, U128 lo,
                                                                      U128 hi) {
  const RangeSet& rs = config_.rangeSets[set];
  const auto& owned = blocks_->owned(set);
  auto it = std::lower_bound(owned.begin(), owned.end(), lo, [](const Interval& i, U128 v) { return i.hi < v; });
  for (; it != owned.end() && it->lo <= hi; ++it) {
    auto found = store_.firstFree(set, range, fromInt(std::max(it->lo, lo), rs.family),
                                  fromInt(std::min(it->hi, hi), rs.family));
    if (!found) {
      return std::unexpected(storeError(found.error(), "cannot allocate from " + rs.path));
    }
    if (*found) {
      return *found;
    }
  }
  return std::optional<net::IpAddress>();
}

cni::Result<std::vector<Allocation>> Allocator::releaseDead(const AttachmentKey* except, bool dryRun) {
  auto all = store_.list();
  if (!all) {
    return std::unexpected(storeError(all.error(), "cannot list allocations"));
  }
  std::vector<Allocation> released;
  for (const auto& a : *all) {
    if ((except != nullptr && a.key == *except) || !a.loanTo.empty()) {
      continue;  // a loan has no network namespace: its borrower gives it back
    }
    if (!reclaimable(a)) {
      continue;
    }
    if (!dryRun) {
      log::info("reclaiming {} of {}: network namespace {} is gone", joinAddresses(a.addresses),
                describeHolder(a.key, a), a.netns);
      if (auto r = store_.release(a.key); !r) {
        return std::unexpected(storeError(r.error(), "cannot release " + a.key.toString()));
      }
    }
    released.push_back(a);
  }
  if (!dryRun) {
    auto orphans = store_.dropOrphans();
    if (!orphans) {
      return std::unexpected(storeError(orphans.error(), "cannot drop orphaned claims"));
    }
  }
  return released;
}

bool Allocator::reclaimable(const Allocation& a) const {
  // Only a namespace positively known to be gone frees the address: kUnknown keeps it, so a live
  // pod is never robbed because its namespace could not be checked.
  return space_.kind != SpaceKind::kGuid && netns_.check(a.netns, a.netnsInode) == os::NetnsLiveness::kGone;
}

cni::Result<bool> Allocator::release(const AttachmentKey& key, const std::string& network, bool exact) {
  auto lock = lockStore();
  if (!lock) {
    return std::unexpected(lock.error());
  }
  if (!network.empty()) {
    auto rec = store_.find(key);
    if (!rec) {
      return std::unexpected(storeError(rec.error(), "cannot read the allocation of " + key.toString()));
    }
    const bool other = *rec && ((*rec)->network.empty() ? exact : (*rec)->network != network);
    if (other) {
      log::info("{} holds addresses of network {} here, not of {}: left alone", key.toString(),
                (*rec)->network.empty() ? "(not recorded)" : (*rec)->network, network);
      return false;
    }
  }
  auto r = store_.release(key);
  if (!r) {
    return std::unexpected(storeError(r.error(), "cannot release " + key.toString()));
  }
  if (auto c = store_.commit(); !c) {
    return std::unexpected(storeError(c.error(), "cannot save the ipam index"));
  }
  return *r;
}

cni::Result<std::vector<Lease>> Allocator::held(const AttachmentKey& key) {
  auto lock = lockStore();
  if (!lock) {
    return std::unexpected(lock.error());
  }
  auto rec = store_.find(key);
  if (!rec) {
    return std::unexpected(storeError(rec.error(), "cannot read the allocation of " + key.toString()));
  }
  std::vector<Lease> out;
  if (!*rec) {
    return out;
  }
  for (const auto& a : (*rec)->addresses) {
    auto owner = store_.ownerOf(a);
    if (!owner) {
      return std::unexpected(storeError(owner.error(), "cannot read the owner of " + a.toString()));
    }
    auto s = setOf(a);
    if (s && *owner && **owner == key) {
      out.push_back(leaseOf(a, *s));
    }
  }
  return out;
}

cni::Result<std::vector<Allocation>> Allocator::gc(const std::vector<AttachmentKey>& valid,
                                                   const std::string& network) {
  auto lock = lockStore();
  if (!lock) {
    return std::unexpected(lock.error());
  }
  std::set<AttachmentKey> keep(valid.begin(), valid.end());
  auto all = store_.list();
  if (!all) {
    return std::unexpected(storeError(all.error(), "cannot list allocations"));
  }
  std::vector<Allocation> released;
  for (const auto& a : *all) {
    // A cluster pool's store is shared by the networks of the pool: a network's GC judges only its
    // own allocations (an allocation recorded before networks were kept is left to DEL and to
    // reclaiming). Loans are the pool's, not any network's.
    const bool others = (blocks_ != nullptr || space_.kind == SpaceKind::kGuid) && a.network != network;
    if (keep.contains(a.key) || others || !a.loanTo.empty()) {
      continue;
    }
    log::info("gc: releasing {} of {}: not in the valid attachments", joinAddresses(a.addresses),
              describeHolder(a.key, a));
    if (auto r = store_.release(a.key); !r) {
      return std::unexpected(storeError(r.error(), "cannot release " + a.key.toString()));
    }
    released.push_back(a);
  }
  if (auto r = store_.dropOrphans(); !r) {
    return std::unexpected(storeError(r.error(), "cannot drop orphaned claims"));
  }
  if (auto c = store_.commit(); !c) {
    return std::unexpected(storeError(c.error(), "cannot save the ipam index"));
  }
  return released;
}

cni::Result<std::vector<Allocation>> Allocator::reclaim(bool dryRun) {
  auto lock = lockStore();
  if (!lock) {
    return std::unexpected(lock.error());
  }
  auto released = releaseDead(nullptr, dryRun);
  if (!released) {
    return std::unexpected(released.error());
  }
  if (auto c = store_.commit(); !c) {
    return std::unexpected(storeError(c.error(), "cannot save the ipam index"));
  }
  return released;
}

AttachmentKey Allocator::loanKey(const net::IpAddress& ip) {
  // "ibcni-loan" and 14 hex digits of a hash of the address: a valid container ID and interface
  // name (lend() checks that the key is not taken by another address).
  std::uint64_t h = 14695981039346656037ULL;  // FNV-1a
  for (const char c : ip.toString()) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  char buf[16];
  std::snprintf(buf, sizeof buf, "l%014llx", static_cast<unsigned long long>(h >> 8U));
  return AttachmentKey{"ibcni-loan", buf};
}

cni::Result<std::optional<net::IpAddress>> Allocator::lend(std::size_t set, const std::string& borrower) {
  auto found = roundRobin(set);
  if (!found || !*found) {
    return found;
  }
  const AttachmentKey key = loanKey(**found);
  auto existing = store_.find(key);
  if (!existing) {
    return std::unexpected(storeError(existing.error(), "cannot read the loan record " + key.toString()));
  }
  if (*existing) {
    return std::optional<net::IpAddress>();  // a hash collision with another loan: lend another time
  }
  Allocation loan{key, {}, {}, 0, now(), {**found}, {}, borrower};
  if (auto r = store_.reserve(loan); !r) {
    return std::unexpected(storeError(r.error(), "cannot record the loan of " + (*found)->toString()));
  }
  if (auto c = store_.commit(); !c) {
    return std::unexpected(storeError(c.error(), "cannot save the ipam index"));
  }
  return found;
}

cni::Result<void> Allocator::recordLent(const net::IpAddress& ip, const std::string& borrower) {
  Allocation loan{loanKey(ip), {}, {}, 0, now(), {ip}, {}, borrower};
  if (auto r = store_.reserve(loan); !r) {
    return std::unexpected(storeError(r.error(), "cannot record the loan of " + ip.toString()));
  }
  if (auto c = store_.commit(); !c) {
    return std::unexpected(storeError(c.error(), "cannot save the ipam index"));
  }
  return {};
}

cni::Result<void> Allocator::returned(const net::IpAddress& ip) {
  if (auto r = store_.release(loanKey(ip)); !r) {
    return std::unexpected(storeError(r.error(), "cannot forget the loan of " + ip.toString()));
  }
  if (auto c = store_.commit(); !c) {
    return std::unexpected(storeError(c.error(), "cannot save the ipam index"));
  }
  return {};
}

cni::Result<std::vector<SetUsage>> Allocator::usageLocked() {
  std::vector<SetUsage> out;
  for (std::size_t s = 0; s < config_.rangeSets.size(); ++s) {
    SetUsage u;
    u.path = config_.rangeSets[s].path;
    for (const auto& ivs : allowed_[s]) {
      u.allocatable += totalSize(ivs);
    }
    auto used = store_.countInUse(s);
    if (!used) {
      return std::unexpected(storeError(used.error(), "cannot count the addresses in use in " + u.path));
    }
    u.inUse = *used;
    // Whether round-robin would find anything: held addresses may include reserved and requested
    // ones outside `allocatable`, so ask the store rather than subtract.
    auto found = roundRobin(s);
    if (!found) {
      return std::unexpected(found.error());
    }
    if (*found) {
      U128 free = u.allocatable > u.inUse ? u.allocatable - u.inUse : 1;
      u.freeCount = free > std::numeric_limits<std::uint64_t>::max() ? std::numeric_limits<std::uint64_t>::max()
                                                                     : static_cast<std::uint64_t>(free);
      u.freeCount = std::max<std::uint64_t>(u.freeCount, 1);
    }
    out.push_back(u);
  }
  return out;
}

cni::Result<std::vector<std::size_t>> Allocator::exhausted() {
  auto lock = lockStore();
  if (!lock) {
    return std::unexpected(lock.error());
  }
  std::vector<std::size_t> out;
  for (std::size_t s = 0; s < config_.rangeSets.size(); ++s) {
    auto found = roundRobin(s);
    if (!found) {
      return std::unexpected(found.error());
    }
    if (!*found) {
      out.push_back(s);
    }
  }
  if (auto c = store_.commit(); !c) {
    return std::unexpected(storeError(c.error(), "cannot save the ipam index"));
  }
  return out;
}

cni::Result<std::vector<SetUsage>> Allocator::usage() {
  auto lock = lockStore();
  if (!lock) {
    return std::unexpected(lock.error());
  }
  auto u = usageLocked();
  if (!u) {
    return u;
  }
  // Looking for a free address may have repaired the store's index: keep that.
  if (auto c = store_.commit(); !c) {
    return std::unexpected(storeError(c.error(), "cannot save the ipam index"));
  }
  return u;
}

}  // namespace ibcni::ipam
