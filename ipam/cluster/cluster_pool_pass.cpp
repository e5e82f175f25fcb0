// SPDX-License-Identifier: Apache-2.0
// ClusterPool: the periodic pass (ibcni reconcile, the node agent, ibcni-ipam gc). Under the store's
// lock, in this order: the definition checked, every hold renewed and checked (I2, I3), the
// backend's view of this node synced into the ledger, lost claims reported, what is no longer
// needed marked and given back (confirmed before it leaves the ledger: I3), claims of nodes
// certainly gone taken over (I4), loans settled, other nodes' demand for room served (I7).
// Order: claims of gone nodes are taken, and loans given back are settled, before the empty blocks
// are judged, so that a block taken from a gone node, or one whose last loan just came back, goes
// back by the same rule as any other.

#include <algorithm>
#include <map>
#include <set>

#include "ipam/cluster/cluster_pool.h"
#include "ibcni/os/time_text.h"
#include "lib/log/log.h"

namespace ibcni::ipam {

namespace {

using State = LedgerEntry::State;

/// Loans made less than this ago are not judged returned: their create may still be on its way.
constexpr std::chrono::seconds kLoanGrace{30};
/// Nodes whose blocks one pass tries to take over.
constexpr std::size_t kGoneHoldersPerPass = 4;

std::string describe(const Allocation& a) { return a.pod.empty() ? a.key.toString() : a.pod.toString(); }

}  // namespace

struct ClusterPool::Pass {
  ClusterPool& p;
  BlockBackend& be;
  const std::vector<Allocation>& held;
  LoanBook& loans;
  PoolMaintenance& out;
  std::vector<Claim> blocks;     ///< every block claim of the pool
  std::vector<Claim> addresses;  ///< every address claim of the pool
  std::vector<Demand> demands;
  std::set<std::string> returnedLoans;  ///< loans settled by this pass: no longer in use

  cni::Result<void> run();
  cni::Result<void> checkDefinition();
  cni::Result<void> renew();
  cni::Result<void> list();
  void reportLost();
  void markUnusedAddresses();
  void markEmptyBlocks();
  cni::Result<void> giveBack();
  cni::Result<void> takeOverGone();
  cni::Result<void> takeOverBlock(const Claim& c, bool& gone);
  cni::Result<void> removeGoneBlock(const Claim& c, const Block& blk, bool& gone, const std::string& why);
  [[nodiscard]] std::vector<std::pair<net::IpAddress, std::string>> loansIn(const Claim& c, const Block& blk) const;
  cni::Result<void> settleLoans();
  cni::Result<void> lend();
  cni::Result<void> settleDemand();

