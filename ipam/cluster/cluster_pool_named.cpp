// SPDX-License-Identifier: Apache-2.0
// ClusterPool: the addresses ADD is asked for by name (requested by a pod, reserved for one), and
// what ADD says when the pool has no room left.
#include <algorithm>

#include "ipam/cluster/cluster_pool.h"
#include "ibcni/os/time_text.h"

namespace ibcni::ipam {

namespace {

using State = LedgerEntry::State;

std::string ownerOf(const AttachmentKey& key) { return key.containerId + ":" + key.ifName; }

}  // namespace

cni::Result<void> ClusterPool::claimNamed(const net::IpAddress& ip, const AttachmentKey& key, const PodRef& pod,
                                          const std::string& what) {
  if (what.starts_with("reserved")) {
    return claimReserved(ip, key, pod, what);
  }
  // A requested address is this node's to give when its block is: inside an owned block (or lent
  // to this node) the node-local store decides; a free block is claimed; another node's block is
  // that node's to hand out from.
  auto blk = grid_.blockOf(ip);
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
  if (block(blk->key) != nullptr) {
    return cni::fail(cni::Errc::kTryAgainLater, what + " " + ip.toString() + " lies in block " + blk->describe() +
                                                    " of pool " + cni::quoted(cluster_.pool) +
                                                    ", which this node is claiming or giving back; try again");
  }
  auto r = claimBlock(**b, *blk, nullptr);
  if (!r) {
    return std::unexpected(r.error());
  }
  if (*r) {
    return cni::fail(cni::Errc::kTryAgainLater,
                     what + " " + ip.toString() + " lies in block " + blk->describe() + " of pool " +
                         cni::quoted(cluster_.pool) + ", which node " + (*r)->node +
                         " holds and hands out from; a pod can name " + std::string(grid_.space().aNoun) +
                         " of a block no node holds or this node holds" +
                         (grid_.space().kind == SpaceKind::kIp
                              ? ", or use ipam.reservations (reserved addresses are skipped by every node)"
                              : ""));
  }
  return {};
}

// A reserved address is skipped by every node's allocator: only the pod it is reserved for gets it,
// wherever it lies; its own claim keeps it to one node at a time (a pod recreated on another node
// before its predecessor's DEL). The claim names the pod: the pod's next sandbox adopts it.
cni::Result<void> ClusterPool::claimReserved(const net::IpAddress& ip, const AttachmentKey& key, const PodRef& pod,
                                             const std::string& what) {
  const std::string name = nameOf(ip);
  const ClaimAttrs attrs{ownerOf(key), pod.toString(), ""};
  if (LedgerEntry* e = address(name); e != nullptr && e->state == State::kOwned && e->attrs == attrs) {
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
  std::erase_if(ledger_.addresses, [&](const LedgerEntry& e) { return e.name == name; });
  ledger_.addresses.push_back(LedgerEntry{State::kIntent, 0, name, attrs, {}, {},
                                          os::rfc3339(wallClock_()), bootClock_(), {}});
  if (auto s = save(); !s) {
    return s;
  }
  const auto forget = [&] {
    std::erase_if(ledger_.addresses, [&](const LedgerEntry& e) { return e.name == name; });
    return save();
  };
  auto outcome = be.claim(ClaimKind::kAddress, bpool(), name, node_, attrs);
  if (outcome && outcome->state == ClaimState::kHeldByOther && outcome->holder.lapsed) {
    // Its holder may be gone for good (a StatefulSet pod recreated after its node was deleted).
    outcome = be.takeOver(ClaimKind::kAddress, bpool(), name, node_, outcome->holder, attrs);
  }
  if (!outcome) {
    if (!retryable(outcome.error())) {
      (void)forget();
    }
    return std::unexpected(backendError(outcome.error(), "claiming " + what + " " + ip.toString()));
  }
  if (outcome->state == ClaimState::kHeldByOther) {
    (void)forget();
    const auto& h = outcome->holder;
    return cni::fail(cni::Errc::kTryAgainLater,
                     what + " " + ip.toString() + " is held in pool " + cni::quoted(cluster_.pool) + " by node " +
                         h.node + (h.attrs.pod.empty() ? "" : " for pod " + h.attrs.pod) + " (" + h.attrs.owner +
                         "); it is given out once that attachment is deleted (that node's agent gives it back) or "
                         "that node is gone (its Node deleted)");
  }
  LedgerEntry* e = address(name);
  e->state = State::kOwned;
  e->identity = outcome->holder.identity;
  e->version = outcome->holder.version;
  if (auto s = save(); !s) {
    return s;
  }
  if (auto c = confirmAdopted(outcome->state); !c) {
    return c;
  }
  return stillDefined(be, ClaimKind::kAddress, name, attrs.owner);
}

cni::Error ClusterPool::exhausted(std::size_t set) {
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
  const IdentSpace& space = grid_.space();
  const std::string head = "no free " + std::string(space.noun) + " in pool " + cni::quoted(cluster_.pool) + " (" +
                           rs.path + " = " + rs.describe() + "): node " + node_ + " holds " + std::to_string(count) +
                           " block(s) of " + std::to_string(grid_.blockSize()) + " " + std::string(space.nouns) +
                           (mine.empty() ? "" : " (" + mine + ")") + ", all in use, and none of the pool's " +
                           toDecimal(grid_.count(set)) + " blocks is free";
  if (asked_) {
    return cni::Error{cni::Errc::kTryAgainLater,
                      head + "; the nodes holding blocks were asked to give back empty ones or lend " +
                          std::string(space.nouns) +
                          " (their agents do within one reconcileInterval): the runtime's retry gets one",
                      {}};
  }
  return cni::Error{kIpamExhausted,
                    head + ", and the nodes holding blocks had none to give back or lend since they were asked " +
                        std::to_string(cluster_.leaseDuration.count()) +
                        " s ago and more: the pool is full. `ibcni-ipam pools` lists the blocks and their holders; "
                        "to make the pool larger see ipam/README.md \"Changing a pool\"",
                    {}};
}

}  // namespace ibcni::ipam
