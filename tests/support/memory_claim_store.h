// SPDX-License-Identifier: Apache-2.0
// A claim store in memory (ipam/claims/claim_store.h), shared by the "nodes" of one test: the third
// adapter of the claim protocol, beside etcd's and Kubernetes'. Liveness as etcd has it: a node's
// renewal keeps it alive for `ttl` on the world's clock and registers it; a node is certainly gone
// when its liveness lapsed and forgetNode() deleted its registration. The world can be taken down
// (every call unreachable) and can plant a broken compare-and-swap, for the tests that show the
// checks catch one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "ipam/claims/claim_rules.h"
#include "ipam/claims/claim_store.h"

namespace ibcni::testing {

using SysTime = std::chrono::system_clock::time_point;

/// What every node's store sees: the records, the nodes' liveness and registrations, a clock.
struct MemoryWorld {
  std::mutex mutex;
  std::map<std::string, ipam::Holder> claims;                  ///< "<kind>/<pool>/<name>"
  std::map<std::string, ipam::PoolDefinition> definitions;     ///< pool
  ipam::PoolRegistry registry;
  std::map<std::pair<std::string, std::string>, ipam::Demand> demands;  ///< (pool, node)
  std::map<std::string, SysTime> aliveUntil;                   ///< node
  std::set<std::string> registered;
  std::int64_t revision = 0;
  std::function<SysTime()> clock = [] { return std::chrono::system_clock::now(); };
  std::chrono::seconds ttl{300};
  bool down = false;         ///< every call unreachable
  bool brokenCreate = false;  ///< planted: create overwrites a claim that exists (no create-if-absent)
  int loseAnswers = 0;       ///< the next creates are made but answer a timeout (the node never learns it)
  int calls = 0;             ///< calls made (one per public call of a backend)
  int lists = 0;             ///< lists of a pool's claims
};

class MemoryClaimStore final : public ipam::claims::ClaimStore {
 public:
  explicit MemoryClaimStore(std::shared_ptr<MemoryWorld> world) : world_(std::move(world)) {}
  [[nodiscard]] std::unique_ptr<ipam::claims::StoreCall> call() override;
  [[nodiscard]] bool renewsClaims() const override { return false; }

 private:
  std::shared_ptr<MemoryWorld> world_;
};

/// A BlockBackend over `world`: the claim rules over a MemoryClaimStore.
[[nodiscard]] inline std::unique_ptr<ipam::BlockBackend> memoryBackend(std::shared_ptr<MemoryWorld> world) {
  return std::make_unique<ipam::claims::ClaimRules>(std::make_unique<MemoryClaimStore>(std::move(world)));
}

}  // namespace ibcni::testing