  /// Addresses of block `key` in use here (`loansOnly`: lent to other nodes and not given back).
  [[nodiscard]] std::size_t usedIn(const std::string& key, bool loansOnly = false) const;
  [[nodiscard]] bool othersAsk() const;
  [[nodiscard]] cni::Error error(const BackendError& e, const std::string& action) const {
    return p.backendError(e, action);
  }
};

cni::Result<PoolMaintenance> ClusterPool::maintain(const std::vector<Allocation>& held, LoanBook& loans, bool dryRun) {
  if (dryRun) {
    return preview(held);
  }
  auto b = backend();
  if (!b) {
    return std::unexpected(b.error());
  }
  PoolMaintenance out;
  Pass pass{*this, **b, held, loans, out, {}, {}, {}, {}};
  if (auto r = pass.run(); !r) {
    return std::unexpected(r.error());
  }
  return out;
}

cni::Result<void> ClusterPool::Pass::run() {
  for (auto step : {&Pass::checkDefinition, &Pass::renew, &Pass::list}) {
    if (auto r = (this->*step)(); !r) {
      return r;
    }
  }
  reportLost();
  for (auto step : {&Pass::takeOverGone, &Pass::settleLoans}) {
    if (auto r = (this->*step)(); !r) {
      return r;
    }
  }
  markUnusedAddresses();
  markEmptyBlocks();
  for (auto step : {&Pass::giveBack, &Pass::lend, &Pass::settleDemand}) {
    if (auto r = (this->*step)(); !r) {
      return r;
    }
  }
  p.recompute();
  return p.save();
}

// The pool's definition still the one this node checked: a definition gone or replaced (an etcd
// restore, a redefinition) is checked again by the next ADD.
cni::Result<void> ClusterPool::Pass::checkDefinition() {
  if (!p.ledger_.definition) {
    return {};
  }
  auto d = be.definition(p.bpool());
  if (!d) {
    return std::unexpected(error(d.error(), "reading the definition"));
  }
  if (*d && (*d)->identity == p.ledger_.definition->identity) {
    return {};
  }
  log::warn("pool {}: its definition in the backend is {}: the next ADD checks it again", p.cluster_.pool,
            *d ? "another one now" : "gone");
  p.ledger_.definition.reset();
  return p.save();
}

cni::Result<void> ClusterPool::Pass::renew() {
  const auto claims = p.heldClaims();
  const auto sent = p.bootClock_();
  auto renewed = be.renew(p.node_, p.bpool(), claims);
  if (!renewed) {
    return std::unexpected(error(renewed.error(), "renewing this node's claims"));
  }
  if (auto a = p.applyRenewal(be, claims, *renewed, out); !a) {
    return a;
  }
  p.ledger_.confirmed = sent;
  out.renewed = out.lost.empty() && out.reclaimed.empty();
  return p.save();
}

// The pool as the backend has it (its blocks, its address claims, the nodes asking for room), and
// this node's part of it synced into the ledger.
cni::Result<void> ClusterPool::Pass::list() {
  auto b = be.list(ClaimKind::kBlock, p.bpool(), std::nullopt);
  if (!b) {
    return std::unexpected(error(b.error(), "listing the blocks"));
  }
  auto a = be.list(ClaimKind::kAddress, p.bpool(), std::nullopt);
  if (!a) {
    return std::unexpected(error(a.error(), "listing the address claims"));
  }
  auto d = be.demands(p.bpool());
  if (!d) {
    return std::unexpected(error(d.error(), "listing the demands"));
  }
  blocks = std::move(*b);
  addresses = std::move(*a);
  demands = std::move(*d);
  std::vector<Claim> mine;
  for (const auto* list : {&blocks, &addresses}) {
    std::copy_if(list->begin(), list->end(), std::back_inserter(mine),
                 [&](const Claim& c) { return c.holder.node == p.node_; });
  }
  return p.syncWith(mine, true, true, &out.adopted);
}

std::size_t ClusterPool::Pass::usedIn(const std::string& key, bool loansOnly) const {
  const auto span = p.grid_.space().spanOfKey(key);
  std::size_t n = 0;
  for (const auto& a : held) {
    const bool loan = !a.loanTo.empty();
    if (loansOnly && !loan) {
      continue;
    }
    n += static_cast<std::size_t>(std::count_if(a.addresses.begin(), a.addresses.end(), [&](const auto& ip) {
      return span && span->contains(ip) && !(loan && returnedLoans.contains(ip.toString()));
    }));
  }
  return n;
}

// A claim another node holds now: the pods still using its addresses may collide with that node's
// (told once, when it is found); the entry goes when no allocation uses it any more.
void ClusterPool::Pass::reportLost() {
  const std::set<std::string> now(out.lost.begin(), out.lost.end());
  std::erase_if(p.ledger_.blocks, [&](const LedgerEntry& e) {
    if (e.state != State::kLost) {
      return false;
    }
    std::string pods;
    const auto span = p.grid_.space().spanOfKey(e.name);
    for (const auto& a : held) {
      for (const auto& ip : a.addresses) {
        if (span && span->contains(ip)) {
          pods += (pods.empty() ? "" : ", ") + ip.toString() + " (" + describe(a) + ")";
        }
      }
    }
    if (now.contains(e.name) && !pods.empty()) {
      log::error("pool {}: pods still using addresses of lost block {} may collide with its holder's: {} (delete "
                 "them to have them readdressed)",
                 p.cluster_.pool, e.name, pods);
    }
    return pods.empty();
  });
  std::erase_if(p.ledger_.addresses, [&](const LedgerEntry& e) {
    return e.state == State::kLost && std::none_of(held.begin(), held.end(), [&](const Allocation& a) {
             return std::any_of(a.addresses.begin(), a.addresses.end(),
                                [&](const auto& ip) { return p.nameOf(ip) == e.name; });
           });
  });
}

// Address claims no attachment holds any more (DEL does not call the backend): named ones at once;
// addresses lent to this node once its own demand is over.
void ClusterPool::Pass::markUnusedAddresses() {
  std::map<std::string, std::string> holderOf;  // address -> "<containerID>:<ifname>"
  for (const auto& a : held) {
    for (const auto& ip : a.addresses) {
      holderOf[p.nameOf(ip)] = a.key.containerId + ":" + a.key.ifName;
    }
  }
  const auto now = p.bootClock_();
  const auto asked = os::elapsed(p.ledger_.askedAt, now);
  const bool stillAsking = asked && *asked < p.cluster_.leaseDuration;
  for (auto& e : p.ledger_.addresses) {
    if (e.state != State::kOwned) {
      continue;
    }
    const auto h = holderOf.find(e.name);
    const bool loan = !e.attrs.lender.empty();
    const bool used = h != holderOf.end() && (loan || h->second == e.attrs.owner);
    if (used || (loan && stillAsking)) {
      continue;
    }
    e.state = State::kReleasing;
    e.since = now;
  }
}

bool ClusterPool::Pass::othersAsk() const {
  return std::any_of(demands.begin(), demands.end(), [&](const Demand& d) { return !d.lapsed && d.node != p.node_; });
}

// Empty blocks go back after releaseAfterSeconds, beyond minBlocksPerNode per range set; at once
// when another node asks for room (I7). A block is empty from when no pod of this node uses it;
// addresses lent out of it keep it until they come back, and do not restart the count.
void ClusterPool::Pass::markEmptyBlocks() {
  const auto now = p.bootClock_();
  const bool asked = othersAsk();
  std::map<std::size_t, std::size_t> perSet;
  for (const auto& e : p.ledger_.blocks) {
    perSet[e.set] += e.state == State::kOwned ? 1 : 0;
  }
  for (auto& e : p.ledger_.blocks) {
    if (e.state != State::kOwned) {
      continue;
    }
    const std::size_t lent = usedIn(e.name, true);
    if (usedIn(e.name) > lent) {
      e.emptySince = {};
      continue;
    }
    if (e.emptySince.empty()) {
      e.emptySince = now;
    }
    if (lent > 0) {
      continue;
    }
    const auto emptyFor = os::elapsed(e.emptySince, now);
    const bool old = emptyFor && *emptyFor >= p.cluster_.releaseAfter;
    const bool spare = perSet[e.set] > p.cluster_.minBlocksPerNode;
    if (asked || (old && spare)) {
      e.state = State::kReleasing;
      e.since = now;
      --perSet[e.set];
    }
  }
}

// Every claim being given back, released; it leaves the ledger only when the backend confirms it
// (released, already gone, or another's), each change saved before the next call.
cni::Result<void> ClusterPool::Pass::giveBack() {
  if (auto s = p.save(); !s) {
    return s;
  }
  for (auto* list : {&p.ledger_.blocks, &p.ledger_.addresses}) {
    const bool isBlock = list == &p.ledger_.blocks;
    for (std::size_t i = 0; i < list->size();) {
      const LedgerEntry e = (*list)[i];
      if (e.state != State::kReleasing) {
        ++i;
        continue;
      }
      auto r = be.release(isBlock ? ClaimKind::kBlock : ClaimKind::kAddress, p.bpool(), e.name, p.node_,
                          e.attrs.owner);
      if (!r || *r == ReleaseOutcome::kPending) {
        log::warn("pool {}: {} {} is not given back yet: {}", p.cluster_.pool, isBlock ? "block" : "address", e.name,
                  r ? "its deletion waits for finalizers" : r.error().describe());
        ++i;
        continue;
      }
      list->erase(list->begin() + static_cast<std::ptrdiff_t>(i));
      (isBlock ? out.released : out.addressesReleased).push_back(e.name);
      log::info("pool {}: {} {} given back", p.cluster_.pool, isBlock ? "block" : "address", e.name);
      if (auto s = p.save(); !s) {
        return s;
      }
    }
  }
  p.recompute();
  return {};
}

// I4: the claims of nodes certainly gone (etcd: forgotten with ibcni-ipam forget-node; Kubernetes:
// Node deleted), taken: blocks taken over (with the addresses their holder lent, still lent) and
// given back when empty; address claims removed. A node not gone is left alone (the backend says).
cni::Result<void> ClusterPool::Pass::takeOverGone() {
  std::set<std::string> tried;
  std::set<std::string> alive;
  for (const auto& c : blocks) {
    if (c.holder.node == p.node_ || !c.holder.lapsed || alive.contains(c.holder.node) ||
        (!tried.contains(c.holder.node) && tried.size() >= kGoneHoldersPerPass)) {
      continue;
    }
    tried.insert(c.holder.node);
    bool gone = false;
    if (auto t = takeOverBlock(c, gone); !t) {
      return t;
    }
    if (!gone) {
      alive.insert(c.holder.node);
    }
  }
  for (const auto& c : addresses) {
    if (c.holder.node == p.node_ || !c.holder.lapsed || alive.contains(c.holder.node)) {
      continue;
    }
    auto r = be.removeGone(ClaimKind::kAddress, p.bpool(), c.name, c.holder);
    if (!r) {
      return std::unexpected(error(r.error(), "removing address " + c.name + " of gone node " + c.holder.node));
    }
    if (*r == ReleaseOutcome::kReleased) {
      out.takenOver.push_back(c.name);
      log::info("pool {}: address {} of node {}, which is gone, removed", p.cluster_.pool, c.name, c.holder.node);
    }
  }
  for (const auto& d : demands) {
    if (d.lapsed && d.node != p.node_) {
      if (auto w = be.withdraw(p.bpool(), d.node); !w) {
        log::warn("pool {}: cannot remove node {}'s old demand: {}", p.cluster_.pool, d.node, w.error().describe());
      }
    }
  }
  return {};
}

cni::Result<void> ClusterPool::Pass::takeOverBlock(const Claim& c, bool& gone) {
  const auto blk = p.grid_.anyByKey(c.name);
  if (!blk) {
    return {};
  }
  if (!p.ledger_.definition) {
    // A claim stands only under the pool's definition, which this node has not checked yet.
    if (auto d = p.define(be); !d) {
      // This node's network disagrees with the pool's definition (it may be the gone node's): it
      // cannot take the block, but it removes it when nothing in it is lent, so that the block
      // does not outlive its holder when every live node disagrees (I4).
      return removeGoneBlock(c, *blk, gone, d.error().msg);
    }
  }
  auto r = p.claimBlock(be, *blk, &c.holder);
  if (!r) {
    return std::unexpected(r.error());
  }
  gone = !*r;
  if (!gone) {
    return {};
  }
  out.takenOver.push_back(c.name);
  // Its holder's loans stay lent: they are this node's loans now.
  for (const auto& [ip, borrower] : loansIn(c, *blk)) {
    if (auto l = loans.recordLent(ip, borrower); !l) {
      return l;
    }
  }
  if (LedgerEntry* e = p.block(c.name); e != nullptr) {
    e->emptySince = {};
  }
  return {};
}

// The addresses block `blk`, held as `c`, lends (each with its borrower), as the list of address
// claims says.
std::vector<std::pair<net::IpAddress, std::string>> ClusterPool::Pass::loansIn(const Claim& c, const Block& blk) const {
  const KeySpan span{blk.cidr.address.family, blk.span};
  std::vector<std::pair<net::IpAddress, std::string>> lent;
  for (const auto& a : addresses) {
    auto ip = p.grid_.space().fromClaimName(a.name);
    if (ip && span.contains(*ip) && a.holder.attrs.lender == c.holder.node) {
      lent.emplace_back(*ip, a.holder.node);
    }
  }
  return lent;
}

cni::Result<void> ClusterPool::Pass::removeGoneBlock(const Claim& c, const Block& blk, bool& gone,
                                                     const std::string& why) {
  if (const auto lent = loansIn(c, blk); !lent.empty()) {
    log::warn("pool {}: block {} of gone node {} lends {}: left to a node that can take it over ({})",
              p.cluster_.pool, c.name, c.holder.node, lent.front().first.toString(), why);
    return {};
  }
  auto r = be.removeGone(ClaimKind::kBlock, p.bpool(), c.name, c.holder);
  if (!r) {
    return std::unexpected(error(r.error(), "removing block " + c.name + " of gone node " + c.holder.node));
  }
  gone = *r != ReleaseOutcome::kNotOurs;
  if (*r == ReleaseOutcome::kReleased) {
    out.takenOver.push_back(c.name);
    log::info("pool {}: block {} of node {}, which is gone, removed (this node cannot take it: {})", p.cluster_.pool,
              c.name, c.holder.node, why);
  }
  return {};
}

// Loans this node made whose borrower gave them back (the address claim is gone): handed out again.
cni::Result<void> ClusterPool::Pass::settleLoans() {
  std::map<std::string, const Claim*> byName;
  for (const auto& c : addresses) {
    byName[c.name] = &c;
  }
  const auto now = p.wallClock_();
  for (const auto& a : held) {
    if (a.loanTo.empty()) {
      continue;
    }
    const auto made = os::parseRfc3339(a.createdAt);
    if (!made || now - *made < p.cluster_.timeout + kLoanGrace) {
      continue;
    }
    for (const auto& ip : a.addresses) {
      const auto it = byName.find(p.nameOf(ip));
      if (it != byName.end()) {
        continue;  // still claimed: lent (or being taken from a gone borrower by a later pass)
      }
      if (auto r = loans.returned(ip); !r) {
        return r;
      }
      returnedLoans.insert(ip.toString());
      out.loansReturned.push_back(ip.toString());
      log::info("pool {}: address {} lent to node {} was given back", p.cluster_.pool, ip.toString(), a.loanTo);
    }
  }
  return {};
}

// I7: a node that asked for room and got no empty block from this pass is lent one address of each
// range set, once per request (a loan recorded here before its claim names the borrower).
cni::Result<void> ClusterPool::Pass::lend() {
  if (!out.released.empty()) {
    return {};  // a block went back: the asking nodes claim it
  }
  for (const auto& d : demands) {
    if (d.lapsed || d.node == p.node_) {
      continue;
    }
    const bool answered = std::any_of(held.begin(), held.end(), [&](const Allocation& a) {
      const auto made = os::parseRfc3339(a.createdAt);
      return a.loanTo == d.node && made && d.requestedAt && *made >= *d.requestedAt;
    });
    if (answered) {
      continue;
    }
    for (std::size_t set = 0; set < p.config_.rangeSets.size(); ++set) {
      auto ip = loans.lend(set, d.node);
      if (!ip) {
        return std::unexpected(ip.error());
      }
      if (!*ip) {
        continue;
      }
      auto c = be.claim(ClaimKind::kAddress, p.bpool(), p.nameOf(**ip), d.node, {{}, {}, p.node_});
      if (!c) {
        log::warn("pool {}: lending {} to node {}: {}", p.cluster_.pool, (*ip)->toString(), d.node,
                  c.error().describe());
        continue;  // settleLoans() hands it out again if the claim never happened
      }
      if (c->state == ClaimState::kHeldByOther) {
        if (auto r = loans.returned(**ip); !r) {
          return r;
        }
        continue;
      }
      out.lent.push_back((*ip)->toString());
      log::info("pool {}: address {} lent to node {}, which asked for room", p.cluster_.pool, (*ip)->toString(), d.node);
    }
  }
  return {};
}

// This node's own demand ends a lease after its last failing ADD.
cni::Result<void> ClusterPool::Pass::settleDemand() {
  if (p.ledger_.demandedAt.empty()) {
    return {};
  }
  const auto ago = os::elapsed(p.ledger_.askedAt, p.bootClock_());
  if (ago && *ago < p.cluster_.leaseDuration) {
    return {};
  }
  if (auto w = be.withdraw(p.bpool(), p.node_); !w) {
    return std::unexpected(error(w.error(), "withdrawing this node's demand"));
  }
  p.ledger_.demandedAt = {};
  p.ledger_.askedAt = {};
  return {};
}

cni::Result<PoolMaintenance> ClusterPool::preview(const std::vector<Allocation>& held) {
  auto b = backend();
  if (!b) {
    return std::unexpected(b.error());
  }
  PoolMaintenance out;
  for (auto kind : {ClaimKind::kBlock, ClaimKind::kAddress}) {
    auto mine = (*b)->list(kind, bpool(), node_);
    if (!mine) {
      return std::unexpected(backendError(mine.error(), "listing this node's claims"));
    }
    auto& ledger = kind == ClaimKind::kBlock ? ledger_.blocks : ledger_.addresses;
    for (const auto& c : *mine) {
      if (std::none_of(ledger.begin(), ledger.end(), [&](const auto& e) { return e.name == c.name; })) {
        out.adopted.push_back(c.name);
      }
    }
    for (const auto& e : ledger) {
      if (e.state == State::kOwned &&
          std::none_of(mine->begin(), mine->end(), [&](const Claim& c) { return c.name == e.name; })) {
        out.lost.push_back(e.name);
      }
    }
  }
  // What the pass would give back: marked on a copy of the ledger.
  const Ledger saved = ledger_;
  struct NoLoans final : LoanBook {
    cni::Result<std::optional<net::IpAddress>> lend(std::size_t, const std::string&) override { return std::nullopt; }
    cni::Result<void> recordLent(const net::IpAddress&, const std::string&) override { return {}; }
    cni::Result<void> returned(const net::IpAddress&) override { return {}; }
  } none;
  Pass pass{*this, **b, held, none, out, {}, {}, {}, {}};
  pass.markUnusedAddresses();
  pass.markEmptyBlocks();
  for (const auto& e : ledger_.blocks) {
    if (e.state == State::kReleasing) {
      out.released.push_back(e.name);
    }
  }
  for (const auto& e : ledger_.addresses) {
    if (e.state == State::kReleasing) {
      out.addressesReleased.push_back(e.name);
    }
  }
  ledger_ = saved;
  recompute();
  return out;
}

}  // namespace ibcni::ipam
