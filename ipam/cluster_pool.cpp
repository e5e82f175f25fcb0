// SPDX-License-Identifier: Apache-2.0
#include "cluster_pool.h"

#include <algorithm>
#include <ctime>
#include <map>
#include <set>
#include <thread>

#include "ibcni/os/random.h"
#include "ibcni/os/time_text.h"
#include "log/log.h"

namespace ibcni::ipam {

namespace {

using os::parseRfc3339;
using os::rfc3339;

constexpr std::size_t kClaimAttempts = 8;  // blocks tried per grow() before giving up on the free ones
constexpr std::size_t kTakeoverHolders = 4;
constexpr std::chrono::seconds kPendingRetry{30};

using State = LedgerEntry::State;



std::string ownerOf(const AttachmentKey& key) { return key.containerId + ":" + key.ifName; }

bool retryable(const BackendError& e) {
  // The claim may have reached the backend: keep the intent, the next call finds out.
  return e.kind == BackendErrc::kTimeout || e.kind == BackendErrc::kUnreachable || e.kind == BackendErrc::kBadAnswer;
}

}  // namespace

ClusterPool::ClusterPool(const config::IpamConfig& config, std::string network, std::string node, std::string dir,
                         const Allocator& allocator, BackendFactory factory, Clock clock)
    : config_(config),
      cluster_(*config.cluster),
      network_(std::move(network)),
      node_(std::move(node)),
      dir_(std::move(dir)),
      factory_(std::move(factory)),
      clock_(std::move(clock)),
      grid_(config, config.cluster->blockSize,
            [&] {
              std::vector<std::vector<Interval>> allowed;
              for (std::size_t s = 0; s < config.rangeSets.size(); ++s) {
                allowed.push_back(allocator.allowed(s));
              }
              return allowed;
            }()),
      owned_(config.rangeSets.size()),
      rng_(os::randomBits()) {
  if (!clock_) {
    clock_ = [] { return std::chrono::system_clock::now(); };
  }
}

std::string ClusterPool::now() const { return rfc3339(clock_()); }

cni::Error ClusterPool::backendError(const BackendError& e, const std::string& action) const {
  return toCniError(e, action + " of pool " + cni::quoted(cluster_.pool) + " (ipam.cluster.backend " +
                           std::string(config::clusterBackendName(cluster_.backend)) + ")");
}

cni::Result<BlockBackend*> ClusterPool::backend() {
  if (backend_) {
    return backend_.get();
  }
  if (!factory_) {
    return cni::fail(cni::Errc::kInvalidEnvironment, "ipam.cluster is not supported by this build of ibcni-ipam");
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

void ClusterPool::recompute() {
  for (auto& o : owned_) {
    o.clear();
  }
  for (const auto& e : ledger_.blocks) {
    if (e.state != State::kOwned) {
      continue;
    }
    auto b = grid_.byKey(e.name);
    if (!b || b->set >= owned_.size()) {
      continue;
    }
    owned_[b->set].push_back(b->span);
  }
  for (auto& o : owned_) {
    o = normalized(std::move(o));
  }
}

const std::vector<Interval>& ClusterPool::owned(std::size_t set) { return owned_.at(set); }

// Takes the backend's word for which blocks are this node's: intents it holds become owned, the
// other intents are dropped; blocks it lists as ours but the ledger lacks (a ledger lost with a
// reboot, a process killed between the claim and the ledger write) are adopted.
cni::Result<void> ClusterPool::reconcileWith(const std::vector<Claim>& mine, std::vector<std::string>* adopted) {
  std::map<std::string, const Claim*> byName;
  for (const auto& c : mine) {
    byName[c.name] = &c;
  }
  std::vector<LedgerEntry> kept;
  std::set<std::string> known;
  for (auto& e : ledger_.blocks) {
    auto it = byName.find(e.name);
    if (e.state == State::kIntent) {
      if (it == byName.end()) {
        log::info("pool {}: the claim of block {} did not happen; forgotten", cluster_.pool, e.name);
        continue;
      }
      e.state = State::kOwned;
      e.version = it->second->holder.version;
      log::info("pool {}: block {} was claimed (its answer was lost): adopted", cluster_.pool, e.name);
      if (adopted != nullptr) {
        adopted->push_back(e.name);
      }
    }
    known.insert(e.name);
    kept.push_back(e);
  }
  for (const auto& c : mine) {
    if (known.contains(c.name)) {
      continue;
    }
    auto b = grid_.byKey(c.name);
    if (!b) {
      log::warn("pool {}: the backend lists block {} as this node's, but the configured ranges have no such block",
                cluster_.pool, c.name);
      continue;
    }
    log::info("pool {}: block {} is this node's in the backend: adopted", cluster_.pool, c.name);
    kept.push_back(LedgerEntry{State::kOwned, b->set, c.name, {}, c.holder.version,
                               c.holder.claimedAt ? rfc3339(*c.holder.claimedAt) : now(), {}});
    if (adopted != nullptr) {
      adopted->push_back(c.name);
    }
  }
  ledger_.blocks = std::move(kept);
  recompute();
  return save();
}

cni::Result<void> ClusterPool::begin() {
  auto read = readLedger(dir_);
  if (!read) {
    return cni::fail(cni::Errc::kIoFailure, "cannot read the block ledger of pool " + cni::quoted(cluster_.pool),
                     read.error().describe());
  }
  if (!*read) {
    ledger_ = Ledger{cluster_.pool, node_, grid_.fingerprint(), network_,
                     std::string(config::clusterBackendName(cluster_.backend)), 0, {}, {}, false, {}};
    fresh_ = true;
    recompute();
    return {};
  }
  ledger_ = std::move(**read);
  fresh_ = false;
  if (ledger_.fingerprint != grid_.fingerprint()) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     "ipam.cluster.pool " + cni::quoted(cluster_.pool) + " (" + cluster_.poolPath + ") is given as " +
                         grid_.fingerprint() + " by network " + cni::quoted(network_) + ", but network " +
                         cni::quoted(ledger_.network) + " set it up on this node as " + ledger_.fingerprint +
                         ": one pool has one set of ranges and one block size; give one of the networks another "
                         "ipam.cluster.pool");
  }
  if (ledger_.node != node_) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     "this node is named " + cni::quoted(node_) + " but its blocks of pool " +
                         cni::quoted(cluster_.pool) + " were claimed as node " + cni::quoted(ledger_.node) +
                         " (ledger " + dir_ + "/" + kLedgerFileName +
                         "); set ipam.cluster.nodeName to the node's Kubernetes name and keep it");
  }
  recompute();
  return {};
}

