// SPDX-License-Identifier: Apache-2.0
// The Kubernetes claim store: each operation of claims::StoreCall as Lease requests;
// k8s_lease_codec.h has the Leases' names, labels, annotations and bodies.
#include "ipam/backends/k8s_claim_store.h"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ibcni/os/time_text.h"
#include "ipam/backends/k8s_api.h"
#include "ipam/backends/k8s_lease_codec.h"
#include "ipam/claims/backend_support.h"

namespace ibcni::ipam {

namespace {

using backend::andThen;
using backend::transform;
using claims::ClaimRef;
using claims::Created;
using claims::Removed;
using claims::Renewal;
using claims::Taken;
using k8s::SysClock;
using namespace k8s_leases;  // NOLINT(google-build-using-namespace): the codec's names, a file's worth

using MaybeLease = std::optional<LeaseView>;
using MaybeHolder = std::optional<Holder>;
using MaybeDefinition = std::optional<PoolDefinition>;

}  // namespace

class K8sStoreCall final : public claims::StoreCall {
 public:
  K8sStoreCall(http::HttpClient& client, const K8sClaimStore::Options& o) : o_(o), s_(client, o) {}

  BackendResult<MaybeHolder> read(const ClaimRef& ref) override {
    return as<MaybeHolder>(readClaim(claimLeaseName(ref.kind, ref.pool, ref.name), ref),
                           [&](const MaybeLease& v) { return held(v); });
  }

  BackendResult<std::vector<Claim>> list(ClaimKind kind, std::string_view pool,
                                         std::optional<std::string_view> node) override {
    return andThen(s_.call.listLeases(selectorOf(pool, kindLabel(kind), node)), [&](const std::vector<LeaseView>& all) {
      return claimsOf(all, kind, pool, node, o_.leaseDuration, s_.call);
    });
  }

  BackendResult<Created> create(const ClaimRef& ref, std::string_view node, const ClaimAttrs& attrs) override {
    auto name = nameOf(ref.kind, ref.pool, ref.name);
    if (!name) {
      return std::unexpected(name.error());
    }
    auto made = s_.call.createLease(newLease(*name, o_.namespace_, labels(ref.pool, kindLabel(ref.kind), node),
                                             claimAnnotations(ref.pool, ref.name, attrs), node, o_.leaseDuration));
    const bool created = made && *made;
    return as<Created>(made && !*made ? readClaim(*name, ref) : std::move(made),
                       [&](const MaybeLease& v) { return Created{created, held(v)}; });
  }

  BackendResult<MaybeHolder> update(const ClaimRef& ref, const Holder& seen, const ClaimAttrs& attrs) override {
    const std::string name = claimLeaseName(ref.kind, ref.pool, ref.name);
    auto cur = seenLease(name, ref, seen.version);
    if (!cur || !*cur) {
      return as<MaybeHolder>(std::move(cur), [](const MaybeLease&) { return MaybeHolder(); });
    }
    const json body = renewalOf(**cur, o_.namespace_, claimAnnotations(ref.pool, ref.name, attrs), o_.leaseDuration);
    return as<MaybeHolder>(put(name, body), [&](const MaybeLease& v) { return held(v); });
  }

  BackendResult<Removed> remove(const ClaimRef& ref, const Holder& seen) override {
    const std::string name = claimLeaseName(ref.kind, ref.pool, ref.name);
    if (name.empty()) {
      return Removed::kGone;
    }
    return transform(s_.call.deleteLease(name, seen.identity, seen.version), removedAs);
  }

  BackendResult<Renewal> keepAlive(std::string_view, std::string_view pool,
                                   const std::vector<HeldClaim>& claims) override {
    Renewal out;  // a node's liveness is each claim's renewTime: the rules rewrite them
    for (const auto& h : claims) {
      auto name = nameOf(h.kind, pool, h.name);
      auto now = name ? readClaim(*name, ClaimRef{h.kind, pool, h.name}) : std::unexpected(name.error());
      if (!now) {
        return std::unexpected(now.error());
      }
      out.held.push_back(held(*now));
    }
    return out;
  }

