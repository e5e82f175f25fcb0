// SPDX-License-Identifier: Apache-2.0
#include "support/memory_claim_store.h"

#include <string_view>
#include <vector>

#include "ipam/claims/backend_support.h"

namespace ibcni::testing {

namespace {

using ipam::BackendErrc;
using ipam::BackendError;
using ipam::BackendResult;
using ipam::Claim;
using ipam::ClaimAttrs;
using ipam::ClaimKind;
using ipam::Demand;
using ipam::HeldClaim;
using ipam::Holder;
using ipam::PoolDefinition;
using ipam::PoolRegistry;
using ipam::claims::ClaimRef;
using ipam::claims::Created;
using ipam::claims::Removed;
using ipam::claims::Renewal;
using ipam::claims::Taken;
using MaybeHolder = std::optional<Holder>;
using MaybeDefinition = std::optional<PoolDefinition>;

std::string prefixOf(ClaimKind kind, std::string_view pool) {
  return std::string(ipam::claimKindName(kind)) + "/" + std::string(pool) + "/";
}

std::string keyOf(const ClaimRef& ref) { return prefixOf(ref.kind, ref.pool) + std::string(ref.name); }

/// One call: every operation under the world's lock, refused while the world is down.
class MemoryCall final : public ipam::claims::StoreCall {
 public:
  explicit MemoryCall(MemoryWorld& w) : w_(w) {
    const std::lock_guard lock(w_.mutex);
    ++w_.calls;
  }

  BackendResult<MaybeHolder> read(const ClaimRef& ref) override {
    const std::lock_guard lock(w_.mutex);
    return up().value_or(found(keyOf(ref)));
  }
  BackendResult<std::vector<Claim>> list(ClaimKind kind, std::string_view pool,
                                         std::optional<std::string_view> node) override {
    const std::lock_guard lock(w_.mutex);
    if (auto e = up()) {
      return std::unexpected(e->error());
    }
    ++w_.lists;
    std::vector<Claim> out;
    const std::string prefix = prefixOf(kind, pool);
    for (auto it = w_.claims.lower_bound(prefix); it != w_.claims.end() && it->first.starts_with(prefix); ++it) {
      if (!node || it->second.node == *node) {
        out.push_back(Claim{kind, it->first.substr(prefix.size()), *found(it->first)});
      }
    }
    return out;
  }
  BackendResult<Created> create(const ClaimRef& ref, std::string_view node, const ClaimAttrs& attrs) override {
    const std::lock_guard lock(w_.mutex);
    if (auto e = up()) {
      return std::unexpected(e->error());
    }
    const std::string key = keyOf(ref);
    if (w_.claims.contains(key) && !w_.brokenCreate) {
      return Created{false, found(key)};
    }
    Holder h;
    h.node = node;
    h.attrs = attrs;
    h.identity = h.version = std::to_string(++w_.revision);
    h.claimedAt = w_.clock();
    w_.claims[key] = h;
    w_.registered.insert(std::string(node));
    if (w_.loseAnswers > 0) {
      --w_.loseAnswers;
      return std::unexpected(BackendError{BackendErrc::kTimeout, "memory", "answer lost on purpose", 0});
    }
    return Created{true, std::move(h)};
  }
  BackendResult<MaybeHolder> update(const ClaimRef& ref, const Holder& seen, const ClaimAttrs& attrs) override {
    const std::lock_guard lock(w_.mutex);
    if (auto e = up()) {
      return std::unexpected(e->error());
    }
    auto it = w_.claims.find(keyOf(ref));
    if (it == w_.claims.end() || it->second.version != seen.version) {
      return MaybeHolder();
    }
    it->second.attrs = attrs;
    it->second.version = std::to_string(++w_.revision);
    return found(it->first);
  }
  BackendResult<Removed> remove(const ClaimRef& ref, const Holder& seen) override {
    const std::lock_guard lock(w_.mutex);
    if (auto e = up()) {
      return std::unexpected(e->error());
    }
    return erase(keyOf(ref), seen, false);
  }
  BackendResult<Renewal> keepAlive(std::string_view node, std::string_view pool,
                                   const std::vector<HeldClaim>& held) override {
    const std::lock_guard lock(w_.mutex);
    if (auto e = up()) {
      return std::unexpected(e->error());
    }
    Renewal out;
    auto [it, fresh] = w_.aliveUntil.try_emplace(std::string(node), SysTime{});
    out.livenessRenewed = !fresh && it->second < w_.clock();
    it->second = w_.clock() + w_.ttl;
    w_.registered.insert(std::string(node));
    for (const auto& h : held) {
      out.held.push_back(found(keyOf(ClaimRef{h.kind, pool, h.name})));
    }
    return out;
  }
  BackendResult<Taken> takeIfGone(const ClaimRef& ref, const Holder& seen, std::string_view node,
                                  const ClaimAttrs& attrs) override {
    const std::lock_guard lock(w_.mutex);
    if (auto e = up()) {
      return std::unexpected(e->error());
    }
    auto it = w_.claims.find(keyOf(ref));
    if (it == w_.claims.end() || it->second.version != seen.version || !gone(seen.node)) {
      return Taken{false, found(keyOf(ref))};
    }
    it->second.node = node;
    it->second.attrs = attrs;
    it->second.version = std::to_string(++w_.revision);
    it->second.claimedAt = w_.clock();
    w_.registered.insert(std::string(node));
    return Taken{true, found(it->first)};
  }
  BackendResult<Removed> removeIfGone(const ClaimRef& ref, const Holder& seen) override {
    const std::lock_guard lock(w_.mutex);
    if (auto e = up()) {
      return std::unexpected(e->error());
    }
    return erase(keyOf(ref), seen, true);
  }
  BackendResult<void> forgetNode(std::string_view node) override {
    const std::lock_guard lock(w_.mutex);
    if (auto e = up()) {
      return std::unexpected(e->error());
    }
    if (alive(node)) {
      return std::unexpected(ipam::backend::invalid("node " + std::string(node) + " is alive"));
    }
    w_.registered.erase(std::string(node));
    return {};
  }

