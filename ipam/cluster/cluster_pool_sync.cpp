// SPDX-License-Identifier: Apache-2.0
// ClusterPool: bringing the ledger and the backend together, for ADD and for the periodic pass
// (I3 of ipam/README.md "Cluster safety": every difference is acted on, every change saved before
// the next backend call).
#include <algorithm>
#include <map>

#include "ipam/cluster/cluster_pool.h"
#include "ibcni/os/time_text.h"
#include "lib/log/log.h"

namespace ibcni::ipam {

namespace {

using State = LedgerEntry::State;

bool holds(State s) { return s == State::kOwned || s == State::kReleasing; }

}  // namespace

std::vector<HeldClaim> ClusterPool::heldClaims() const {
  std::vector<HeldClaim> out;
  for (const auto& e : ledger_.blocks) {
    if (holds(e.state)) {
      out.push_back(HeldClaim{ClaimKind::kBlock, e.name, e.identity, e.version});
    }
  }
  for (const auto& e : ledger_.addresses) {
    if (holds(e.state)) {
      out.push_back(HeldClaim{ClaimKind::kAddress, e.name, e.identity, e.version});
    }
  }
  return out;
}

// Takes the backend's word for which claims of the kinds listed (`listedBlocks`,
// `listedAddresses`: `mine` holds every such claim of this node) are this node's: intents it holds
// become owned, the other intents are dropped; claims it lists as this node's that the ledger
// lacks (a ledger lost with a reboot, a process killed between a claim and its ledger write) are
// adopted.
cni::Result<void> ClusterPool::syncWith(const std::vector<Claim>& mine, bool listedBlocks, bool listedAddresses,
                                        std::vector<std::string>* adopted) {
  std::map<std::string, const Claim*> blocks;
  std::map<std::string, const Claim*> addresses;
  for (const auto& c : mine) {
    (c.kind == ClaimKind::kBlock ? blocks : addresses)[c.name] = &c;
  }
  const auto settle = [&](std::vector<LedgerEntry>& list, const std::map<std::string, const Claim*>& byName,
                          const char* what) {
    std::erase_if(list, [&](LedgerEntry& e) {
      if (e.state != State::kIntent) {
        return false;
      }
      auto it = byName.find(e.name);
      if (it == byName.end()) {
        log::info("pool {}: the claim of {} {} did not happen; forgotten", cluster_.pool, what, e.name);
        return true;
      }
      const Holder& h = it->second->holder;
      e = LedgerEntry{State::kOwned, e.set, e.name, h.attrs, h.identity, h.version, e.claimedAt, bootClock_(), {}};
      log::info("pool {}: {} {} was claimed (its answer was lost): adopted", cluster_.pool, what, e.name);
      if (adopted != nullptr) {
        adopted->push_back(e.name);
      }
      return false;
    });
    for (const auto& [name, c] : byName) {
      const bool known = std::any_of(list.begin(), list.end(), [&](const auto& e) { return e.name == name; });
      if (known) {
        continue;
      }
      const auto blk = c->kind == ClaimKind::kBlock ? grid_.byKey(name) : std::nullopt;
      const std::string claimedAt = c->holder.claimedAt ? os::rfc3339(*c->holder.claimedAt) : std::string();
      list.push_back(LedgerEntry{State::kOwned, blk ? blk->set : 0, name, c->holder.attrs, c->holder.identity,
                                 c->holder.version, claimedAt, bootClock_(), {}});
      log::info("pool {}: {} {} is this node's in the backend: adopted", cluster_.pool, what, name);
      if (adopted != nullptr) {
        adopted->push_back(name);
      }
    }
  };
  if (listedBlocks) {
    settle(ledger_.blocks, blocks, "block");
  }
  if (listedAddresses) {
    settle(ledger_.addresses, addresses, "address");
  }
  recompute();
  return save();
}

cni::Result<void> ClusterPool::applyRenewal(BlockBackend& be, const std::vector<HeldClaim>& held,
                                            const RenewOutcome& renewed, PoolMaintenance& out) {
  if (renewed.livenessRenewed) {
    out.livenessRenewed = true;
    log::warn("pool {}: node {}'s liveness in the backend had lapsed (nothing renewed it for longer than "
              "leaseDurationSeconds {} s: is the node agent running?); granted anew, and each hold checked",
              cluster_.pool, node_, cluster_.leaseDuration.count());
  }
  for (std::size_t i = 0; i < held.size() && i < renewed.claims.size(); ++i) {
    const HoldCheck& check = renewed.claims[i];
    auto& list = held[i].kind == ClaimKind::kBlock ? ledger_.blocks : ledger_.addresses;
    auto it = std::find_if(list.begin(), list.end(), [&](const auto& e) { return e.name == held[i].name; });
    if (it == list.end()) {
      continue;
    }
    const char* what = held[i].kind == ClaimKind::kBlock ? "block" : "address";
    if (check.state == HoldCheck::State::kKept) {
      it->version = check.now.version;
      it->identity = it->identity.empty() ? check.now.identity : it->identity;
      continue;
    }
    if (it->state == State::kReleasing) {
      list.erase(it);  // being given back, and gone or another's: nothing left to give back
      continue;
    }
    const bool loan = !it->attrs.lender.empty();
    if (check.state == HoldCheck::State::kGone && !loan) {
      // Gone (an etcd restore, a hand): claimed again if free, its intent written first.
      it->state = State::kIntent;
      it->since = bootClock_();
      const LedgerEntry e = *it;
      if (auto s = save(); !s) {
        return s;
      }
      auto again = be.claim(held[i].kind, bpool(), e.name, node_, e.attrs);
      it = std::find_if(list.begin(), list.end(), [&](const auto& x) { return x.name == e.name; });
      if (!again) {
        log::warn("pool {}: {} {} was gone; claiming it again failed ({}): resolved by the next pass", cluster_.pool,
                  what, e.name, again.error().describe());
        continue;
      }
      if (again->state != ClaimState::kHeldByOther) {
        *it = LedgerEntry{State::kOwned, e.set, e.name, e.attrs, again->holder.identity, again->holder.version,
                          e.claimedAt, bootClock_(), {}};
        out.reclaimed.push_back(e.name);
        log::warn("pool {}: {} {} was gone from the backend: claimed again", cluster_.pool, what, e.name);
        continue;
      }
    }
    it->state = State::kLost;
    it->since = bootClock_();
    out.lost.push_back(it->name);
    log::error("pool {}: {} {} is {} now: this node hands out nothing more from it", cluster_.pool, what, it->name,
               check.state == HoldCheck::State::kLost ? "node " + check.now.node + "'s" : "gone");
  }
  recompute();
  return save();
}

}  // namespace ibcni::ipam