  BackendResult<Taken> takeIfGone(const ClaimRef& ref, const Holder& seen, std::string_view node,
                                  const ClaimAttrs& attrs) override {
    auto name = nameOf(ref.kind, ref.pool, ref.name);
    if (!name) {
      return std::unexpected(name.error());
    }
    auto cur = readClaim(*name, ref);
    auto gone = cur && *cur ? certainlyGone(**cur, seen) : BackendResult<bool>(false);
    if (!gone) {
      return std::unexpected(gone.error());
    }
    if (!cur || !*gone) {
      return as<Taken>(std::move(cur), [&](const MaybeLease& v) { return Taken{false, held(v)}; });
    }
    auto taken = put(*name, takeoverOf(**cur, o_.namespace_, labels(ref.pool, kindLabel(ref.kind), node),
                                       claimAnnotations(ref.pool, ref.name, attrs), node, o_.leaseDuration));
    const bool won = taken && *taken;
    // 409 (another taker, or a late renewal) or 404 (released): who holds it now.
    return as<Taken>(taken && !*taken ? readClaim(*name, ref) : std::move(taken),
                     [&](const MaybeLease& v) { return Taken{won, held(v)}; });
  }

  BackendResult<Removed> removeIfGone(const ClaimRef& ref, const Holder& seen) override {
    const std::string name = claimLeaseName(ref.kind, ref.pool, ref.name);
    auto cur = readClaim(name, ref);
    if (!cur || !*cur) {
      return as<Removed>(std::move(cur), [](const MaybeLease&) { return Removed::kGone; });
    }
    auto gone = certainlyGone(**cur, seen);
    if (!gone || !*gone) {
      return transform(std::move(gone), [](bool) { return Removed::kConflict; });
    }
    return transform(s_.call.deleteLease(name, (**cur).uid, (**cur).resourceVersion), removedAs);
  }

  BackendResult<void> forgetNode(std::string_view node) override {
    return std::unexpected(backend::invalid("with the kubernetes backend a node is gone when its Node object is: "
                                            "`kubectl delete node " + std::string(node) +
                                            "` once it is drained; its claims are then taken over"));
  }

  BackendResult<MaybeDefinition> readDefinition(std::string_view pool) override {
    return andThen(definitionLease(pool), [&](const std::string& name) {
      return andThen(s_.call.getLeaseAfterWrites(name), [&](const MaybeLease& v) { return definitionIn(v, pool); });
    });
  }

  BackendResult<MaybeDefinition> createDefinition(const PoolDefinition& def) override {
    auto name = definitionLease(def.pool);
    if (!name) {
      return std::unexpected(name.error());
    }
    auto made = s_.call.createLease(
        newLease(*name, o_.namespace_, labels(def.pool, "pool", ""), definitionAnnotations(def), "", o_.leaseDuration));
    return andThen(made && !*made ? s_.call.getLease(*name) : std::move(made),
                   [&](const MaybeLease& v) { return definitionIn(v, def.pool); });
  }

  BackendResult<MaybeDefinition> updateDefinition(const PoolDefinition& def, std::string_view seen) override {
    auto name = definitionLease(def.pool);
    auto cur = name ? s_.call.getLease(*name) : std::unexpected(name.error());
    if (!cur || !*cur || (**cur).resourceVersion != seen) {
      return as<MaybeDefinition>(std::move(cur), [](const MaybeLease&) { return MaybeDefinition(); });
    }
    json body = updateOf(**cur, o_.namespace_);
    body["metadata"]["annotations"] = definitionAnnotations(def);
    return andThen(s_.call.putLease(*name, body), [&](const MaybeLease& v) { return definitionIn(v, def.pool); });
  }

  BackendResult<Removed> removeDefinition(std::string_view pool, std::string_view seen) override {
    auto name = definitionLease(pool);
    auto cur = name ? s_.call.getLease(*name) : std::unexpected(name.error());
    if (!cur || !*cur || (**cur).resourceVersion != seen) {
      return as<Removed>(std::move(cur), [](const MaybeLease& v) { return v ? Removed::kConflict : Removed::kGone; });
    }
    return transform(s_.call.deleteLease(*name, (**cur).uid, (**cur).resourceVersion), removedAs);
  }

  BackendResult<PoolRegistry> readRegistry() override {
    return andThen(s_.call.getLease(kRegistryLease), [&](const MaybeLease& v) { return registryOf(v, s_.call); });
  }

  BackendResult<bool> writeRegistry(const PoolRegistry& registry) override {
    const json annotations = registryAnnotations(registry);
    const auto written = [](const MaybeLease& v) { return v.has_value(); };
    if (registry.version.empty()) {
      return as<bool>(s_.call.createLease(newLease(kRegistryLease, o_.namespace_, json{{kLabelKind, "registry"}},
                                                   annotations, "", o_.leaseDuration)),
                      written);
    }
    auto cur = s_.call.getLease(kRegistryLease);
    if (!cur || !*cur || (**cur).resourceVersion != registry.version) {
      return as<bool>(std::move(cur), [](const MaybeLease&) { return false; });
    }
    return as<bool>(s_.call.putLease(kRegistryLease, renewalOf(**cur, o_.namespace_, annotations, o_.leaseDuration)),
                    written);
  }

