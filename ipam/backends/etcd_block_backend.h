// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ipam/backends/etcd_gateway.h"
#include "ibcni/config/ipam_conf.h"
#include "ibcni/http/http_client.h"
#include "ibcni/ipam/block_backend.h"

namespace ibcni::ipam {

/// BlockBackend on etcd 3.4's JSON gateway, over an injected http::HttpClient. Keys (`prefix`
/// from the configuration, "/ibcni/" by default):
///
///   <prefix>pools/<pool>/blocks/<block-key>     {"node","claimedAt"}                           no lease
///   <prefix>pools/<pool>/addresses/<address>    {"node","owner","pod","lender","claimedAt"}   no lease
///   <prefix>pools/<pool>/demand/<node>          {"node","wanted","requestedAt"}                the node's lease
///   <prefix>definitions/<pool>                  {"fields","origin","closed"}                   no lease
///   <prefix>registry                            {"pools": {pool: fields}}                      no lease
///   <prefix>nodes/<node>/registered             {"node","registeredAt"}                        no lease
///   <prefix>nodes/<node>/alive                  {"node","renewedAt"}                           the node's lease
///
/// A claim is the key's existence: nothing expires it. Identity = create_revision, version =
/// mod_revision.
///  * claim: one txn, compare create_revision == 0, success put + the node's registration, failure
///    range (held: by this node → adopted; an address for the same pod → its owner rewritten).
///  * list: one txn reading the claims and the nodes' liveness keys (Holder::lapsed).
///  * release: range, then delete compared on the mod_revision read (retried when it changed).
///  * renew: keepalive of the node's lease (granted anew when it expired, reported), then one txn
///    that puts the liveness and registration keys and reads every held claim.
///  * takeOver / removeGone: one txn comparing the claim's mod_revision with the one seen and the
///    holder's liveness and registration keys absent.
///  * forgetNode: one txn deleting the registration, compared on the liveness key being absent.
///  * Endpoints are tried in turn (etcd_gateway.h); the whole call ends within Options::timeout.
class EtcdBlockBackend final : public BlockBackend {
 public:
  struct Options {
    std::vector<std::string> endpoints;  ///< "http(s)://host:port", at least one
    std::string prefix = "/ibcni/";
    std::chrono::milliseconds timeout{5000};  ///< per public call
    http::TlsOptions tls;                     ///< caFile, certFile, keyFile (https endpoints)
    std::chrono::seconds leaseTtl{300};       ///< the liveness lease's TTL (leaseDurationSeconds)
    std::int64_t leaseId = 0;                 ///< a lease granted earlier (0: grant on first need)
    std::function<void(std::int64_t)> onLeaseGranted;  ///< called (under a lock) with each new lease ID
  };

  /// `client` must outlive the backend.
  EtcdBlockBackend(http::HttpClient& client, Options options);

  /// The options ipam.cluster gives (endpoints, prefix, TLS files, timeoutMs, leaseDurationSeconds
  /// as the lease's TTL), with the lease the node was using and where to report a new one.
  [[nodiscard]] static Options optionsFor(const config::ClusterConf& cluster, std::int64_t leaseId,
                                          std::function<void(std::int64_t)> onLeaseGranted);

  /// Checks the options: endpoints present and http(s)://, prefix non-empty and ending in '/',
  /// timeout and leaseTtl positive.
  [[nodiscard]] static BackendResult<void> validate(const Options& options);

  [[nodiscard]] BackendResult<ClaimOutcome> claim(ClaimKind kind, std::string_view pool, std::string_view name,
                                                  std::string_view node, const ClaimAttrs& attrs) override;
  [[nodiscard]] BackendResult<std::vector<Claim>> list(ClaimKind kind, std::string_view pool,
                                                       std::optional<std::string_view> node) override;
  [[nodiscard]] BackendResult<ReleaseOutcome> release(ClaimKind kind, std::string_view pool, std::string_view name,
                                                      std::string_view node, std::string_view owner) override;
  [[nodiscard]] BackendResult<RenewOutcome> renew(std::string_view node, std::string_view pool,
                                                  const std::vector<HeldClaim>& held) override;
  [[nodiscard]] BackendResult<ClaimOutcome> takeOver(ClaimKind kind, std::string_view pool, std::string_view name,
                                                     std::string_view node, const Holder& seen,
                                                     const ClaimAttrs& attrs) override;
  [[nodiscard]] BackendResult<ReleaseOutcome> removeGone(ClaimKind kind, std::string_view pool, std::string_view name,
                                                         const Holder& seen) override;
  [[nodiscard]] BackendResult<PoolDefinition> definePool(const PoolDefinition& def) override;
  [[nodiscard]] BackendResult<std::optional<PoolDefinition>> definition(std::string_view pool) override;
  [[nodiscard]] BackendResult<PoolRegistry> registry() override;
  [[nodiscard]] BackendResult<bool> writeRegistry(const PoolRegistry& registry) override;
  [[nodiscard]] BackendResult<bool> removeDefinition(std::string_view pool, std::string_view seen) override;
  [[nodiscard]] BackendResult<std::optional<PoolDefinition>> replaceDefinition(const PoolDefinition& def,
                                                                              std::string_view seen) override;
  [[nodiscard]] BackendResult<void> demand(std::string_view pool, std::string_view node, int wanted) override;
  [[nodiscard]] BackendResult<std::vector<Demand>> demands(std::string_view pool) override;
  [[nodiscard]] BackendResult<void> withdraw(std::string_view pool, std::string_view node) override;
  [[nodiscard]] BackendResult<void> forgetNode(std::string_view node) override;

  /// The node's current lease (0: none granted yet).
  [[nodiscard]] std::int64_t leaseId() const;

  /// The etcd keys (for tests and listings).
  [[nodiscard]] std::string claimKey(ClaimKind kind, std::string_view pool, std::string_view name) const;
  [[nodiscard]] std::string aliveKey(std::string_view node) const;
  [[nodiscard]] std::string registeredKey(std::string_view node) const;

 private:
  [[nodiscard]] etcd::Call call();
  [[nodiscard]] BackendResult<std::int64_t> keepAlive(etcd::Call& call, bool& regranted);
  [[nodiscard]] BackendResult<std::int64_t> grantLease(etcd::Call& call, std::int64_t replacing);
  [[nodiscard]] BackendResult<ClaimOutcome> claimWith(etcd::Call& call, ClaimKind kind, std::string_view pool,
                                                      std::string_view name, std::string_view node,
                                                      const ClaimAttrs& attrs);
  [[nodiscard]] BackendResult<ClaimOutcome> adoptHeld(etcd::Call& call, ClaimKind kind, const etcd::Kv& kv,
                                                      Holder held, std::string_view node, const ClaimAttrs& attrs);
  [[nodiscard]] BackendResult<etcd::TxnAnswer> goneTxn(etcd::Call& call, const std::string& key, const Holder& seen,
                                                       nlohmann::json success);
  [[nodiscard]] std::string poolPrefix(std::string_view pool) const;
  [[nodiscard]] std::string definitionKey(std::string_view pool) const;
  [[nodiscard]] std::string registryKey() const;
  [[nodiscard]] std::string demandKey(std::string_view pool, std::string_view node) const;

  http::HttpClient& client_;
  Options options_;
  etcd::Endpoints endpoints_;
  mutable std::mutex leaseMutex_;
  std::int64_t leaseId_ = 0;
  std::atomic<std::size_t> preferred_{0};
};

}  // namespace ibcni::ipam
