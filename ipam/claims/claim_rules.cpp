// SPDX-License-Identifier: Apache-2.0
// The claim protocol (claim_rules.h) over a ClaimStore's calls.
#include "ipam/claims/claim_rules.h"

#include <algorithm>
#include <string>
#include <utility>

#include "ipam/claims/backend_support.h"

namespace ibcni::ipam::claims {

namespace {

using backend::checkNames;
using backend::ours;

/// Round trips a changing record gets before the call gives up.
constexpr int kAttempts = 4;

std::string describe(const ClaimRef& ref) {
  return std::string(claimKindName(ref.kind)) + " " + cni::quoted(ref.name) + " of pool " + cni::quoted(ref.pool);
}

/// claim() within the call `c`: create-if-absent, else adopted when it is this node's.
BackendResult<ClaimOutcome> claimIn(StoreCall& c, const ClaimRef& ref, std::string_view node,
                                    const ClaimAttrs& attrs) {
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    auto made = c.create(ref, node, attrs);
    if (!made) {
      return std::unexpected(std::move(made.error()));
    }
    if (made->created) {
      return ClaimOutcome{ClaimState::kClaimed, std::move(*made->holder)};
    }
    if (!made->holder) {
      continue;  // deleted in between: create again
    }
    Holder& h = *made->holder;
    if (!ours(ref.kind, h, node, attrs) || h.deleting) {
      return ClaimOutcome{ClaimState::kHeldByOther, std::move(h)};
    }
    // The same pod's address for its new attachment names it; a block keeps what it said.
    const ClaimAttrs want = ref.kind == ClaimKind::kAddress ? attrs : h.attrs;
    if (h.attrs == want && !h.stale) {
      return ClaimOutcome{ClaimState::kAdopted, std::move(h)};
    }
    auto written = c.update(ref, h, want);
    if (!written) {
      return std::unexpected(std::move(written.error()));
    }
    if (*written) {
      return ClaimOutcome{ClaimState::kAdopted, std::move(**written)};
    }
    // Changed while it was being adopted: look again.
  }
  return std::unexpected(c.changing(describe(ref) + " kept changing during its claim"));
}

/// What a renewal finds of one held claim (`read` as read), rewritten where the store needs it.
BackendResult<HoldCheck> confirm(StoreCall& c, bool renewsClaims, std::string_view node, const ClaimRef& ref,
                                 const HeldClaim& held, std::optional<Holder> read) {
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    HoldCheck check;
    if (!read) {
      return check;  // kGone
    }
    const bool same = read->node == node && (held.identity.empty() || held.identity == read->identity);
    check.state = same ? HoldCheck::State::kKept : HoldCheck::State::kLost;
    if (!same || read->deleting || !(renewsClaims || read->stale)) {
      check.now = std::move(*read);
      return check;
    }
    auto written = c.update(ref, *read, read->attrs);
    if (!written) {
      return std::unexpected(std::move(written.error()));
    }
    if (*written) {
      check.now = std::move(**written);
      return check;
    }
    auto again = c.read(ref);  // changed meanwhile: judged again on what is there now
    if (!again) {
      return std::unexpected(std::move(again.error()));
    }
    read = std::move(*again);
  }
  return std::unexpected(c.changing(describe(ref) + " kept changing during its renewal"));
}

ReleaseOutcome releaseOutcome(Removed r) {
  switch (r) {
    case Removed::kDeleted:
      return ReleaseOutcome::kReleased;
    case Removed::kGone:
      return ReleaseOutcome::kGone;
    case Removed::kPending:
      return ReleaseOutcome::kPending;
    case Removed::kConflict:
      break;
  }
  return ReleaseOutcome::kNotOurs;
}

}  // namespace

ClaimRules::ClaimRules(std::unique_ptr<ClaimStore> store) : store_(std::move(store)) {}

BackendResult<ClaimOutcome> ClaimRules::claim(ClaimKind kind, std::string_view pool, std::string_view name,
                                              std::string_view node, const ClaimAttrs& attrs) {
  if (auto v = checkNames({pool, name, node}); !v) {
    return std::unexpected(v.error());
  }
  return claimIn(*store_->call(), ClaimRef{kind, pool, name}, node, attrs);
}

BackendResult<std::vector<Claim>> ClaimRules::list(ClaimKind kind, std::string_view pool,
                                                   std::optional<std::string_view> node) {
  if (auto v = checkNames({pool}); !v) {
    return std::unexpected(v.error());
  }
  auto claims = store_->call()->list(kind, pool, node);
  if (claims) {
    std::sort(claims->begin(), claims->end(), [](const Claim& x, const Claim& y) { return x.name < y.name; });
  }
  return claims;
}

BackendResult<ReleaseOutcome> ClaimRules::release(ClaimKind kind, std::string_view pool, std::string_view name,
                                                  std::string_view node, std::string_view owner) {
  if (auto v = checkNames({pool, name, node}); !v) {
    return std::unexpected(v.error());
  }
  const ClaimRef ref{kind, pool, name};
  auto c = store_->call();
  // Judged on the state read now, and deleted at exactly that state.
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    auto h = c->read(ref);
    if (!h) {
      return std::unexpected(std::move(h.error()));
    }
    if (!*h) {
      return ReleaseOutcome::kGone;
    }
    if ((**h).node != node || (!owner.empty() && (**h).attrs.owner != owner)) {
      return ReleaseOutcome::kNotOurs;
    }
    if ((**h).deleting) {
      return ReleaseOutcome::kPending;
    }
    auto removed = c->remove(ref, **h);
    if (!removed) {
      return std::unexpected(std::move(removed.error()));
    }
    if (*removed != Removed::kConflict) {
      return releaseOutcome(*removed);
    }
  }
  return std::unexpected(c->changing(describe(ref) + " kept changing during its release"));
}

