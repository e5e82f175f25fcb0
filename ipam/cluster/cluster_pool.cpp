// SPDX-License-Identifier: Apache-2.0
// ClusterPool: what ADD does (reading the ledger, the checks before handing out, claiming room).
// Addresses named by pods and the exhaustion message are in cluster_pool_named.cpp, the periodic
// pass is in cluster_pool_pass.cpp, what both share in cluster_pool_sync.cpp.
#include "ipam/cluster/cluster_pool.h"

#include <algorithm>
#include <cerrno>
#include <set>
#include <thread>

#include "ipam/cluster/cluster_definition.h"
#include "ibcni/os/random.h"
#include "ibcni/os/time_text.h"
#include "lib/log/log.h"

namespace ibcni::ipam {

namespace {

using State = LedgerEntry::State;

/// Claims lost to other nodes before a grow() lists the pool's blocks (in a pool a fraction f full, all
/// kDirectClaims are lost with probability f^16: 1.5e-5 at half full, 0.19 at 90 %).
constexpr std::size_t kDirectClaims = 16;
/// Claims lost after the list before grow() gives up on the free blocks (11, try again).
constexpr std::size_t kListedClaims = 8;
constexpr std::chrono::seconds kPendingRetry{30};
/// Clocks of two nodes may run apart by this rate (NTP keeps them far closer): a hold confirmed at
/// s is trusted until s + lease x (1 - 2 kDrift) - margin.
constexpr double kDrift = 1e-3;

std::string seconds(std::chrono::nanoseconds d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
}

}  // namespace

bool ClusterPool::retryable(const BackendError& e) {
  // The claim may have reached the backend: keep the intent, the next call finds out.
  return e.kind == BackendErrc::kTimeout || e.kind == BackendErrc::kUnreachable || e.kind == BackendErrc::kBadAnswer;
}

ClusterPool::ClusterPool(const config::IpamConfig& config, std::string network, std::string node, std::string dir,
                         const Allocator& allocator, BackendFactory factory, BootClock bootClock,
                         WallClock wallClock)
    : config_(config),
      cluster_(*config.cluster),
      network_(std::move(network)),
      node_(std::move(node)),
      dir_(std::move(dir)),
      factory_(std::move(factory)),
      bootClock_(std::move(bootClock)),
      wallClock_(std::move(wallClock)),
      grid_(config, config.cluster->blockSize,
            [&] {
              std::vector<std::vector<Interval>> allowed;
              for (std::size_t s = 0; s < config.rangeSets.size(); ++s) {
                allowed.push_back(allocator.allowed(s));
              }
              return allowed;
            }()),
      fields_(definitionFields(config)),
      owned_(config.rangeSets.size()),
      rng_(os::randomBits()) {
  if (!bootClock_) {
    bootClock_ = [] { return os::bootNow(); };
  }
  if (!wallClock_) {
    wallClock_ = [] { return std::chrono::system_clock::now(); };
  }
}

cni::Error ClusterPool::backendError(const BackendError& e, const std::string& action) const {
  return toCniError(e, action + " of pool " + cni::quoted(cluster_.pool) + " (" + cluster_.path + ".backend " +
                           std::string(config::clusterBackendName(cluster_.backend)) + ")");
}

cni::Result<BlockBackend*> ClusterPool::backend() {
  if (backend_) {
    return backend_.get();
  }
  if (!factory_) {
    return cni::fail(cni::Errc::kInvalidEnvironment, cluster_.path + " is not supported by this build of ibcni-ipam");
  }
  BackendContext ctx{node_, ledger_.etcdLease, [this](std::int64_t id) {
                       ledger_.etcdLease = id;
                       if (auto w = writeLedger(dir_, ledger_); !w) {
                         log::warn("cannot keep the etcd lease {} in {}: {}", id, dir_, w.error().describe());
                       }
                     }};
  auto b = factory_(cluster_, ctx);
  if (!b) {
    return std::unexpected(b.error());
  }
  backend_ = std::move(*b);
  return backend_.get();
}

cni::Result<void> ClusterPool::save() {
  if (auto w = writeLedger(dir_, ledger_); !w) {
    return cni::fail(cni::Errc::kIoFailure, "cannot write the block ledger of pool " + cni::quoted(cluster_.pool),
                     w.error().describe());
  }
  fresh_ = false;
  return {};
}

LedgerEntry* ClusterPool::block(const std::string& key) {
  auto it = std::find_if(ledger_.blocks.begin(), ledger_.blocks.end(), [&](const auto& e) { return e.name == key; });
  return it == ledger_.blocks.end() ? nullptr : &*it;
}

LedgerEntry* ClusterPool::address(const std::string& name) {
  auto it =
      std::find_if(ledger_.addresses.begin(), ledger_.addresses.end(), [&](const auto& e) { return e.name == name; });
  return it == ledger_.addresses.end() ? nullptr : &*it;
}

// Only kOwned claims are handed out from: an intent may not have happened, a block being given
// back or lost is another node's to hand out.
void ClusterPool::recompute() {
  for (auto& o : owned_) {
    o.clear();
  }
  for (const auto& e : ledger_.blocks) {
    if (e.state != State::kOwned) {
      continue;
    }
    if (auto b = grid_.byKey(e.name); b && b->set < owned_.size()) {
      owned_[b->set].push_back(b->span);
    }
  }
  for (const auto& e : ledger_.addresses) {
    if (e.state != State::kOwned || e.attrs.lender.empty()) {
      continue;  // a named address is handed out to its pod by claimNamed, not round-robin
    }
    auto ip = grid_.space().fromClaimName(e.name);
    auto b = ip ? grid_.blockOf(*ip) : std::nullopt;
    if (b && b->set < owned_.size()) {
      owned_[b->set].push_back({toInt(*ip), toInt(*ip)});
    }
  }
  for (auto& o : owned_) {
    o = normalized(std::move(o));
  }
}

const std::vector<Interval>& ClusterPool::owned(std::size_t set) { return owned_.at(set); }

std::chrono::nanoseconds ClusterPool::window() const {
  const auto lease = std::chrono::duration_cast<std::chrono::nanoseconds>(cluster_.leaseDuration);
  const auto margin = std::min<std::chrono::nanoseconds>(std::chrono::seconds(5), lease / 4);
  return std::chrono::duration_cast<std::chrono::nanoseconds>(lease * (1 - 2 * kDrift)) - margin;
}

std::optional<std::chrono::nanoseconds> ClusterPool::confirmedAgo() const {
  return os::elapsed(ledger_.confirmed, bootClock_());
}

cni::Result<void> ClusterPool::begin() {
  asked_ = false;
  auto read = readLedger(dir_);
  if (!read && read.error().err == EUCLEAN) {
    // A corrupt ledger never blocks DEL, GC or ADD: it is set aside and rebuilt from the backend
    // (the node's claims are listed before its first claim).
    auto aside = setLedgerAside(dir_);
    log::warn("pool {}: {}; {}", cluster_.pool, read.error().op,
              aside ? "set aside as " + *aside : "it could not be set aside: " + aside.error().describe());
    read = std::optional<Ledger>();
  }
  if (!read) {
    return cni::fail(cni::Errc::kIoFailure, "cannot read the block ledger of pool " + cni::quoted(cluster_.pool),
                     read.error().describe());
  }
  fresh_ = !*read;
  if (*read) {
    ledger_ = std::move(**read);
  } else {
    ledger_ = Ledger{};
    ledger_.pool = cluster_.pool;
    ledger_.node = node_;
    ledger_.network = network_;
    ledger_.backend = std::string(config::clusterBackendName(cluster_.backend));
  }
  recompute();
  return {};
}

cni::Result<void> ClusterPool::checkIdentity() const {
  if (fresh_ || ledger_.node == node_) {
    return {};
  }
  return cni::fail(cni::Errc::kInvalidConfig,
                   "this node is named " + cni::quoted(node_) + " but its blocks of pool " + cni::quoted(cluster_.pool) +
                       " were claimed as node " + cni::quoted(ledger_.node) + " (ledger " + dir_ + "/" +
                       kLedgerFileName + "); set " + cluster_.path +
                       ".nodeName to the node's Kubernetes name and keep it");
}

cni::Result<void> ClusterPool::prepare() {
  if (auto c = checkIdentity(); !c) {
    return c;
  }
  if (auto c = checkDefinition(); !c) {
    // The configuration differs from the definition this node knows: the pool may have been
    // redefined since (one backend call, on this error's path only).
    if (auto r = refreshDefinition(); !r) {
      return r;
    }
    if (auto again = checkDefinition(); !again) {
      return again;
    }
  }
  if (auto r = resolvePending(); !r) {
    return r;
  }
  return confirm();
}

// Claims whose answer was lost, asked about once: a block by claiming it again (one call each), the
// addresses by listing this node's. When the backend cannot answer, the owned blocks still serve;
// ADDs do not wait on a backend that is down more than once every kPendingRetry.
cni::Result<void> ClusterPool::resolvePending() {
  const auto pending = [](const auto& list) {
    return std::any_of(list.begin(), list.end(), [](const auto& e) { return e.state == State::kIntent; });
  };
  if (!pending(ledger_.blocks) && !pending(ledger_.addresses)) {
    return {};
  }
  const auto now = bootClock_();
  if (auto ago = os::elapsed(ledger_.pendingCheckedAt, now); ago && *ago < kPendingRetry) {
    return {};
  }
  ledger_.pendingCheckedAt = now;
  if (auto s = save(); !s) {
    return s;
  }
  auto b = backend();
  if (!b) {
    return std::unexpected(b.error());
  }
  if (auto s = settleBlockIntents(**b, true); !s || !pending(ledger_.addresses)) {
    return s;
  }
  auto mine = (*b)->list(ClaimKind::kAddress, bpool(), node_);
  if (!mine) {
    log::warn("pool {}: cannot resolve a pending claim: {}", cluster_.pool, mine.error().describe());
    return {};
  }
  return syncWith(*mine, false, true, nullptr);
}

// I2: a node hands out only from holds the backend confirmed within the lease (less a margin);
// past that, one renewal first. When it fails, nothing is handed out (11).
cni::Result<void> ClusterPool::confirm() {
  const bool holds = std::any_of(ledger_.blocks.begin(), ledger_.blocks.end(),
                                 [](const auto& e) { return e.state == State::kOwned; }) ||
                     std::any_of(ledger_.addresses.begin(), ledger_.addresses.end(),
                                 [](const auto& e) { return e.state == State::kOwned; });
  const auto sent = bootClock_();
  const auto ago = os::elapsed(ledger_.confirmed, sent);
  if (!holds || (ago && *ago < window())) {
    return {};
  }
  auto b = backend();
  if (!b) {
    return std::unexpected(b.error());
  }
  const auto held = heldClaims();
  auto renewed = (*b)->renew(node_, bpool(), held);
  if (!renewed) {
    const std::string when = ago ? seconds(*ago) + " ago" : "never on this boot";
    return std::unexpected(backendError(renewed.error(), "confirming that node " + node_ + " still holds its blocks "
                                                         "(last confirmed " + when + ", leaseDurationSeconds " +
                                                         std::to_string(cluster_.leaseDuration.count()) +
                                                         "): nothing is handed out until they are confirmed;"));
  }
  PoolMaintenance ignored;
  if (auto a = applyRenewal(**b, held, *renewed, ignored); !a) {
    return a;
  }
  ledger_.confirmed = sent;
  return save();
}

// I2 for a claim found already this node's (adopted): the claim wrote nothing, so it says nothing
// of the node's liveness. A node back under its name after it was forgotten (forget-node removed
// its registration, its liveness lapsed) would hand out from a block any other node may take over
// as its holder's, gone. Unless a renewal confirmed the holds within the window (the node's
// registration stands for the lease), one renewal confirms the adopted claim first.
cni::Result<void> ClusterPool::confirmAdopted(ClaimState state) {
  return state == ClaimState::kAdopted ? confirm() : cni::Result<void>();
}

// One claim (or takeover) of `blk`, its intent written first. @return the other holder when
// another node has it, nullopt when it is this node's now.
cni::Result<std::optional<Holder>> ClusterPool::claimBlock(BlockBackend& be, const Block& blk, const Holder* takeFrom) {
  const auto sent = bootClock_();
  ledger_.blocks.push_back(
      LedgerEntry{State::kIntent, blk.set, blk.key, {}, {}, {}, os::rfc3339(wallClock_()), sent, {}});
  if (auto s = save(); !s) {
    ledger_.blocks.pop_back();
    return std::unexpected(s.error());
  }
  auto outcome = takeFrom != nullptr ? be.takeOver(ClaimKind::kBlock, bpool(), blk.key, node_, *takeFrom, {})
                                     : be.claim(ClaimKind::kBlock, bpool(), blk.key, node_, {});
  return settleBlock(be, blk, outcome, takeFrom, sent);
}

// The backend's answer to the claim (or takeover) of `blk`, sent at `sent` with its intent in the
// ledger: another node's, or failed for good, the intent is forgotten; a failure that may hide a
// write keeps it; this node's, it is owned (then checked still defined). @return the other holder
// when another node has it, nullopt when it is this node's now.
cni::Result<std::optional<Holder>> ClusterPool::settleBlock(BlockBackend& be, const Block& blk,
                                                            const BackendResult<ClaimOutcome>& outcome,
                                                            const Holder* takeFrom, const os::BootStamp& sent) {
  const auto forget = [&] {
    std::erase_if(ledger_.blocks, [&](const LedgerEntry& e) { return e.name == blk.key; });
    return save();
  };
  if (!outcome) {
    if (!retryable(outcome.error())) {
      (void)forget();
    }
    return std::unexpected(backendError(outcome.error(), "claiming block " + blk.describe()));
  }
  if (outcome->state == ClaimState::kHeldByOther) {
    if (auto s = forget(); !s) {
      return std::unexpected(s.error());
    }
    return std::optional<Holder>(outcome->holder);
  }
  // A node's first claim in the pool is sent before the definition is read (one request less on a
  // fresh node's first ADD): the read after it is both the definition and the check that the claim
  // stands (I5). Until it passes the claim is an intent, and nothing is handed out from it. When it
  // fails, a claim made now is given back; a block that was this node's already (a ledger set aside
  // or lost meets its blocks again) is left held, as the node found it: its pods may still use it.
  const bool checkedAfter = !ledger_.definition;
  if (checkedAfter) {
    if (auto d = define(be); !d) {
      const bool made = outcome->state == ClaimState::kClaimed;
      if (!made || be.release(ClaimKind::kBlock, bpool(), blk.key, node_, "")) {
        (void)forget();
      }
      return std::unexpected(d.error());
    }
  }
  const bool onlyHold = std::none_of(ledger_.blocks.begin(), ledger_.blocks.end(),
                                     [](const auto& x) { return x.state == State::kOwned; }) &&
                        std::none_of(ledger_.addresses.begin(), ledger_.addresses.end(),
                                     [](const auto& x) { return x.state == State::kOwned; });
  LedgerEntry* e = block(blk.key);
  e->state = State::kOwned;
  e->identity = outcome->holder.identity;
  e->version = outcome->holder.version;
  e->since = sent;
  if (onlyHold && outcome->state == ClaimState::kClaimed) {
    ledger_.confirmed = sent;  // a claim made now registers the node: it confirms the node's only hold
  }
  if (auto s = save(); !s) {
    return std::unexpected(s.error());
  }
  if (auto d = checkedAfter ? cni::Result<void>() : stillDefined(be, ClaimKind::kBlock, blk.key, ""); !d) {
    return std::unexpected(d.error());
  }
  recompute();
  log::info("pool {}: block {} {}{} by node {}", cluster_.pool, blk.describe(),
            outcome->state == ClaimState::kAdopted ? "adopted (already this node's)" : "claimed",
            takeFrom != nullptr ? " (taken over from node " + takeFrom->node + ", which is gone)" : "", node_);
  if (auto c = confirmAdopted(outcome->state); !c) {
    return std::unexpected(c.error());
  }
  return std::optional<Holder>();
}

// Block claims whose answer was lost (intents), settled by claiming each again: a claim is
// create-if-absent, so one call on the block's key says whether it is this node's (already, or
// now) or another's, whatever the size of the pool or the number of nodes; no list. `soft`: a
// backend that does not answer leaves them pending (logged) rather than failing the ADD.
cni::Result<void> ClusterPool::settleBlockIntents(BlockBackend& be, bool soft) {
  std::vector<std::string> pending;
  for (const auto& e : ledger_.blocks) {
    if (e.state == State::kIntent) {
      pending.push_back(e.name);
    }
  }
  for (const auto& key : pending) {
    const auto blk = grid_.anyByKey(key);
    if (!blk) {
      log::warn("pool {}: the intent of {} names no block; forgotten", cluster_.pool, key);
      std::erase_if(ledger_.blocks, [&](const LedgerEntry& e) { return e.name == key; });
      if (auto s = save(); !s) {
        return s;
      }
      continue;
    }
    const auto sent = bootClock_();
    auto outcome = be.claim(ClaimKind::kBlock, bpool(), key, node_, {});
    if (!outcome) {
      // Its claim may have happened: the intent stays, whatever the error.
      if (soft) {
        log::warn("pool {}: cannot resolve a pending claim: {}", cluster_.pool, outcome.error().describe());
        return {};
      }
      return std::unexpected(backendError(outcome.error(), "claiming block " + blk->describe()));
    }
    auto r = settleBlock(be, *blk, outcome, nullptr, sent);
    if (!r) {
      return std::unexpected(r.error());
    }
    if (*r) {
      log::info("pool {}: the claim of block {} did not happen (node {} holds it); forgotten", cluster_.pool, key,
                (*r)->node);
    }
  }
  return {};
}

// A free block of range set `set`, claimed. The node tries the blocks in its own order
// (preferenceSeed: the same on every run, so that a node whose ledger was lost meets its blocks
// again, and adopts them), and after a claim lost to another node the next one directly: a claim is
// create-if-absent, so no list is needed for safety, and each call is about one key, whatever the
// number of nodes. The pool is listed only when kDirectClaims claims in a row were lost (a nearly
// full pool) or no candidate is left.
cni::Result<bool> ClusterPool::claimFree(BlockBackend& be, std::size_t set) {
  std::set<std::string> taken;
  for (const auto& e : ledger_.blocks) {
    taken.insert(e.name);
  }
  std::mt19937_64 order(preferenceSeed(node_, set));
  bool listed = false;
  const auto listAll = [&]() -> cni::Result<void> {
    auto list = be.list(ClaimKind::kBlock, bpool(), std::nullopt);
    if (!list) {
      return std::unexpected(backendError(list.error(), "listing the blocks"));
    }
    for (const auto& c : *list) {
      taken.insert(c.name);
    }
    listed = true;
    return {};
  };
  std::size_t lost = 0;
  std::size_t lostListed = 0;
  while (lostListed < kListedClaims) {
    auto candidates = grid_.candidates(set, taken, 1, order);
    if (candidates.empty()) {
      if (listed) {
        return false;
      }
      if (auto l = listAll(); !l) {
        return std::unexpected(l.error());
      }
      continue;
    }
    auto r = claimBlock(be, candidates[0], nullptr);
    if (!r) {
      return std::unexpected(r.error());
    }
    if (!*r) {
      return true;
    }
    taken.insert(candidates[0].key);
    ++lost;
    if (listed) {
      // Lost although the pool was listed: a crowd of nodes claims the last blocks at once. Back off
      // a little (jitter), so that it spreads out.
      ++lostListed;
      std::uniform_int_distribution<int> jitter(1, 5 * static_cast<int>(lostListed));
      std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng_)));
    } else if (lost >= kDirectClaims) {
      if (auto l = listAll(); !l) {  // a nearly full pool: learn what else is taken, in one call
        return std::unexpected(l.error());
      }
    }
  }
  if (!grid_.candidates(set, taken, 1, order).empty()) {
    return cni::fail(cni::Errc::kTryAgainLater, "pool " + cni::quoted(cluster_.pool) + ": " + std::to_string(lost) +
                                                    " free blocks were claimed by other nodes first; try again");
  }
  return false;
}

