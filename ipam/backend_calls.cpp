// SPDX-License-Identifier: Apache-2.0
#include "plugin/agent/backend_calls.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

namespace ibcni::plugin {

namespace {

class CountedBackend final : public ipam::BlockBackend {
 public:
  CountedBackend(std::unique_ptr<ipam::BlockBackend> inner, std::string backend, BackendCallSink sink)
      : inner_(std::move(inner)), backend_(std::move(backend)), sink_(std::move(sink)) {}

  using K = ipam::ClaimKind;
  using SV = std::string_view;
  ipam::BackendResult<ipam::ClaimOutcome> claim(K k, SV p, SV n, SV node, const ipam::ClaimAttrs& a) override {
    return told("claim", inner_->claim(k, p, n, node, a));
  }
  ipam::BackendResult<std::vector<ipam::Claim>> list(K k, SV p, std::optional<SV> node) override {
    return told("list", inner_->list(k, p, node));
  }
  ipam::BackendResult<ipam::ReleaseOutcome> release(K k, SV p, SV n, SV node, SV owner) override {
    return told("release", inner_->release(k, p, n, node, owner));
  }
  ipam::BackendResult<ipam::RenewOutcome> renew(SV node, SV p, const std::vector<ipam::HeldClaim>& h) override {
    return told("renew", inner_->renew(node, p, h));
  }
  ipam::BackendResult<ipam::ClaimOutcome> takeOver(K k, SV p, SV n, SV node, const ipam::Holder& seen,
                                                   const ipam::ClaimAttrs& a) override {
    return told("take_over", inner_->takeOver(k, p, n, node, seen, a));
  }
  ipam::BackendResult<ipam::ReleaseOutcome> removeGone(K k, SV p, SV n, const ipam::Holder& seen) override {
    return told("remove_gone", inner_->removeGone(k, p, n, seen));
  }
  ipam::BackendResult<ipam::PoolDefinition> definePool(const ipam::PoolDefinition& d) override {
    return told("define_pool", inner_->definePool(d));
  }
  ipam::BackendResult<std::optional<ipam::PoolDefinition>> definition(SV p) override {
    return told("definition", inner_->definition(p));
  }
  ipam::BackendResult<ipam::PoolRegistry> registry() override { return told("registry", inner_->registry()); }
  ipam::BackendResult<bool> writeRegistry(const ipam::PoolRegistry& r) override {
    return told("write_registry", inner_->writeRegistry(r));
  }
  ipam::BackendResult<bool> removeDefinition(SV p, SV seen) override {
    return told("remove_definition", inner_->removeDefinition(p, seen));
  }
  ipam::BackendResult<std::optional<ipam::PoolDefinition>> replaceDefinition(const ipam::PoolDefinition& d,
                                                                             SV seen) override {
    return told("replace_definition", inner_->replaceDefinition(d, seen));
  }
  ipam::BackendResult<void> demand(SV p, SV node, int wanted) override {
    return told("demand", inner_->demand(p, node, wanted));
  }
  ipam::BackendResult<std::vector<ipam::Demand>> demands(SV p) override { return told("demands", inner_->demands(p)); }
  ipam::BackendResult<void> withdraw(SV p, SV node) override { return told("withdraw", inner_->withdraw(p, node)); }
  ipam::BackendResult<void> forgetNode(SV node) override { return told("forget_node", inner_->forgetNode(node)); }

 private:
  template <class T>
  T told(std::string_view op, T result) {
    if (result) {
      sink_(backend_, op, "success");
    } else {
      std::string kind(ipam::backendErrcName(result.error().kind));
      std::replace(kind.begin(), kind.end(), ' ', '_');
      sink_(backend_, op, kind);
    }
    return result;
  }

  std::unique_ptr<ipam::BlockBackend> inner_;
  std::string backend_;
  BackendCallSink sink_;
};

}  // namespace

ipam::BackendFactory countingBackends(ipam::BackendFactory inner, BackendCallSink sink) {
  return [inner = std::move(inner), sink = std::move(sink)](const config::ClusterConf& c,
                                                            const ipam::BackendContext& ctx)
             -> cni::Result<std::unique_ptr<ipam::BlockBackend>> {
    auto b = inner(c, ctx);
    if (!b) {
      return std::unexpected(b.error());
    }
    return std::make_unique<CountedBackend>(std::move(*b), std::string(config::clusterBackendName(c.backend)), sink);
  };
}

}  // namespace ibcni::plugin
