// SPDX-License-Identifier: Apache-2.0
// ClusterPool: the pool's definition (I5 of ipam/README.md "Cluster safety"): recorded once in the
// backend, checked against every network's configuration, never overlapping another pool's, and
// replaced only when the pool is drained (`ibcni-ipam pools --redefine`).
#include <algorithm>
#include <functional>

#include "ipam/cluster/cluster_definition.h"
#include "ipam/cluster/cluster_pool.h"
#include "lib/log/log.h"

namespace ibcni::ipam {

// I5/I6: the configuration must give the pool's definition; anything else is refused with the
// field, both networks, and a way that never makes two pools over the same addresses.
cni::Result<void> ClusterPool::checkDefinition() const {
  if (!ledger_.definition) {
    return {};
  }
  return checkAgainst(ledger_.definition->fields, "was defined by " + ledger_.definition->origin, "");
}

// The configuration against the pool's fields `theirs`, which the pool `was` ("was defined by
// network ib0 on node n1"); `more` ends the message.
cni::Result<void> ClusterPool::checkAgainst(const std::string& theirs, const std::string& was,
                                            const std::string& more) const {
  auto diff = compareDefinitions(fields_, theirs);
  if (!diff) {
    return {};
  }
  // A GUID pool's definition is its range and block size (guidRanges, kind: guidPool.range).
  const std::string field = diff->field == "blockSize"                 ? cluster_.poolKeysPath + ".blockSize"
                            : grid_.space().kind == SpaceKind::kIp ? "ipam." + diff->field
                                                                   : config_.rangeSets.front().path;
  return cni::fail(cni::Errc::kInvalidConfig,
                   field + " of network " + cni::quoted(network_) + " is " + diff->mine +
                       ", but pool " + cni::quoted(cluster_.pool) + " (" + cluster_.poolPath + ") " + was + " with " +
                       diff->theirs +
                       ": every network of a pool gives the same ranges, blockSize, reservations and exclude. Give "
                       "this network the pool's values, or change the pool as ipam/README.md \"Changing a pool\" "
                       "says (drain it, then `ibcni-ipam pools CONFIG --redefine`); a new pool name over the same "
                       "addresses is refused" + more);
}

cni::Result<void> ClusterPool::define(BlockBackend& be) {
  if (ledger_.definition) {
    return {};
  }
  // Read first: every node but the pool's first finds it there, and a read is lighter for the
  // backend than a create-if-absent (etcd: a read, not a write through its log).
  auto found = be.definition(bpool());
  if (!found) {
    return std::unexpected(backendError(found.error(), "reading the definition"));
  }
  auto stored = *found ? cni::Result<PoolDefinition>(std::move(**found)) : recordDefinition(be);
  if (!stored) {
    return std::unexpected(stored.error());
  }
  if (stored->closed) {
    return cni::fail(cni::Errc::kTryAgainLater, "pool " + cni::quoted(cluster_.pool) +
                                                    " is being redefined or retired (`ibcni-ipam pools --redefine`, `--retire`): try "
                                                    "again");
  }
  ledger_.definition = LedgerDefinition{stored->fields, stored->identity, stored->origin};
  if (auto c = checkDefinition(); !c) {
    ledger_.definition.reset();
    return c;
  }
  // I5 for a definition an older ibcni recorded before it entered the registry: entered now.
  if (auto r = stored->registered ? cni::Result<void>() : registerPool(be, stored->fields, Entry::kReplace); !r) {
    ledger_.definition.reset();
    return r;
  }
  return save();
}

// I5: no two pools over one address. The pool's first definition is entered in the pools' registry
// (checked against every other pool there, by compare-and-swap) before it is recorded, and
// recorded marked so: a node that finds a definition so marked reads no registry. An entry of this
// pool with other ranges (a node about to record its definition, or one that stopped before it
// did) is refused, never replaced: that definition may be recorded next. Once recorded, the entry
// is read again: a `--retire` of the pool meanwhile (it had no definition) took it out, and it is
// entered again; if another pool took the ranges meanwhile, the definition is closed (no node
// claims under it; a claim made is given back) and `--retire` is named.
cni::Result<PoolDefinition> ClusterPool::recordDefinition(BlockBackend& be) {
  if (auto r = registerPool(be, fields_, Entry::kKeep); !r) {
    return std::unexpected(r.error());
  }
  PoolDefinition def{bpool(), fields_, "network " + network_ + " on node " + node_, {}, false, true};
  auto stored = be.definePool(def);
  if (!stored) {
    return std::unexpected(backendError(stored.error(), "recording the definition"));
  }
  if (stored->closed || !stored->registered || stored->fields != fields_) {
    return std::move(*stored);  // as define() finds one recorded
  }
  if (auto again = registerPool(be, stored->fields, Entry::kKeep); !again) {
    PoolDefinition closing = *stored;
    closing.closed = true;
    (void)be.replaceDefinition(closing, stored->identity);
    return std::unexpected(cni::Error{again.error().code,
                                      again.error().msg + "; pool " + cni::quoted(cluster_.pool) +
                                          "'s definition, recorded meanwhile, is closed: `ibcni-ipam pools CONFIG "
                                          "--retire` removes it",
                                      {}});
  }
  return std::move(*stored);
}

// One compare-and-swap change of the pools' registry: `edit` changes what was read and says whether
// there is anything to write (or fails); a write that lost to another node's reads it again.
// `change` names it in the error when the registry kept changing ("entered in it").
cni::Result<void> ClusterPool::changeRegistry(BlockBackend& be, const std::string& change,
                                              const std::function<cni::Result<bool>(PoolRegistry&)>& edit) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto reg = be.registry();
    if (!reg) {
      return std::unexpected(backendError(reg.error(), "reading the pools' registry"));
    }
    auto changed = edit(*reg);
    if (!changed || !*changed) {
      return changed ? cni::Result<void>() : std::unexpected(changed.error());
    }
    auto written = be.writeRegistry(*reg);
    if (!written) {
      return std::unexpected(backendError(written.error(), "writing the pools' registry"));
    }
    if (*written) {
      return {};
    }
  }
  return cni::fail(cni::Errc::kTryAgainLater, "the pools' registry kept changing while pool " +
                                                  cni::quoted(cluster_.pool) + " was " + change + ": try again");
}