void ClusterPool::resolvePending() {
  const bool intents =
      std::any_of(ledger_.blocks.begin(), ledger_.blocks.end(), [](const auto& e) { return e.state == State::kIntent; });
  if (!intents) {
    return;
  }
  // A claim whose answer was lost: ask the backend once. When it cannot answer, the owned blocks
  // still serve; the intent is resolved by a later call, and ADDs do not wait on a backend that is
  // down more than once every kPendingRetry (the periodic pass and a claiming ADD still ask).
  const auto t = clock_();
  if (auto last = parseRfc3339(ledger_.pendingCheckedAt); last && t >= *last && t - *last < kPendingRetry) {
    return;
  }
  ledger_.pendingCheckedAt = rfc3339(t);
  (void)save();
  auto b = backend();
  if (!b) {
    log::warn("pool {}: cannot resolve a pending block claim: {}", cluster_.pool, b.error().msg);
    return;
  }
  auto mine = (*b)->listNode(cluster_.pool, node_);
  if (!mine) {
    log::warn("pool {}: cannot resolve a pending block claim: {}", cluster_.pool, mine.error().describe());
    return;
  }
  if (auto r = reconcileWith(*mine, nullptr); !r) {
    log::warn("pool {}: {}", cluster_.pool, r.error().msg);
  }
}

