// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "ibcni/config/ipam_conf.h"
#include "ibcni/http/http_client.h"
#include "ipam/backends/etcd_claim_store.h"
#include "ipam/claims/claim_rules.h"

namespace ibcni::ipam {

/// BlockBackend on etcd: the claim protocol (claims/claim_rules.h) over the etcd claim store
/// (etcd_claim_store.h has the keys and the transactions).
class EtcdBlockBackend final : public claims::ClaimRules {
 public:
  using Options = EtcdClaimStore::Options;

  /// `client` must outlive the backend.
  EtcdBlockBackend(http::HttpClient& client, Options options);

  /// The options ipam.cluster gives (endpoints, prefix, TLS files, timeoutMs, leaseDurationSeconds
  /// as the lease's TTL), with the lease the node was using and where to report a new one.
  [[nodiscard]] static Options optionsFor(const config::ClusterConf& cluster, std::int64_t leaseId,
                                          std::function<void(std::int64_t)> onLeaseGranted);

  /// Checks the options: endpoints present and http(s)://, prefix non-empty and ending in '/',
  /// timeout and leaseTtl positive.
  [[nodiscard]] static BackendResult<void> validate(const Options& options);

  /// The node's current lease (0: none granted yet).
  [[nodiscard]] std::int64_t leaseId() const { return etcd_.leaseId(); }

  /// The etcd keys (for tests and listings).
  [[nodiscard]] std::string claimKey(ClaimKind kind, std::string_view pool, std::string_view name) const {
    return etcd_.keys().claim(kind, pool, name);
  }
  [[nodiscard]] std::string aliveKey(std::string_view node) const { return etcd_.keys().alive(node); }
  [[nodiscard]] std::string registeredKey(std::string_view node) const { return etcd_.keys().registered(node); }

 private:
  const EtcdClaimStore& etcd_;
};

}  // namespace ibcni::ipam
