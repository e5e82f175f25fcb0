// SPDX-License-Identifier: Apache-2.0
#include "ipam/backend_calls.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

namespace ibcni::ipam {

namespace {

class CountedBackend final : public BlockBackend {
 public:
  CountedBackend(std::unique_ptr<BlockBackend> inner, std::string backend, BackendCallSink sink)
      : inner_(std::move(inner)), backend_(std::move(backend)), sink_(std::move(sink)) {}

  using K = ClaimKind;
  using SV = std::string_view;
  BackendResult<ClaimOutcome> claim(K k, SV p, SV n, SV node, const ClaimAttrs& a) override {
    return told("claim", inner_->claim(k, p, n, node, a));
  }
  BackendResult<std::vector<Claim>> list(K k, SV p, std::optional<SV> node) override {
    return told("list", inner_->list(k, p, node));
  }
  BackendResult<ReleaseOutcome> release(K k, SV p, SV n, SV node, SV owner) override {
    return told("release", inner_->release(k, p, n, node, owner));
  }
  BackendResult<RenewOutcome> renew(SV node, SV p, const std::vector<HeldClaim>& h) override {
    return told("renew", inner_->renew(node, p, h));
  }
  BackendResult<ClaimOutcome> takeOver(K k, SV p, SV n, SV node, const Holder& seen, const ClaimAttrs& a) override {
    return told("take_over", inner_->takeOver(k, p, n, node, seen, a));
  }
  BackendResult<ReleaseOutcome> removeGone(K k, SV p, SV n, const Holder& seen) override {
    return told("remove_gone", inner_->removeGone(k, p, n, seen));
  }
  BackendResult<PoolDefinition> definePool(const PoolDefinition& d) override {
    return told("define_pool", inner_->definePool(d));
  }
  BackendResult<std::optional<PoolDefinition>> definition(SV p) override {
    return told("definition", inner_->definition(p));
  }
  BackendResult<PoolRegistry> registry() override { return told("registry", inner_->registry()); }
  BackendResult<bool> writeRegistry(const PoolRegistry& r) override {
    return told("write_registry", inner_->writeRegistry(r));
  }
  BackendResult<bool> removeDefinition(SV p, SV seen) override {
    return told("remove_definition", inner_->removeDefinition(p, seen));
  }
  BackendResult<std::optional<PoolDefinition>> replaceDefinition(const PoolDefinition& d, SV seen) override {
    return told("replace_definition", inner_->replaceDefinition(d, seen));
  }
  BackendResult<void> demand(SV p, SV node, int wanted) override {
    return told("demand", inner_->demand(p, node, wanted));
  }
  BackendResult<std::vector<Demand>> demands(SV p) override { return told("demands", inner_->demands(p)); }
  BackendResult<void> withdraw(SV p, SV node) override { return told("withdraw", inner_->withdraw(p, node)); }
  BackendResult<void> forgetNode(SV node) override { return told("forget_node", inner_->forgetNode(node)); }

 private:
  template <class T>
  T told(std::string_view op, T result) {
    if (result) {
      sink_(backend_, op, "success");
    } else {
      std::string kind(backendErrcName(result.error().kind));
      std::replace(kind.begin(), kind.end(), ' ', '_');
      sink_(backend_, op, kind);
    }
    return result;
  }

  std::unique_ptr<BlockBackend> inner_;
  std::string backend_;
  BackendCallSink sink_;
};

}  // namespace

BackendFactory countingBackends(BackendFactory inner, BackendCallSink sink) {
  return [inner = std::move(inner), sink = std::move(sink)](const config::ClusterConf& c,
                                                            const BackendContext& ctx)
             -> cni::Result<std::unique_ptr<BlockBackend>> {
    auto b = inner(c, ctx);
    if (!b) {
      return std::unexpected(b.error());
    }
    return std::make_unique<CountedBackend>(std::move(*b), std::string(config::clusterBackendName(c.backend)), sink);
  };
}

}  // namespace ibcni::ipam