cni::Result<void> ClusterPool::define(BlockBackend& b) {
  if (ledger_.defined) {
    return {};
  }
  PoolDefinition def{grid_.fingerprint(), "network " + network_ + " on node " + node_};
  auto stored = b.definePool(cluster_.pool, def);
  if (!stored) {
    return std::unexpected(backendError(stored.error(), "recording the definition"));
  }
  if (stored->fingerprint != def.fingerprint) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     "ipam.cluster.pool " + cni::quoted(cluster_.pool) + " (" + cluster_.poolPath + ") is given as " +
                         def.fingerprint + " by network " + cni::quoted(network_) + ", but " + stored->origin +
                         " defined it as " + stored->fingerprint +
                         ": one pool has one set of ranges and one block size across the cluster; give this network "
                         "another ipam.cluster.pool or the same ranges and blockSize");
  }
  ledger_.defined = true;
  return {};
}

// One claim (or takeover) of `blk`, its intent written first. @return the other holder when
// another node has it, nullopt when it is this node's now.
cni::Result<std::optional<Holder>> ClusterPool::claimBlock(BlockBackend& be, const Block& blk, const Holder* takeFrom) {
  ledger_.blocks.push_back(LedgerEntry{State::kIntent, blk.set, blk.key, {}, {}, now(), {}});
  if (auto s = save(); !s) {
    ledger_.blocks.pop_back();
    return std::unexpected(s.error());
  }
  auto outcome = takeFrom != nullptr ? be.takeOver(cluster_.pool, blk.key, node_, *takeFrom)
                                     : be.claim(cluster_.pool, blk.key, node_);
  auto entry = [&] {
    return std::find_if(ledger_.blocks.begin(), ledger_.blocks.end(),
                        [&](const LedgerEntry& e) { return e.name == blk.key; });
  };
  if (!outcome) {
    if (!retryable(outcome.error())) {
      ledger_.blocks.erase(entry());
      (void)save();
    }
    return std::unexpected(backendError(outcome.error(), "claiming block " + blk.describe()));
  }
  if (outcome->state == ClaimState::kHeldByOther) {
    ledger_.blocks.erase(entry());
    if (auto s = save(); !s) {
      return std::unexpected(s.error());
    }
    return std::optional<Holder>(outcome->holder);
  }
  auto it = entry();
  it->state = State::kOwned;
  it->version = outcome->holder.version;
  if (auto s = save(); !s) {
    return std::unexpected(s.error());
  }
  recompute();
  log::info("pool {}: block {} claimed{} by node {}", cluster_.pool, blk.describe(),
            takeFrom != nullptr ? " (taken over from node " + takeFrom->node + ", which is gone)" : "", node_);
  return std::optional<Holder>();
}

