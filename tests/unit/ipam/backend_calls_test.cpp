// SPDX-License-Identifier: Apache-2.0
// The node agent's count of its backend calls: each call of a backend the wrapped factory builds is
// told with its backend, operation and result.
#include <gtest/gtest.h>

#include "ipam/backend_calls.h"

namespace ibcni::testing {
namespace {

using namespace ipam;  // NOLINT: the backend's many types
using SV = std::string_view;

// Lists succeed (no claims); every other call answers "unreachable".
class ListOnlyBackend final : public BlockBackend {
  static std::unexpected<BackendError> down() {
    return std::unexpected(BackendError{BackendErrc::kUnreachable, "http://127.0.0.1:1", "refused", 0});
  }

 public:
  BackendResult<ClaimOutcome> claim(ClaimKind, SV, SV, SV, const ClaimAttrs&) override { return down(); }
  BackendResult<std::vector<Claim>> list(ClaimKind, SV, std::optional<SV>) override { return std::vector<Claim>{}; }
  BackendResult<ReleaseOutcome> release(ClaimKind, SV, SV, SV, SV) override { return down(); }
  BackendResult<RenewOutcome> renew(SV, SV, const std::vector<HeldClaim>&) override { return down(); }
  BackendResult<ClaimOutcome> takeOver(ClaimKind, SV, SV, SV, const Holder&, const ClaimAttrs&) override {
    return down();
  }
  BackendResult<ReleaseOutcome> removeGone(ClaimKind, SV, SV, const Holder&) override { return down(); }
  BackendResult<PoolDefinition> definePool(const PoolDefinition&) override { return down(); }
  BackendResult<std::optional<PoolDefinition>> definition(SV) override { return down(); }
  BackendResult<PoolRegistry> registry() override { return down(); }
  BackendResult<bool> writeRegistry(const PoolRegistry&) override { return down(); }
  BackendResult<bool> removeDefinition(SV, SV) override { return down(); }
  BackendResult<std::optional<PoolDefinition>> replaceDefinition(const PoolDefinition&, SV) override {
    return down();
  }
  BackendResult<void> demand(SV, SV, int) override { return down(); }
  BackendResult<std::vector<Demand>> demands(SV) override { return down(); }
  BackendResult<void> withdraw(SV, SV) override { return down(); }
  BackendResult<void> forgetNode(SV) override { return down(); }
};

TEST(BackendCalls, EachCallIsToldWithItsBackendOperationAndResult) {
  std::vector<std::string> told;
  BackendFactory inner = [](const config::ClusterConf&, const BackendContext&)
      -> cni::Result<std::unique_ptr<BlockBackend>> { return std::make_unique<ListOnlyBackend>(); };
  auto factory = ipam::countingBackends(inner, [&told](SV backend, SV op, SV result) {
    told.push_back(std::string(backend) + " " + std::string(op) + " " + std::string(result));
  });
  config::ClusterConf conf;
  conf.backend = config::ClusterBackend::kEtcd;
  auto backend = factory(conf, BackendContext{});
  ASSERT_TRUE(backend);
  EXPECT_TRUE((*backend)->list(ClaimKind::kBlock, "p", std::nullopt));
  EXPECT_FALSE((*backend)->renew("node-a", "p", {}));
  EXPECT_FALSE((*backend)->takeOver(ClaimKind::kBlock, "p", "10.0.0.0-28", "node-a", {}, {}));
  const std::vector<std::string> want{"etcd list success", "etcd renew unreachable", "etcd take_over unreachable"};
  EXPECT_EQ(told, want);
}

TEST(BackendCalls, AFactoryErrorIsPassedOnAndNothingIsTold) {
  int told = 0;
  BackendFactory inner = [](const config::ClusterConf&, const BackendContext&)
      -> cni::Result<std::unique_ptr<BlockBackend>> { return cni::fail(cni::Errc::kInvalidConfig, "no kubeconfig"); };
  auto factory = ipam::countingBackends(inner, [&told](SV, SV, SV) { ++told; });
  auto backend = factory(config::ClusterConf{}, BackendContext{});
  ASSERT_FALSE(backend);
  EXPECT_EQ(backend.error().msg, "no kubeconfig");
  EXPECT_EQ(told, 0);
}

}  // namespace
}  // namespace ibcni::testing