BackendResult<RenewOutcome> ClaimRules::renew(std::string_view node, std::string_view pool,
                                              const std::vector<HeldClaim>& held) {
  if (auto v = backend::checkRenewal(pool, node, held); !v) {
    return std::unexpected(v.error());
  }
  auto c = store_->call();
  RenewOutcome out;
  auto renewal = c->keepAlive(node, pool, held);
  if (!renewal) {
    return std::unexpected(std::move(renewal.error()));
  }
  out.livenessRenewed = renewal->livenessRenewed;
  for (std::size_t i = 0; i < held.size(); ++i) {
    const ClaimRef ref{held[i].kind, pool, held[i].name};
    auto check = confirm(*c, store_->renewsClaims(), node, ref, held[i], std::move(renewal->held.at(i)));
    if (!check) {
      return std::unexpected(std::move(check.error()));
    }
    out.claims.push_back(std::move(*check));
  }
  return out;
}

BackendResult<ClaimOutcome> ClaimRules::takeOver(ClaimKind kind, std::string_view pool, std::string_view name,
                                                 std::string_view node, const Holder& seen, const ClaimAttrs& attrs) {
  if (auto v = checkNames({pool, name, node}); !v) {
    return std::unexpected(v.error());
  }
  const ClaimRef ref{kind, pool, name};
  auto c = store_->call();
  auto t = c->takeIfGone(ref, seen, node, attrs);
  if (!t) {
    return std::unexpected(std::move(t.error()));
  }
  if (t->taken) {
    return ClaimOutcome{ClaimState::kClaimed, std::move(*t->now)};
  }
  if (!t->now) {
    return claimIn(*c, ref, node, attrs);  // released meanwhile: free, within this call
  }
  const bool mine = ours(kind, *t->now, node, attrs);
  return ClaimOutcome{mine ? ClaimState::kAdopted : ClaimState::kHeldByOther, std::move(*t->now)};
}

BackendResult<ReleaseOutcome> ClaimRules::removeGone(ClaimKind kind, std::string_view pool, std::string_view name,
                                                     const Holder& seen) {
  if (auto v = checkNames({pool, name}); !v) {
    return std::unexpected(v.error());
  }
  auto removed = store_->call()->removeIfGone(ClaimRef{kind, pool, name}, seen);
  if (!removed) {
    return std::unexpected(std::move(removed.error()));
  }
  return releaseOutcome(*removed);
}

BackendResult<PoolDefinition> ClaimRules::definePool(const PoolDefinition& def) {
  if (auto v = checkNames({def.pool}); !v) {
    return std::unexpected(v.error());
  }
  auto c = store_->call();
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    auto stored = c->createDefinition(def);
    if (!stored) {
      return std::unexpected(std::move(stored.error()));
    }
    if (*stored) {
      return std::move(**stored);
    }
  }
  return std::unexpected(c->changing("the definition of pool " + cni::quoted(def.pool) + " kept changing"));
}

BackendResult<std::optional<PoolDefinition>> ClaimRules::definition(std::string_view pool) {
  if (auto v = checkNames({pool}); !v) {
    return std::unexpected(v.error());
  }
  return store_->call()->readDefinition(pool);
}

BackendResult<PoolRegistry> ClaimRules::registry() { return store_->call()->readRegistry(); }

BackendResult<bool> ClaimRules::writeRegistry(const PoolRegistry& registry) {
  return store_->call()->writeRegistry(registry);
}

BackendResult<bool> ClaimRules::removeDefinition(std::string_view pool, std::string_view seen) {
  if (auto v = checkNames({pool}); !v) {
    return std::unexpected(v.error());
  }
  auto removed = store_->call()->removeDefinition(pool, seen);
  if (!removed) {
    return std::unexpected(std::move(removed.error()));
  }
  return *removed == Removed::kDeleted || *removed == Removed::kGone;
}

BackendResult<std::optional<PoolDefinition>> ClaimRules::replaceDefinition(const PoolDefinition& def,
                                                                            std::string_view seen) {
  if (auto v = checkNames({def.pool}); !v) {
    return std::unexpected(v.error());
  }
  return store_->call()->updateDefinition(def, seen);
}

BackendResult<void> ClaimRules::demand(std::string_view pool, std::string_view node, int wanted) {
  if (auto v = checkNames({pool, node}); !v) {
    return v;
  }
  return store_->call()->putDemand(pool, node, wanted);
}

BackendResult<std::vector<Demand>> ClaimRules::demands(std::string_view pool) {
  if (auto v = checkNames({pool}); !v) {
    return std::unexpected(v.error());
  }
  return store_->call()->listDemands(pool);
}

BackendResult<void> ClaimRules::withdraw(std::string_view pool, std::string_view node) {
  if (auto v = checkNames({pool, node}); !v) {
    return v;
  }
  return store_->call()->deleteDemand(pool, node);
}

BackendResult<void> ClaimRules::forgetNode(std::string_view node) {
  if (auto v = checkNames({node}); !v) {
    return v;
  }
  return store_->call()->forgetNode(node);
}

}  // namespace ibcni::ipam::claims
