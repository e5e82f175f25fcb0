// SPDX-License-Identifier: Apache-2.0
// ADD's side of the allocator: which address of each range set an attachment gets. In order: what
// it holds already, the address its pod's reservation or the request names, what it was about to
// get when a process died mid-ADD, and round-robin (which, in cluster mode, claims more room, and
// on exhaustion frees what dead pods hold first).
#include <algorithm>

#include "ipam/policy/allocation_text.h"
#include "ipam/policy/allocator.h"
#include "lib/log/log.h"

namespace ibcni::ipam {

namespace {

constexpr cni::Errc kBad = cni::Errc::kInvalidConfig;

// A cluster pool's store is shared by its networks: one interface, one network.
cni::Result<void> checkOneNetwork(const Allocation& rec, const AddRequest& req) {
  if (!rec.network.empty() && !req.network.empty() && rec.network != req.network) {
    return cni::fail(cni::Errc::kIfNameExists,
                     req.key.toString() + " already holds " + joinAddresses(rec.addresses) + " of network " +
                         cni::quoted(rec.network) + " in this pool; one interface name, one network: use "
                         "another CNI_IFNAME, or DEL that attachment first");
  }
  return {};
}

}  // namespace

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
  if (*rec && reclaimable(**rec)) {
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
cni::Result<Allocator::Recorded> Allocator::recordedOf(const std::optional<Allocation>& rec, const AttachmentKey& key) {
  Recorded out{SetAddresses(config_.rangeSets.size()), {}};
  if (!rec) {
    return out;
  }
  for (const auto& a : rec->addresses) {
    auto owner = store_.ownerOf(a);
    if (!owner) {
      return std::unexpected(storeError(owner.error(), "cannot read the owner of " + a.toString()));
    }
    auto s = setOf(a);
    if (!s) {
      continue;  // no longer configured: reserve() releases it
    }
    if (*owner && **owner == key) {
      if (!out.held[*s]) {
        out.held[*s] = a;
      }
    } else if (!*owner) {
      out.unheld.push_back(a);
    }
  }
  return out;
}

cni::Result<Allocator::SetAddresses> Allocator::wantedPerSet(const AddRequest& req) const {
  SetAddresses wanted(config_.rangeSets.size());
  for (const auto& ip : req.requested) {
    std::string what = "requested " + std::string(space_.noun) + " (" + req.requestedFrom + ")";
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
                                 config_.rangeSets[*s].path + "; an attachment gets one " + std::string(space_.noun) +
                                 " per range set");
    }
    wanted[*s] = ip;
  }
  return wanted;
}

cni::Result<std::optional<net::IpAddress>> Allocator::takeNamed(std::size_t set, const AddRequest& req,
                                                                 const Reservation* reservation,
                                                                 const std::optional<net::IpAddress>& wanted) {
  std::optional<net::IpAddress> target;
  std::string what;
  if (reservation != nullptr) {
    for (const auto& a : reservation->addresses) {
      if (config_.rangeSets[set].find(a) != nullptr) {
        target = a;
        what = "reserved address (" + reservation->path + ")";
      }
    }
    if (target && wanted && *wanted != *target) {
      log::warn("pod {} has {} reserved in {}; ignoring requested address {}", reservation->pod, target->toString(),
                config_.rangeSets[set].path, wanted->toString());
    }
  }
  if (!target && wanted) {
    target = wanted;
    what = "requested " + std::string(space_.noun) + " (" + req.requestedFrom + ")";
    if (auto c = checkRequestable(*target, what, req.pod); !c) {
      return std::unexpected(c.error());
    }
  }
  if (!target) {
    return target;
  }
  if (auto t = takeFrom(*target, req.key, what); !t) {
    return std::unexpected(t.error());
  }
  if (blocks_ != nullptr) {
    if (auto c = blocks_->claimNamed(*target, req.key, req.pod, what); !c) {
      return std::unexpected(c.error());
    }
  }
  return target;
}

std::optional<net::IpAddress> Allocator::resumable(std::size_t set, const std::vector<net::IpAddress>& unheld,
                                                   const PodRef& pod) const {
  for (const auto& a : unheld) {
    auto idx = setOf(a);
    if (idx && *idx == set && checkRequestable(a, "", pod) && !reservedFor_.contains(a) &&
        (blocks_ == nullptr || findInterval(blocks_->owned(set), toInt(a)) >= 0)) {
      return a;
    }
  }
  return std::nullopt;
}

cni::Result<net::IpAddress> Allocator::freeAddress(std::size_t set, const AttachmentKey& key) {
  auto found = roundRobin(set);
  if (!found) {
    return std::unexpected(found.error());
  }
  // Cluster mode: the blocks this node holds are full; claim another one (a grown block may be
  // taken up by addresses pods named, hence the loop).
  for (int grown = 0; blocks_ != nullptr && !*found && grown < 4; ++grown) {
    auto more = blocks_->grow(set);
    if (!more) {
      return std::unexpected(more.error());
    }
    if (!*more) {
      break;
    }
    found = roundRobin(set);
    if (!found) {
      return std::unexpected(found.error());
    }
  }
  if (!*found) {
    // Before failing, free what pods whose namespace is gone still hold (DELs that never came).
    auto freed = releaseDead(&key, /*dryRun=*/false);
    if (!freed) {
      return std::unexpected(freed.error());
    }
    // Look again even when no pod was released: the store may have repaired leftovers.
    found = roundRobin(set);
    if (!found) {
      return std::unexpected(found.error());
    }
  }
  if (!*found) {
    return std::unexpected(noFreeAddress(set));
  }
  return **found;
}

