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
#include "lib/log/log.h"

namespace ibcni::ipam {

namespace {

constexpr cni::Errc kBad = cni::Errc::kInvalidConfig;

std::string joinAddresses(const std::vector<net::IpAddress>& v) {
  std::string out;
  for (const auto& a : v) {
    out += (out.empty() ? "" : ", ") + a.toString();
  }
  return out;
}

std::string describeHolder(const AttachmentKey& key, const std::optional<Allocation>& rec) {
  std::string out = "containerID " + key.containerId + " ifname " + key.ifName;
  if (rec && !rec->pod.empty()) {
    out += " (pod " + rec->pod.toString() + ")";
  }
  if (rec && !rec->netns.empty()) {
    out += ", netns " + rec->netns;
  }
  return out;
}

}  // namespace

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
    : config_(config), store_(store), netns_(netns), clock_(std::move(clock)) {
  if (!clock_) {
    clock_ = [] { return std::chrono::system_clock::now(); };
  }
  // Every subnet's network and (IPv4) broadcast address and every gateway, in every range set:
  // none is ever handed out, whatever range it falls in.
  for (const auto& set : config_.rangeSets) {
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

cni::Result<void> Allocator::checkRequestable(const net::IpAddress& ip, const std::string& what,
                                              const PodRef& pod) const {
  if (auto it = forbidden_.find(ip.family); it != forbidden_.end()) {
    for (const auto& f : it->second) {
      U128 v = toInt(ip);
      if (f.span.lo <= v && v <= f.span.hi) {
        return cni::fail(kBad, what + " " + ip.toString() + " cannot be handed out: it is " + f.reason);
      }
    }
  }
  if (auto it = reservedFor_.find(ip); it != reservedFor_.end() && it->second != pod.toString()) {
    return cni::fail(kBad, what + " " + ip.toString() + " cannot be handed out: it is reserved for pod " + it->second +
                               " in ipam.reservations");
  }
  return {};
}

// Makes sure `ip` is free for `key`: it is, or `key` holds it already, or its holder's network
// namespace is gone (then the holder is released). A live holder is error 11: the address may
// come free when that pod is deleted (a StatefulSet pod recreated before its predecessor's DEL).
cni::Result<void> Allocator::takeFrom(const net::IpAddress& ip, const AttachmentKey& key, const std::string& what) {
  auto owner = store_.ownerOf(ip);
  if (!owner) {
    return std::unexpected(storeError(owner.error(), "cannot allocate " + ip.toString()));
  }
  if (!*owner || **owner == key) {
    return {};
  }
  auto rec = store_.find(**owner);
  if (!rec) {
    return std::unexpected(storeError(rec.error(), "cannot allocate " + ip.toString()));
  }
  if (*rec && netns_.check((*rec)->netns, (*rec)->netnsInode) == os::NetnsLiveness::kGone) {
    log::info("releasing {} ({}) held by {}: its network namespace is gone", ip.toString(), what,
              describeHolder(**owner, *rec));
    if (auto r = store_.release(**owner); !r) {
      return std::unexpected(storeError(r.error(), "cannot release " + ip.toString()));
    }
    return {};
  }
  return cni::fail(cni::Errc::kTryAgainLater, what + " " + ip.toString() + " is held by " +
                                                  describeHolder(**owner, *rec) +
                                                  "; it can be given out once that attachment is deleted");
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
    // Only a namespace positively known to be gone frees the address: kUnknown keeps it, so a
    // live pod is never robbed because its namespace could not be checked.
    if (netns_.check(a.netns, a.netnsInode) != os::NetnsLiveness::kGone) {
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

cni::Result<std::vector<Lease>> Allocator::allocate(const AddRequest& req) {
  auto lock = lockStore();
  if (!lock) {
    return std::unexpected(lock.error());
  }
  std::size_t nsets = config_.rangeSets.size();
  std::vector<std::optional<net::IpAddress>> chosen(nsets);

  // Idempotent ADD: what the attachment holds already is returned, not allocated again.
  auto existing = store_.find(req.key);
  if (!existing) {
    return std::unexpected(storeError(existing.error(), "cannot read the allocation of " + req.key.toString()));
  }
  std::vector<net::IpAddress> earlier;  // listed by the record but not held (a process died mid-ADD)
  if (*existing && !(*existing)->network.empty() && !req.network.empty() && (*existing)->network != req.network) {
    // A cluster pool's store is shared by its networks: one interface, one network.
    return cni::fail(cni::Errc::kIfNameExists,
                     req.key.toString() + " already holds " + joinAddresses((*existing)->addresses) + " of network " +
                         cni::quoted((*existing)->network) + " in this pool; one interface name, one network: use "
                         "another CNI_IFNAME, or DEL that attachment first");
  }
  if (*existing) {
    for (const auto& a : (*existing)->addresses) {
      auto owner = store_.ownerOf(a);
      if (!owner) {
        return std::unexpected(storeError(owner.error(), "cannot read the owner of " + a.toString()));
      }
      auto s = setOf(a);
      if (!s) {
        continue;  // no longer configured: reserve() below releases it
      }
      if (*owner && **owner == req.key) {
        if (!chosen[*s]) {
          chosen[*s] = a;
        }
      } else if (!*owner) {
        earlier.push_back(a);
      }
    }
    bool complete = std::all_of(chosen.begin(), chosen.end(), [](const auto& c) { return c.has_value(); });
    if (complete && (*existing)->addresses.size() == nsets) {
      std::vector<Lease> out;
      for (std::size_t s = 0; s < nsets; ++s) {
        out.push_back(leaseOf(*chosen[s], s));
      }
      log::debug("{} already holds {}", req.key.toString(), joinAddresses((*existing)->addresses));
      return out;
    }
  }
  if (blocks_ != nullptr) {
    // Cluster mode: only from holds the node can vouch for, under the pool's definition.
    if (auto p = blocks_->prepare(); !p) {
      return std::unexpected(p.error());
    }
  }

  // Requested addresses: each must fall in a range set, at most one per set.
  std::vector<std::optional<net::IpAddress>> wanted(nsets);
  for (const auto& ip : req.requested) {
    std::string what = "requested address (" + req.requestedFrom + ")";
    auto s = setOf(ip);
    if (!s) {
      std::string all;
      for (const auto& set : config_.rangeSets) {
        all += (all.empty() ? "" : "; ") + set.path + " = " + set.describe();
      }
      return cni::fail(kBad, what + " " + ip.toString() + " is not inside any range: " + all);
    }
    if (wanted[*s] && *wanted[*s] != ip) {
      return cni::fail(kBad, what + " " + ip.toString() + " and " + wanted[*s]->toString() + " are both in " +
                                 config_.rangeSets[*s].path + "; an attachment gets one address per range set");
    }
    wanted[*s] = ip;
  }

  const Reservation* reservation = req.pod.empty() ? nullptr : config_.reservationOf(req.pod.toString());
  for (std::size_t s = 0; s < nsets; ++s) {
    if (chosen[s]) {
      continue;
    }
    std::optional<net::IpAddress> target;
    std::string what;
    if (reservation != nullptr) {
      for (const auto& a : reservation->addresses) {
        if (config_.rangeSets[s].find(a) != nullptr) {
          target = a;
          what = "reserved address (" + reservation->path + ")";
        }
      }
      if (target && wanted[s] && *wanted[s] != *target) {
        log::warn("pod {} has {} reserved in {}; ignoring requested address {}", reservation->pod, target->toString(),
                  config_.rangeSets[s].path, wanted[s]->toString());
      }
    }
    if (!target && wanted[s]) {
      target = wanted[s];
      what = "requested address (" + req.requestedFrom + ")";
      if (auto c = checkRequestable(*target, what, req.pod); !c) {
        return std::unexpected(c.error());
      }
    }
    if (target) {
      if (auto t = takeFrom(*target, req.key, what); !t) {
        return std::unexpected(t.error());
      }
      if (blocks_ != nullptr) {
        if (auto c = blocks_->claimNamed(*target, req.key, req.pod, what); !c) {
          return std::unexpected(c.error());
        }
      }
      chosen[s] = target;
      continue;
    }
    // After a process died mid-ADD, prefer what this attachment was about to get.
    for (const auto& a : earlier) {
      auto idx = setOf(a);
      if (idx && *idx == s && checkRequestable(a, "", req.pod) && !reservedFor_.contains(a) &&
          (blocks_ == nullptr || findInterval(blocks_->owned(s), toInt(a)) >= 0)) {
        chosen[s] = a;
        break;
      }
    }
    if (chosen[s]) {
      continue;
    }
    auto found = roundRobin(s);
    if (!found) {
      return std::unexpected(found.error());
    }
    // Cluster mode: the blocks this node holds are full; claim another one (a grown block may be
    // taken up by addresses pods named, hence the loop).
    for (int grown = 0; blocks_ != nullptr && !*found && grown < 4; ++grown) {
      auto more = blocks_->grow(s);
      if (!more) {
        return std::unexpected(more.error());
      }
      if (!*more) {
        break;
      }
      found = roundRobin(s);
      if (!found) {
        return std::unexpected(found.error());
      }
    }
    if (!*found) {
      // Before failing, free what pods whose namespace is gone still hold (DELs that never came).
      auto freed = releaseDead(&req.key, /*dryRun=*/false);
      if (!freed) {
        return std::unexpected(freed.error());
      }
      // Look again even when no pod was released: the store may have repaired leftovers.
      found = roundRobin(s);
      if (!found) {
        return std::unexpected(found.error());
      }
    }
    if (!*found && blocks_ != nullptr) {
      auto e = blocks_->exhausted(s);
      e.details = "allocations whose network namespace is gone were released first";
      return std::unexpected(std::move(e));
    }
    if (!*found) {
      auto use = usageLocked();
      std::string size = use ? toDecimal((*use)[s].allocatable) : "?";
      std::string inUse = use ? std::to_string((*use)[s].inUse) : "?";
      return cni::fail(kIpamExhausted,
                       "no free address in " + config_.rangeSets[s].path + " = " + config_.rangeSets[s].describe() +
                           ": " + size + " addresses can be handed out and " + inUse +
                           " are in use (network and broadcast addresses, gateways, ipam.exclude and "
                           "ipam.reservations are not counted as free); widen the range or delete pods",
                       "allocations whose network namespace is gone were released first");
    }
    chosen[s] = *found;
  }

  Allocation alloc{req.key, req.pod, req.netns, req.netnsInode, now(), {}, req.network, {}};
  for (const auto& c : chosen) {
    alloc.addresses.push_back(*c);
  }
  if (*existing && !(*existing)->createdAt.empty()) {
    alloc.createdAt = (*existing)->createdAt;  // the attachment's age, not this retry's
  }
  if (auto r = store_.reserve(alloc); !r) {
    return std::unexpected(storeError(r.error(), "cannot record the allocation of " + req.key.toString()));
  }
  if (auto r = store_.commit(); !r) {
    return std::unexpected(storeError(r.error(), "cannot save the ipam index"));
  }
  log::info("allocated {} to {}", joinAddresses(alloc.addresses), req.key.toString());
  std::vector<Lease> out;
  for (std::size_t s = 0; s < nsets; ++s) {
    out.push_back(leaseOf(*chosen[s], s));
  }
  return out;
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
    const bool others = blocks_ != nullptr && a.network != network;
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