cni::Result<void> ClusterPool::registerPool(BlockBackend& be, const std::string& fields, Entry entry) {
  return changeRegistry(be, "entered in it", [&](PoolRegistry& reg) -> cni::Result<bool> {
    auto mine = reg.pools.find(bpool());
    if (mine != reg.pools.end() && mine->second == fields) {
      return false;
    }
    if (mine != reg.pools.end() && entry == Entry::kKeep) {
      auto same = checkAgainst(mine->second, "is entered in the pools' registry",
                               " (if no node uses the pool, `ibcni-ipam pools CONFIG --retire` takes it out)");
      return same ? cni::Result<bool>(false) : std::unexpected(same.error());
    }
    for (const auto& [registered, otherFields] : reg.pools) {
      auto overlap = registered == bpool() ? std::nullopt : overlapOf(fields, otherFields);
      if (overlap) {
        // Definitions of one kind only overlap: the other pool is of this pool's space.
        const std::string other = registered.substr(bpool().size() - cluster_.pool.size());
        return cni::fail(cni::Errc::kInvalidConfig,
                         "pool " + cni::quoted(cluster_.pool) + " (" + cluster_.poolPath + ", network " +
                             cni::quoted(network_) + ") overlaps pool " + cni::quoted(other) +
                             ": both could hand out " + *overlap + "; give this network " + cluster_.poolKeysPath +
                             ".pool " + cni::quoted(other) + " with that pool's ranges, or ranges no other pool has");
      }
    }
    reg.pools[bpool()] = fields;
    return true;
  });
}