cni::Error Allocator::noFreeAddress(std::size_t set) {
  const bool ip = space_.kind == SpaceKind::kIp;
  const std::string dead = ip ? "allocations whose network namespace is gone were released first" : "";
  if (blocks_ != nullptr) {
    auto e = blocks_->exhausted(set);
    e.details = dead;
    return e;
  }
  auto use = usageLocked();
  std::string size = use ? toDecimal((*use)[set].allocatable) : "?";
  std::string inUse = use ? std::to_string((*use)[set].inUse) : "?";
  return cni::Error{kIpamExhausted,
                    "no free " + std::string(space_.noun) + " in " + config_.rangeSets[set].path + " = " +
                        config_.rangeSets[set].describe() + ": " + size + (ip ? " addresses" : " GUIDs") +
                        " can be handed out and " + inUse + " are in use" +
                        (ip ? " (network and broadcast addresses, gateways, ipam.exclude and "
                              "ipam.reservations are not counted as free)"
                            : "") +
                        "; widen the range or delete pods",
                    dead};
}

cni::Result<void> Allocator::recordAllocation(const AddRequest& req, const std::optional<Allocation>& existing,
                                              const SetAddresses& chosen) {
  Allocation alloc{req.key, req.pod, req.netns, req.netnsInode, now(), {}, req.network, {}};
  for (const auto& c : chosen) {
    alloc.addresses.push_back(*c);
  }
  if (existing && !existing->createdAt.empty()) {
    alloc.createdAt = existing->createdAt;  // the attachment's age, not this retry's
  }
  if (auto r = store_.reserve(alloc); !r) {
    return std::unexpected(storeError(r.error(), "cannot record the allocation of " + req.key.toString()));
  }
  if (auto r = store_.commit(); !r) {
    return std::unexpected(storeError(r.error(), "cannot save the ipam index"));
  }
  log::info("allocated {} to {}", joinAddresses(alloc.addresses), req.key.toString());
  return {};
}

std::vector<Lease> Allocator::leasesOf(const SetAddresses& chosen) const {
  std::vector<Lease> out;
  for (std::size_t s = 0; s < chosen.size(); ++s) {
    out.push_back(leaseOf(*chosen[s], s));
  }
  return out;
}

cni::Result<std::vector<Lease>> Allocator::allocate(const AddRequest& req) {
  auto lock = lockStore();
  if (!lock) {
    return std::unexpected(lock.error());
  }
  // Idempotent ADD: what the attachment holds already is returned, not allocated again.
  auto existing = store_.find(req.key);
  if (!existing) {
    return std::unexpected(storeError(existing.error(), "cannot read the allocation of " + req.key.toString()));
  }
  if (*existing) {
    if (auto n = checkOneNetwork(**existing, req); !n) {
      return std::unexpected(n.error());
    }
  }
  auto recorded = recordedOf(*existing, req.key);
  if (!recorded) {
    return std::unexpected(recorded.error());
  }
  SetAddresses& chosen = recorded->held;
  const bool complete = std::all_of(chosen.begin(), chosen.end(), [](const auto& c) { return c.has_value(); });
  if (*existing && complete && (*existing)->addresses.size() == chosen.size()) {
    log::debug("{} already holds {}", req.key.toString(), joinAddresses((*existing)->addresses));
    return leasesOf(chosen);
  }
  if (blocks_ != nullptr) {
    // Cluster mode: only from holds the node can vouch for, under the pool's definition.
    if (auto p = blocks_->prepare(); !p) {
      return std::unexpected(p.error());
    }
  }
  auto wanted = wantedPerSet(req);
  if (!wanted) {
    return std::unexpected(wanted.error());
  }
  const Reservation* reservation = req.pod.empty() ? nullptr : config_.reservationOf(req.pod.toString());
  for (std::size_t s = 0; s < chosen.size(); ++s) {
    if (chosen[s]) {
      continue;
    }
    auto named = takeNamed(s, req, reservation, (*wanted)[s]);
    if (!named) {
      return std::unexpected(named.error());
    }
    chosen[s] = *named ? *named : resumable(s, recorded->unheld, req.pod);
    if (chosen[s]) {
      continue;
    }
    auto found = freeAddress(s, req.key);
    if (!found) {
      return std::unexpected(found.error());
    }
    chosen[s] = *found;
  }
  if (auto r = recordAllocation(req, *existing, chosen); !r) {
    return std::unexpected(r.error());
  }
  return leasesOf(chosen);
}

}  // namespace ibcni::ipam