// Addresses other nodes lent this node (after it asked for room), adopted into the ledger.
cni::Result<bool> ClusterPool::adoptLoans(BlockBackend& be, std::size_t set) {
  auto mine = be.list(ClaimKind::kAddress, bpool(), node_);
  if (!mine) {
    return std::unexpected(backendError(mine.error(), "listing the addresses lent to this node"));
  }
  const U128 before = totalSize(owned_.at(set));
  if (auto s = syncWith(*mine, false, true, nullptr); !s) {
    return std::unexpected(s.error());
  }
  return totalSize(owned_.at(set)) != before;
}

// No room anywhere this node can see: it asks the pool's holders (their agents give back empty
// blocks or lend addresses, within one reconcileInterval). A demand goes on while ADDs keep failing;
// one that went unanswered for a whole lease says the pool is full (exhausted()).
cni::Result<void> ClusterPool::askForRoom(BlockBackend& be) {
  const auto now = bootClock_();
  const auto sinceAsked = os::elapsed(ledger_.askedAt, now);
  if (!sinceAsked || *sinceAsked >= cluster_.leaseDuration) {
    ledger_.demandedAt = now;  // a new demand
  }
  ledger_.askedAt = now;
  if (auto s = save(); !s) {
    return s;
  }
  if (auto d = be.demand(bpool(), node_, 1); !d) {
    return std::unexpected(backendError(d.error(), "asking the pool's holders for room"));
  }
  const auto age = os::elapsed(ledger_.demandedAt, now);
  asked_ = !age || *age < cluster_.leaseDuration;
  return {};
}