cni::Result<void> ClusterPool::refreshDefinition() {
  auto now = storedDefinition();
  if (!now) {
    return std::unexpected(now.error());
  }
  const std::optional<PoolDefinition>& d = now->definition;
  if (!d || d->closed || d->identity != ledger_.definition->identity) {
    ledger_.definition = d && !d->closed ? std::optional(LedgerDefinition{d->fields, d->identity, d->origin})
                                         : std::nullopt;
    return save();
  }
  return {};
}

// A claim made under the definition this node knows stands only if that definition still stands
// (a redefinition closes it first, then checks that the pool holds no claim): else it is given
// back at once, before anything is handed out from it.
cni::Result<void> ClusterPool::stillDefined(BlockBackend& be, ClaimKind kind, const std::string& name,
                                            const std::string& owner) {
  auto d = be.definition(bpool());
  if (!d) {
    return std::unexpected(backendError(d.error(), "reading the definition"));
  }
  if (*d && !(**d).closed && ledger_.definition && (**d).identity == ledger_.definition->identity) {
    return {};
  }
  auto r = be.release(kind, bpool(), name, node_, owner);
  auto& list = kind == ClaimKind::kBlock ? ledger_.blocks : ledger_.addresses;
  if (r) {
    std::erase_if(list, [&](const LedgerEntry& e) { return e.name == name; });
  }
  ledger_.definition.reset();
  if (auto s = save(); !s) {
    return s;
  }
  recompute();
  return cni::fail(cni::Errc::kTryAgainLater, "pool " + cni::quoted(cluster_.pool) +
                                                  " was redefined or retired while this node claimed " + name + ": try again");
}

cni::Result<void> ClusterPool::unregisterPool(BlockBackend& be) {
  return changeRegistry(be, "taken out of it",
                        [&](PoolRegistry& reg) -> cni::Result<bool> { return reg.pools.erase(bpool()) != 0; });
}

// Closed first: from now on no node claims under it (a claim made meanwhile is given back by
// stillDefined); then the pool must hold no claim. On any failure the definition is reopened.
cni::Result<PoolDefinition> ClusterPool::closeDrained(BlockBackend& be, const PoolDefinition& current,
                                                      const std::string& option) {
  PoolDefinition closing = current;
  closing.closed = true;
  auto closed = be.replaceDefinition(closing, current.identity);
  if (!closed || !*closed) {
    return !closed ? std::unexpected(backendError(closed.error(), "closing the definition"))
                   : cni::fail(cni::Errc::kTryAgainLater, "pool " + cni::quoted(cluster_.pool) +
                                                              "'s definition changed meanwhile: try again");
  }
  std::string left;
  std::optional<cni::Error> failed;
  for (auto kind : {ClaimKind::kBlock, ClaimKind::kAddress}) {
    auto claims = be.list(kind, bpool(), std::nullopt);
    if (!claims) {
      failed = backendError(claims.error(), "listing the claims");
      break;
    }
    for (const auto& c : *claims) {
      left += (left.empty() ? "" : ", ") + std::string(claimKindName(kind)) + " " + c.name + " (" + c.holder.node + ")";
    }
  }
  if (!failed && !left.empty()) {
    failed = cni::Error{cni::Errc::kInvalidConfig,
                        "pool " + cni::quoted(cluster_.pool) + " is not drained: " + left +
                            "; delete its pods first (idle nodes give their blocks back after "
                            "releaseAfterSeconds), then " + option + " again",
                        {}};
  }
  if (failed) {
    return reopen(be, current, (**closed).identity, option, std::move(*failed));
  }
  return **closed;
}

std::unexpected<cni::Error> ClusterPool::reopen(BlockBackend& be, const PoolDefinition& current, const std::string& closedIdentity,
                                    const std::string& option, cni::Error why) {
  PoolDefinition open = current;
  open.closed = false;
  if (auto r = be.replaceDefinition(open, closedIdentity); !r || !*r) {
    log::warn("pool {}: its definition could not be reopened: try {} again", cluster_.pool, option);
  }
  return std::unexpected(std::move(why));
}

