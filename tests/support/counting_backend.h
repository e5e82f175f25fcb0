// SPDX-License-Identifier: Apache-2.0
// A block backend that counts every call of the backend it wraps: what proves that an ADD inside
// the node's owned blocks makes no backend call (tests and benches of the cluster pools).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "ibcni/ipam/block_backend.h"
#include "ipam/cluster/cluster_pool.h"

namespace ibcni::ipam::testing {

/// Runs before every call of a CountingBackend, given its name ("definePool"): what a test counts
/// or does in between.
using BeforeCall = std::function<void(std::string_view)>;

/// `inner`, every call counted in `calls`, `before` run first (when given).
class CountingBackend final : public BlockBackend {
 public:
  CountingBackend(std::unique_ptr<BlockBackend> inner, std::atomic<int>& calls, BeforeCall before = {})
      : inner_(std::move(inner)), calls_(calls), before_(std::move(before)) {}
  BackendResult<ClaimOutcome> claim(ClaimKind k, std::string_view p, std::string_view n, std::string_view node,
                                    const ClaimAttrs& a) override {
    return note("claim"), inner_->claim(k, p, n, node, a);
  }
  BackendResult<std::vector<Claim>> list(ClaimKind k, std::string_view p,
                                         std::optional<std::string_view> node) override {
    return note("list"), inner_->list(k, p, node);
  }
  BackendResult<ReleaseOutcome> release(ClaimKind k, std::string_view p, std::string_view n, std::string_view node,
                                        std::string_view owner) override {
    return note("release"), inner_->release(k, p, n, node, owner);
  }
  BackendResult<RenewOutcome> renew(std::string_view node, std::string_view p,
                                    const std::vector<HeldClaim>& h) override {
    return note("renew"), inner_->renew(node, p, h);
  }
  BackendResult<ClaimOutcome> takeOver(ClaimKind k, std::string_view p, std::string_view n, std::string_view node,
                                       const Holder& seen, const ClaimAttrs& a) override {
    return note("takeOver"), inner_->takeOver(k, p, n, node, seen, a);
  }
  BackendResult<ReleaseOutcome> removeGone(ClaimKind k, std::string_view p, std::string_view n,
                                           const Holder& seen) override {
    return note("removeGone"), inner_->removeGone(k, p, n, seen);
  }
  BackendResult<PoolDefinition> definePool(const PoolDefinition& d) override {
    return note("definePool"), inner_->definePool(d);
  }
  BackendResult<std::optional<PoolDefinition>> definition(std::string_view p) override {
    return note("definition"), inner_->definition(p);
  }
  BackendResult<PoolRegistry> registry() override { return note("registry"), inner_->registry(); }
  BackendResult<bool> writeRegistry(const PoolRegistry& r) override {
    return note("writeRegistry"), inner_->writeRegistry(r);
  }
  BackendResult<bool> removeDefinition(std::string_view p, std::string_view seen) override {
    return note("removeDefinition"), inner_->removeDefinition(p, seen);
  }
  BackendResult<std::optional<PoolDefinition>> replaceDefinition(const PoolDefinition& d,
                                                                 std::string_view seen) override {
    return note("replaceDefinition"), inner_->replaceDefinition(d, seen);
  }
  BackendResult<void> demand(std::string_view p, std::string_view node, int wanted) override {
    return note("demand"), inner_->demand(p, node, wanted);
  }
  BackendResult<std::vector<Demand>> demands(std::string_view p) override {
    return note("demands"), inner_->demands(p);
  }
  BackendResult<void> withdraw(std::string_view p, std::string_view node) override {
    return note("withdraw"), inner_->withdraw(p, node);
  }
  BackendResult<void> forgetNode(std::string_view node) override {
    return note("forgetNode"), inner_->forgetNode(node);
  }

 private:
  void note(std::string_view call) {
    ++calls_;
    if (before_) {
      before_(call);
    }
  }

  std::unique_ptr<BlockBackend> inner_;
  std::atomic<int>& calls_;
  BeforeCall before_;
};

/// `inner`, each backend it builds wrapped so that its calls add to `calls` (which must outlive it)
/// and `before` runs before each.
inline BackendFactory counting(BackendFactory inner, std::atomic<int>& calls, BeforeCall before = {}) {
  return [inner = std::move(inner), &calls, before = std::move(before)](const config::ClusterConf& c,
                                                                         const BackendContext& ctx)
             -> cni::Result<std::unique_ptr<BlockBackend>> {
    auto b = inner(c, ctx);
    if (!b) {
      return std::unexpected(b.error());
    }
    return std::make_unique<CountingBackend>(std::move(*b), calls, before);
  };
}

}  // namespace ibcni::ipam::testing