cni::Result<bool> ClusterPool::grow(std::size_t set) {
  auto b = backend();
  if (!b) {
    return std::unexpected(b.error());
  }
  BlockBackend& be = **b;
  // A node without claims in the pool claims first and reads the definition after (settleBlock).
  const bool first = !ledger_.definition && ledger_.blocks.empty() && ledger_.addresses.empty();
  if (auto d = first ? cni::Result<void>() : define(be); !d) {
    return std::unexpected(d.error());
  }
  // A claim whose answer was lost is settled before another one is made. A node with a new ledger
  // (a reboot wiped the data dir, a corrupt one was set aside) lists nothing: its first claims, in
  // its own order of the blocks, adopt the blocks it held there; the periodic pass adopts any other
  // (I3), and until then nothing is handed out from them.
  const bool pending = std::any_of(ledger_.blocks.begin(), ledger_.blocks.end(),
                                   [](const auto& e) { return e.state == State::kIntent; });
  if (pending) {
    const U128 before = totalSize(owned_.at(set));
    if (auto s = settleBlockIntents(be, false); !s) {
      return std::unexpected(s.error());
    }
    if (totalSize(owned_.at(set)) != before) {
      return true;
    }
  }
  auto claimed = claimFree(be, set);
  if (!claimed || *claimed) {
    return claimed;
  }
  if (auto d = define(be); !d) {  // a first node that claimed nothing
    return std::unexpected(d.error());
  }
  auto lent = adoptLoans(be, set);
  if (!lent || *lent) {
    return lent;
  }
  if (auto a = askForRoom(be); !a) {
    return std::unexpected(a.error());
  }
  return false;
}

}  // namespace ibcni::ipam