cni::Result<bool> ClusterPool::grow(std::size_t set) {
  auto b = backend();
  if (!b) {
    return std::unexpected(b.error());
  }
  BlockBackend& be = **b;
  if (auto d = define(be); !d) {
    return std::unexpected(d.error());
  }
  // The pool is listed only when needed: on a node's first claim (its ledger is new: the blocks
  // the backend already gives it are adopted, e.g. after a reboot wiped the data dir), when a
  // claim's answer was lost (its intent is resolved), after a claim lost to another node, or when
  // no candidate is left. In a pool with room, a claim is one
  // call.
  std::set<std::string> taken;
  for (const auto& e : ledger_.blocks) {
    taken.insert(e.name);
  }
  std::optional<std::vector<Claim>> all;
  auto listAll = [&]() -> cni::Result<bool> {
    auto list = be.list(cluster_.pool);
    if (!list) {
      return std::unexpected(backendError(list.error(), "listing the blocks"));
    }
    std::vector<Claim> mine;
    for (const auto& c : *list) {
      taken.insert(c.name);
      if (c.holder.node == node_) {
        mine.push_back(c);
      }
    }
    all = std::move(*list);
    const U128 sizeBefore = totalSize(owned_.at(set));
    std::vector<std::string> adopted;
    if (auto r = reconcileWith(mine, &adopted); !r) {
      return std::unexpected(r.error());
    }
    return totalSize(owned_.at(set)) != sizeBefore;
  };
  const bool pending =
      std::any_of(ledger_.blocks.begin(), ledger_.blocks.end(), [](const auto& e) { return e.state == State::kIntent; });
  if (fresh_ || pending) {
    auto grown = listAll();
    if (!grown || *grown) {
      return grown;
    }
  }
  for (std::size_t attempt = 0; attempt < kClaimAttempts; ++attempt) {
    auto candidates = grid_.candidates(set, taken, 1, rng_);
    if (candidates.empty()) {
      if (all) {
        break;  // none is free: try a takeover below
      }
      auto grown = listAll();
      if (!grown || *grown) {
        return grown;
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
    if (!all) {
      // Another node won it: learn what else is taken, in one call.
      auto grown = listAll();
      if (!grown || *grown) {
        return grown;
      }
    }
    // Back off a little (jitter), so that a crowd of nodes claiming at once spreads out.
    std::uniform_int_distribution<int> jitter(1, 5 * static_cast<int>(attempt + 1));
    std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng_)));
  }
  if (!all || !grid_.candidates(set, taken, 1, rng_).empty()) {
    return cni::fail(cni::Errc::kTryAgainLater, "pool " + cni::quoted(cluster_.pool) + ": " +
                                                    std::to_string(kClaimAttempts) +
                                                    " free blocks were claimed by other nodes first; try again");
  }
  // No free block: a block of a node that is certainly gone can be taken over.
  std::map<std::string, std::vector<const Claim*>> byHolder;
  for (const auto& c : *all) {
    auto blk = grid_.byKey(c.name);
    if (c.holder.node != node_ && blk && blk->set == set) {
      byHolder[c.holder.node].push_back(&c);
    }
  }
  std::vector<std::string> holders;
  for (const auto& [n, list] : byHolder) {
    holders.push_back(n);
  }
  std::shuffle(holders.begin(), holders.end(), rng_);
  for (std::size_t i = 0; i < holders.size() && i < kTakeoverHolders; ++i) {
    for (const Claim* c : byHolder[holders[i]]) {
      auto r = claimBlock(be, *grid_.byKey(c->name), &c->holder);
      if (!r) {
        return std::unexpected(r.error());
      }
      if (*r) {
        break;  // that node is not gone: none of its blocks can be taken
      }
      return true;
    }
  }
  return false;
}

cni::Result<void> ClusterPool::claimNamed(const net::IpAddress& ip, const AttachmentKey& key,
                                          const std::string& what) {
  const std::string name = ip.toString();
  auto blk = grid_.blockOf(ip);
  const bool reserved = what.starts_with("reserved");
  if (!reserved) {
    // A requested address is this node's to give when its block is: inside an owned block the
    // node-local store decides; a free block is claimed (the node then hands out from it too);
    // another node's block is that node's to hand out from.
    if (!blk || findInterval(owned_.at(blk->set), toInt(ip)) >= 0) {
      return {};
    }
    auto b = backend();
    if (!b) {
      return std::unexpected(b.error());
    }
    if (auto d = define(**b); !d) {
      return std::unexpected(d.error());
    }
    auto r = claimBlock(**b, *blk, nullptr);
    if (!r) {
      return std::unexpected(r.error());
    }
    if (*r) {
      return cni::fail(cni::Errc::kTryAgainLater,
                       what + " " + name + " lies in block " + blk->describe() + " of pool " +
                           cni::quoted(cluster_.pool) + ", which node " + (*r)->node +
                           " holds and hands out from; a pod can name an address of a block no node holds or this "
                           "node holds, or use ipam.reservations (reserved addresses are skipped by every node)");
    }
    return {};
  }
  // A reserved address is skipped by every node's allocator: only the pod it is reserved for gets
  // it, wherever it lies; its own claim keeps it to one node at a time (a pod recreated on another
  // node before its predecessor's DEL).
  const std::string owner = ownerOf(key);
  auto existing = std::find_if(ledger_.addresses.begin(), ledger_.addresses.end(),
                               [&](const LedgerEntry& e) { return e.name == name; });
  if (existing != ledger_.addresses.end() && existing->owner == owner && existing->state == State::kOwned) {
    return {};
  }
  auto b = backend();
  if (!b) {
    return std::unexpected(b.error());
  }
  BlockBackend& be = **b;
  if (auto d = define(be); !d) {
    return std::unexpected(d.error());
  }
  if (existing != ledger_.addresses.end() && existing->owner != owner && !existing->version.empty()) {
    // The caller made sure no live attachment of this node holds it: an earlier holder's claim.
    auto rel = be.releaseAddress(cluster_.pool, name, node_, existing->version);
    if (!rel) {
      return std::unexpected(backendError(rel.error(), "giving back address " + name));
    }
  }
  auto forget = [&] {
    std::erase_if(ledger_.addresses, [&](const LedgerEntry& e) { return e.name == name; });
    return save();
  };
  std::erase_if(ledger_.addresses, [&](const LedgerEntry& e) { return e.name == name; });
  ledger_.addresses.push_back(LedgerEntry{State::kIntent, 0, name, owner, {}, now(), {}});
  if (auto s = save(); !s) {
    return std::unexpected(s.error());
  }
  auto outcome = be.claimAddress(cluster_.pool, name, node_, owner);
  if (!outcome) {
    if (!retryable(outcome.error())) {
      (void)forget();
    }
    return std::unexpected(backendError(outcome.error(), "claiming " + what + " " + name));
  }
  if (outcome->state == ClaimState::kHeldByOther) {
    (void)forget();
    return cni::fail(cni::Errc::kTryAgainLater,
                     what + " " + name + " is held in pool " + cni::quoted(cluster_.pool) + " by node " +
                         outcome->holder.node + " (" + outcome->holder.owner +
                         "); it can be given out once that attachment is deleted");
  }
  auto it = std::find_if(ledger_.addresses.begin(), ledger_.addresses.end(),
                         [&](const LedgerEntry& e) { return e.name == name; });
  it->state = State::kOwned;
  it->version = outcome->holder.version;
  return save();
}