cni::Result<ClusterPool::StoredDefinition> ClusterPool::storedDefinition() {
  auto b = backend();
  if (!b) {
    return std::unexpected(b.error());
  }
  auto current = (*b)->definition(bpool());
  if (!current) {
    return std::unexpected(backendError(current.error(), "reading the definition"));
  }
  return StoredDefinition{*b, std::move(*current)};
}

cni::Result<PoolDefinition> ClusterPool::redefine() {
  auto now = storedDefinition();
  if (!now) {
    return std::unexpected(now.error());
  }
  BlockBackend& be = *now->backend;
  const std::optional<PoolDefinition>& current = now->definition;
  // Entered in the registry below, before it is recorded.
  PoolDefinition next{bpool(), fields_, "network " + network_ + " on node " + node_ + " (redefined)", {}, false, true};
  if (!current) {
    ledger_.definition.reset();
    if (auto d = define(be); !d) {
      return std::unexpected(d.error());
    }
    return next;
  }
  auto closed = closeDrained(be, *current, "--redefine");
  if (!closed) {
    return std::unexpected(closed.error());
  }
  if (auto r = registerPool(be, fields_, Entry::kReplace); !r) {
    return reopen(be, *current, closed->identity, "--redefine", r.error());
  }
  auto stored = be.replaceDefinition(next, closed->identity);
  if (!stored || !*stored) {
    // The registry names the old ranges again; if it cannot, the old definition reopens unmarked,
    // and every node enters it again.
    PoolDefinition old = *current;
    old.registered = old.registered && registerPool(be, current->fields, Entry::kReplace).has_value();
    return reopen(be, old, closed->identity, "--redefine",
                  !stored ? backendError(stored.error(), "writing the new definition")
                          : cni::Error{cni::Errc::kTryAgainLater, "the definition changed meanwhile: try again", {}});
  }
  ledger_.definition = LedgerDefinition{(**stored).fields, (**stored).identity, (**stored).origin};
  if (auto s = save(); !s) {
    return std::unexpected(s.error());
  }
  log::info("pool {} redefined: {}", cluster_.pool, (**stored).fields);
  return **stored;
}

// Closed, drained, out of the registry (its ranges free for another pool), then its definition
// removed. Once out of the registry it is never reopened: another pool may already have taken its
// ranges, and a closed definition is one no node claims under; a failure after that point leaves
// it closed and --retire again finishes it. A network that still names the pool defines it anew
// on its next ADD (entered in the registry again, or refused if another pool has the ranges).
cni::Result<void> ClusterPool::retire() {
  auto now = storedDefinition();
  if (!now) {
    return std::unexpected(now.error());
  }
  BlockBackend& be = *now->backend;
  if (const std::optional<PoolDefinition>& current = now->definition) {
    auto closed = closeDrained(be, *current, "--retire");
    if (!closed) {
      return std::unexpected(closed.error());
    }
    if (auto u = unregisterPool(be); !u) {
      return u;
    }
    auto removed = be.removeDefinition(bpool(), closed->identity);
    if (!removed || !*removed) {
      return cni::fail(cni::Errc::kTryAgainLater,
                       "pool " + cni::quoted(cluster_.pool) + " is closed and out of the registry, but its definition " +
                           (!removed ? "could not be removed: " + backendError(removed.error(), "removing it").msg
                                     : std::string("changed meanwhile or is kept by finalizers")) +
                           ": run --retire again");
    }
  } else if (auto u = unregisterPool(be); !u) {
    return u;
  }
  ledger_.definition.reset();
  if (auto s = save(); !s) {
    return s;
  }
  log::info("pool {} retired: its ranges are free for another pool", cluster_.pool);
  return {};
}

}  // namespace ibcni::ipam