  BackendResult<MaybeDefinition> readDefinition(std::string_view pool) override {
    const std::lock_guard lock(w_.mutex);
    if (auto e = up()) {
      return std::unexpected(e->error());
    }
    auto it = w_.definitions.find(std::string(pool));
    return it == w_.definitions.end() ? MaybeDefinition() : MaybeDefinition(it->second);
  }
  BackendResult<MaybeDefinition> createDefinition(const PoolDefinition& def) override {
    const std::lock_guard lock(w_.mutex);
    if (auto e = up()) {
      return std::unexpected(e->error());
    }
    auto [it, made] = w_.definitions.try_emplace(def.pool, def);
    if (made) {
      it->second.identity = std::to_string(++w_.revision);
    }
    return MaybeDefinition(it->second);
  }
  BackendResult<MaybeDefinition> updateDefinition(const PoolDefinition& def, std::string_view seen) override {
    const std::lock_guard lock(w_.mutex);
    if (auto e = up()) {
      return std::unexpected(e->error());
    }
    auto it = w_.definitions.find(def.pool);
    if (it == w_.definitions.end() || it->second.identity != seen) {
      return MaybeDefinition();
    }
    it->second = def;
    it->second.identity = std::to_string(++w_.revision);
    return MaybeDefinition(it->second);
  }
  BackendResult<Removed> removeDefinition(std::string_view pool, std::string_view seen) override {
    const std::lock_guard lock(w_.mutex);
    if (auto e = up()) {
      return std::unexpected(e->error());
    }
    auto it = w_.definitions.find(std::string(pool));
    if (it == w_.definitions.end() || it->second.identity != seen) {
      return it == w_.definitions.end() ? Removed::kGone : Removed::kConflict;
    }
    w_.definitions.erase(it);
    return Removed::kDeleted;
  }
  BackendResult<PoolRegistry> readRegistry() override {
    const std::lock_guard lock(w_.mutex);
    return up() ? BackendResult<PoolRegistry>(std::unexpected(up()->error())) : w_.registry;
  }
  BackendResult<bool> writeRegistry(const PoolRegistry& registry) override {
    const std::lock_guard lock(w_.mutex);
    if (auto e = up()) {
      return std::unexpected(e->error());
    }
    if (registry.version != w_.registry.version) {
      return false;
    }
    w_.registry = registry;
    w_.registry.version = std::to_string(++w_.revision);
    return true;
  }

  BackendResult<void> putDemand(std::string_view pool, std::string_view node, int wanted) override {
    const std::lock_guard lock(w_.mutex);
    if (auto e = up()) {
      return std::unexpected(e->error());
    }
    w_.demands[{std::string(pool), std::string(node)}] = Demand{std::string(node), w_.clock(), wanted, false};
    return {};
  }
  BackendResult<std::vector<Demand>> listDemands(std::string_view pool) override {
    const std::lock_guard lock(w_.mutex);
    if (auto e = up()) {
      return std::unexpected(e->error());
    }
    std::vector<Demand> out;
    for (const auto& [key, d] : w_.demands) {
      if (key.first == pool) {
        out.push_back(d);
        out.back().lapsed = !alive(d.node) || *d.requestedAt + w_.ttl < w_.clock();
      }
    }
    return out;
  }
  BackendResult<void> deleteDemand(std::string_view pool, std::string_view node) override {
    const std::lock_guard lock(w_.mutex);
    if (auto e = up()) {
      return std::unexpected(e->error());
    }
    w_.demands.erase({std::string(pool), std::string(node)});
    return {};
  }

  BackendError changing(std::string_view what) const override {
    return BackendError{BackendErrc::kBadAnswer, "memory", std::string(what), 0};
  }

 private:
  /// The error of a call while the world is down, else nullopt.
  [[nodiscard]] std::optional<BackendResult<MaybeHolder>> up() const {
    if (!w_.down) {
      return std::nullopt;
    }
    return BackendResult<MaybeHolder>(std::unexpected(BackendError{BackendErrc::kUnreachable, "memory", "down", 0}));
  }
  [[nodiscard]] bool alive(std::string_view node) const {
    auto it = w_.aliveUntil.find(std::string(node));
    return it != w_.aliveUntil.end() && it->second >= w_.clock();
  }
  [[nodiscard]] bool gone(std::string_view node) const {
    return !alive(node) && !w_.registered.contains(std::string(node));
  }
  /// The claim at `key` with its holder's liveness, nullopt when there is none.
  [[nodiscard]] MaybeHolder found(const std::string& key) const {
    auto it = w_.claims.find(key);
    if (it == w_.claims.end()) {
      return std::nullopt;
    }
    Holder h = it->second;
    h.lapsed = !alive(h.node);
    return h;
  }
  Removed erase(const std::string& key, const Holder& seen, bool onlyIfGone) {
    auto it = w_.claims.find(key);
    if (it == w_.claims.end()) {
      return Removed::kGone;
    }
    if (it->second.version != seen.version || (onlyIfGone && !gone(seen.node))) {
      return Removed::kConflict;
    }
    w_.claims.erase(it);
    return Removed::kDeleted;
  }

  MemoryWorld& w_;
};

}  // namespace

std::unique_ptr<ipam::claims::StoreCall> MemoryClaimStore::call() { return std::make_unique<MemoryCall>(*world_); }

}  // namespace ibcni::testing