  BackendResult<void> putDemand(std::string_view pool, std::string_view node, int wanted) override {
    auto name = demandLease(pool, node);
    if (!name) {
      return std::unexpected(name.error());
    }
    const json annotations{{kAnnPool, pool}, {kAnnWanted, std::to_string(wanted)}};
    for (int attempt = 0; attempt < 4; ++attempt) {
      auto made = s_.call.createLease(
          newLease(*name, o_.namespace_, labels(pool, "demand", node), annotations, node, o_.leaseDuration));
      if (!made || *made) {
        return transform(std::move(made), [](const MaybeLease&) {});
      }
      auto cur = s_.call.getLease(*name);
      if (!cur) {
        return std::unexpected(cur.error());
      }
      if (!*cur) {
        continue;  // deleted in between
      }
      auto written = s_.call.putLease(*name, renewalOf(**cur, o_.namespace_, annotations, o_.leaseDuration));
      if (!written || *written) {
        return transform(std::move(written), [](const MaybeLease&) {});
      }
    }
    return std::unexpected(bad("Lease " + *name + " kept changing"));
  }

  BackendResult<std::vector<Demand>> listDemands(std::string_view pool) override {
    return transform(s_.call.listLeases(selectorOf(pool, "demand", std::nullopt)), [&](const std::vector<LeaseView>& all) {
      std::vector<Demand> out;
      for (const auto& v : all) {
        if (v.annotation(kAnnPool) == pool) {
          out.push_back(demandOf(v, o_.leaseDuration));
        }
      }
      return out;
    });
  }

  BackendResult<void> deleteDemand(std::string_view pool, std::string_view node) override {
    return andThen(demandLease(pool, node), [&](const std::string& name) {
      return transform(s_.call.deleteLease(name, "", ""), [](k8s::Call::Deleted) {});
    });
  }

  BackendError changing(std::string_view what) const override { return bad(std::string(what)); }

 private:
  BackendError bad(std::string what) const { return BackendError{BackendErrc::kBadAnswer, o_.server, std::move(what), 0}; }

  MaybeHolder held(const MaybeLease& v) const { return v ? MaybeHolder(holderOf(*v, o_.leaseDuration)) : std::nullopt; }

  BackendResult<MaybeDefinition> definitionIn(const MaybeLease& v, std::string_view pool) const {
    return v ? transform(definitionOf(*v, pool, s_.call), [](PoolDefinition d) { return MaybeDefinition(std::move(d)); })
             : MaybeDefinition();
  }

  /// Claim Lease `name` read (and kept for an update within this call), checked to be ibcni's
  /// claim of `ref`; nullopt when absent, or never created ("": its name would be too long; a GET of
  /// "" would list the collection).
  BackendResult<MaybeLease> readClaim(const std::string& name, const ClaimRef& ref) {
    if (name.empty()) {
      return MaybeLease();
    }
    auto v = s_.call.getLease(name);
    if (v && *v) {
      if (auto c = isClaimOf(**v, ref.pool, ref.name, s_.call); !c) {
        return std::unexpected(c.error());
      }
      read_[name] = **v;
    }
    return v;
  }

  /// Claim Lease `name` at `version`, as this call last read it or as read now; nullopt when it is
  /// gone or at another version.
  BackendResult<MaybeLease> seenLease(const std::string& name, const ClaimRef& ref, const std::string& version) {
    auto kept = read_.find(name);
    auto v = kept != read_.end() ? BackendResult<MaybeLease>(kept->second) : readClaim(name, ref);
    return transform(std::move(v), [&](MaybeLease l) { return l && l->resourceVersion == version ? l : std::nullopt; });
  }

  BackendResult<MaybeLease> put(const std::string& name, const json& body) {
    read_.erase(name);
    return s_.call.putLease(name, body);
  }

  /// Whether the holder of `v` (as `seen`) is certainly gone: the Lease is still as seen, it lapsed,
  /// no deletion is under way and its holder's Node object is absent.
  BackendResult<bool> certainlyGone(const LeaseView& v, const Holder& seen) {
    if (v.resourceVersion != seen.version || v.deleting || !v.lapsed(SysClock::now(), o_.leaseDuration)) {
      return false;
    }
    return transform(s_.call.nodeExists(v.holderIdentity), [](bool exists) { return !exists; });
  }

  const K8sClaimStore::Options& o_;
  LeaseSession s_;
  std::map<std::string, LeaseView> read_;
};

std::unique_ptr<claims::StoreCall> K8sClaimStore::call() { return std::make_unique<K8sStoreCall>(client_, options_); }

}  // namespace ibcni::ipam