std::string ClusterPool::describeFull(std::size_t set) {
  std::string mine;
  std::size_t count = 0;
  for (const auto& e : ledger_.blocks) {
    if (e.state == State::kOwned && e.set == set) {
      auto b = grid_.byKey(e.name);
      mine += (mine.empty() ? "" : ", ") + (b ? b->describe() : e.name);
      ++count;
    }
  }
  const auto& rs = config_.rangeSets.at(set);
  return "no free address in pool " + cni::quoted(cluster_.pool) + " (" + rs.path + " = " + rs.describe() +
         "): node " + node_ + " holds " + std::to_string(count) + " block(s) of " + std::to_string(grid_.blockSize()) +
         " addresses" + (mine.empty() ? "" : " (" + mine + ")") + ", all in use, and none of the pool's " +
         toDecimal(grid_.count(set)) +
         " blocks is free (every other block is held by a live node); widen the range or delete pods "
         "(`ibcni-ipam pools` lists the blocks and their holders)";
}

cni::Result<PoolMaintenance> ClusterPool::maintain(const std::vector<Allocation>& held, bool dryRun) {
  PoolMaintenance out;
  auto b = backend();
  if (!b) {
    return std::unexpected(b.error());
  }
  BlockBackend& be = **b;
  if (auto d = define(be); !d) {
    return std::unexpected(d.error());
  }
  auto mine = be.listNode(cluster_.pool, node_);
  if (!mine) {
    return std::unexpected(backendError(mine.error(), "listing this node's blocks"));
  }
  if (!dryRun) {
    if (auto r = reconcileWith(*mine, &out.adopted); !r) {
      return std::unexpected(r.error());
    }
  }
  // Renewal: the etcd lease's keepalive, or each Lease's renewTime. Claims another node took
  // meanwhile (a long partition, a clock jump) are dropped: nothing more is handed out from them.
  std::vector<ClaimRef> refs;
  for (const auto& e : ledger_.blocks) {
    if (e.state == State::kOwned) {
      refs.push_back(ClaimRef{ClaimKind::kBlock, cluster_.pool, e.name, {}});
    }
  }
  for (const auto& e : ledger_.addresses) {
    if (e.state == State::kOwned) {
      refs.push_back(ClaimRef{ClaimKind::kAddress, cluster_.pool, e.name, e.owner});
    }
  }
  if (!dryRun) {
    auto renewed = be.renew(node_, refs);
    if (!renewed) {
      return std::unexpected(backendError(renewed.error(), "renewing this node's claims"));
    }
    out.renewed = renewed->renewed || renewed->reestablished;
    for (const auto& lost : renewed->lost) {
      const std::string by = lost.holder ? "node " + lost.holder->node : "nobody (it could not be claimed again)";
      if (lost.ref.kind == ClaimKind::kBlock) {
        auto blk = grid_.byKey(lost.ref.name);
        std::string pods;
        for (const auto& a : held) {
          for (const auto& ip : a.addresses) {
            if (blk && toInt(ip) >= blk->span.lo && toInt(ip) <= blk->span.hi && ip.family == blk->cidr.address.family) {
              pods += (pods.empty() ? "" : ", ") + ip.toString() + " (" + (a.pod.empty() ? a.key.toString() : a.pod.toString()) + ")";
            }
          }
        }
        log::error("pool {}: block {} is held by {} now: this node hands out nothing more from it{}", cluster_.pool,
                   lost.ref.name, by,
                   pods.empty() ? std::string()
                                : "; pods still using its addresses may collide with that node's: " + pods +
                                      " (delete them to have them readdressed)");
        std::erase_if(ledger_.blocks, [&](const LedgerEntry& e) { return e.name == lost.ref.name; });
        out.lost.push_back(lost.ref.name);
      } else {
        log::error("pool {}: address {} is held by {} now", cluster_.pool, lost.ref.name, by);
        std::erase_if(ledger_.addresses, [&](const LedgerEntry& e) { return e.name == lost.ref.name; });
      }
    }
  }
  // Address claims whose attachment let the address go (DEL does not call the backend).
  std::map<std::string, std::string> holderOf;  // address -> "<containerID>:<ifname>"
  for (const auto& a : held) {
    for (const auto& ip : a.addresses) {
      holderOf[ip.toString()] = ownerOf(a.key);
    }
  }
  for (auto it = ledger_.addresses.begin(); it != ledger_.addresses.end();) {
    auto h = holderOf.find(it->name);
    if (it->state == State::kOwned && (h == holderOf.end() || h->second != it->owner)) {
      if (!dryRun) {
        auto rel = be.releaseAddress(cluster_.pool, it->name, node_, it->version);
        if (!rel) {
          log::warn("pool {}: cannot give back address {}: {}", cluster_.pool, it->name, rel.error().describe());
          ++it;
          continue;
        }
      }
      out.addressesReleased.push_back(it->name);
      if (!dryRun) {
        it = ledger_.addresses.erase(it);
        continue;
      }
    }
    ++it;
  }
  // Empty blocks are given back after releaseAfter; a node keeps at least one per range set.
  std::map<std::string, std::size_t> used;
  for (const auto& a : held) {
    for (const auto& ip : a.addresses) {
      if (auto blk = grid_.blockOf(ip); blk) {
        ++used[blk->key];
      }
    }
  }
  const auto t = clock_();
  std::vector<std::size_t> perSet(config_.rangeSets.size(), 0);
  for (const auto& e : ledger_.blocks) {
    if (e.state == State::kOwned && e.set < perSet.size()) {
      ++perSet[e.set];
    }
  }
  for (auto it = ledger_.blocks.begin(); it != ledger_.blocks.end();) {
    if (it->state != State::kOwned) {
      ++it;
      continue;
    }
    if (used[it->name] > 0) {
      it->emptySince.clear();
      ++it;
      continue;
    }
    if (it->emptySince.empty()) {
      it->emptySince = rfc3339(t);
    }
    auto since = parseRfc3339(it->emptySince);
    if (since && t - *since >= cluster_.releaseAfter && perSet[it->set] > 1) {
      if (!dryRun) {
        auto rel = be.release(cluster_.pool, it->name, node_, it->version);
        if (!rel) {
          log::warn("pool {}: cannot give back empty block {}: {}", cluster_.pool, it->name, rel.error().describe());
          ++it;
          continue;
        }
        log::info("pool {}: block {} was empty for {} s: given back", cluster_.pool, it->name,
                  cluster_.releaseAfter.count());
      }
      out.released.push_back(it->name);
      --perSet[it->set];
      if (!dryRun) {
        it = ledger_.blocks.erase(it);
        continue;
      }
    }
    ++it;
  }
  if (!dryRun) {
    recompute();
    if (auto s = save(); !s) {
      return std::unexpected(s.error());
    }
  }
  return out;
}

}  // namespace ibcni::ipam
