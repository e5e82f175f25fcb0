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

#include "ibcni/config/ipam_conf.h"
#include "ibcni/http/http_client.h"
#include "ibcni/ipam/block_backend.h"

namespace ibcni::ipam {

/// BlockBackend on etcd 3.4's JSON gateway (POST /v3/kv/txn, /v3/kv/range, /v3/lease/grant,
/// /v3/lease/keepalive), over an injected http::HttpClient. Key layout: block_backend.h.
///
///  * claim: one txn, compare create_revision == 0, success put (with the node's lease), failure
///    range of the key. A key already held by this node is adopted; if it hangs on another lease
///    of ours (an older one), it is moved to the current lease with a txn on its mod_revision.
///  * definePool: one txn, compare create_revision == 0, success put (no lease), failure range.
///  * takeOver: a plain claim (a gone node's keys went with its lease).
///  * release: a range of the key (the holder is in the value, which a compare cannot read): not
///    this node's → kNotOurs, another mod_revision → kChanged; then one txn, compare mod_revision
///    == version, success delete, failure range (the key changed in between).
///  * list: one range over the pool's prefix (range_end: the prefix with its last byte + 1).
///  * The node's lease is granted on the first claim (TTL: Options::leaseTtl) unless
///    Options::leaseId names one; onLeaseGranted is called with every new ID, so that the caller
///    keeps it (e.g. in a small file of the pool's store). A put refused with "lease not found"
///    (the lease expired) gets a new lease and is retried once.
///  * Endpoints are tried in order from the last one that answered; the next is tried when one
///    cannot be reached (connect, DNS, broken transfer, its own timeout) or answers that it has no
///    leader or quorum (HTTP 503, gRPC codes 14 Unavailable and 4 DeadlineExceeded). Each
///    endpoint gets an equal share of the time left, so the whole call, every round trip
///    included, ends within Options::timeout.
///  * The gateway's JSON: int64 values as strings, keys and values base64, false and zero fields
///    omitted (a failed txn has no "succeeded").
class EtcdBlockBackend final : public BlockBackend {
 public:
  struct Options {
    std::vector<std::string> endpoints;  ///< "http(s)://host:port", at least one
    std::string prefix = "/ibcni/";
    std::chrono::milliseconds timeout{5000};  ///< per public call
    http::TlsOptions tls;                     ///< caFile, certFile, keyFile (https endpoints)
    std::chrono::seconds leaseTtl{90};        ///< e.g. 3 x the renewal period
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

  [[nodiscard]] BackendResult<ClaimOutcome> claim(std::string_view pool, std::string_view block,
                                                  std::string_view node) override;
  [[nodiscard]] BackendResult<std::vector<Claim>> list(std::string_view pool) override;
  [[nodiscard]] BackendResult<ReleaseOutcome> release(std::string_view pool, std::string_view block,
                                                      std::string_view node, std::string_view version) override;
  [[nodiscard]] BackendResult<ClaimOutcome> claimAddress(std::string_view pool, std::string_view address,
                                                         std::string_view node, std::string_view owner) override;
  [[nodiscard]] BackendResult<std::vector<Claim>> listAddresses(std::string_view pool) override;
  [[nodiscard]] BackendResult<ReleaseOutcome> releaseAddress(std::string_view pool, std::string_view address,
                                                             std::string_view node, std::string_view version) override;
  [[nodiscard]] BackendResult<RenewOutcome> renew(std::string_view node, const std::vector<ClaimRef>& held) override;
  [[nodiscard]] BackendResult<PoolDefinition> definePool(std::string_view pool, const PoolDefinition& def) override;
  [[nodiscard]] BackendResult<ClaimOutcome> takeOver(std::string_view pool, std::string_view block,
                                                     std::string_view node, const Holder& seen) override;

  /// The node's current lease (0: none granted yet).
  [[nodiscard]] std::int64_t leaseId() const;
  /// Replaces the lease used for new claims (e.g. read back from the caller's file).
  void setLeaseId(std::int64_t id);

  /// The etcd key of a block / an address (for tests and `pools` listings).
  [[nodiscard]] std::string blockKey(std::string_view pool, std::string_view block) const;
  [[nodiscard]] std::string addressKey(std::string_view pool, std::string_view address) const;

  struct Call;  // one public call: its deadline and the errors met (etcd_block_backend.cpp)

 private:
  [[nodiscard]] BackendResult<ClaimOutcome> claimKey(Call& call, const std::string& key, std::string_view node,
                                                     std::string_view owner, bool address);
  [[nodiscard]] BackendResult<ReleaseOutcome> releaseKey(Call& call, const std::string& key, std::string_view node,
                                                         std::string_view version);
  [[nodiscard]] BackendResult<std::vector<Claim>> listPrefix(Call& call, const std::string& prefix);
  [[nodiscard]] BackendResult<std::int64_t> ensureLease(Call& call);
  [[nodiscard]] BackendResult<std::int64_t> grantLease(Call& call, std::int64_t replacing);

  http::HttpClient& client_;
  Options options_;
  mutable std::mutex leaseMutex_;
  std::int64_t leaseId_ = 0;
  std::atomic<std::size_t> preferred_{0};

  friend struct Call;
};

}  // namespace ibcni::ipam
