// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ibcni/http/http_client.h"
#include "ipam/backends/etcd_gateway.h"
#include "ipam/backends/etcd_kv_codec.h"
#include "ipam/backends/etcd_lease.h"
#include "ipam/claims/claim_store.h"

namespace ibcni::ipam {

/// The claim store on etcd 3.4's JSON gateway, over an injected http::HttpClient. Keys (`prefix`
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
/// mod_revision; every change is one Txn compared on them.
///  * create: compare create_revision == 0, success put + the node's registration, failure range.
///  * list: one txn reading the claims and the nodes' liveness keys (Holder::lapsed).
///  * keepAlive: keepalive of the node's lease (granted anew when it expired, reported), then
///    txns (100 claims each, below etcd's --max-txn-ops) that put the liveness and registration
///    keys and read the held claims.
///  * takeIfGone / removeIfGone: one txn comparing the claim's mod_revision with the one seen and the
///    holder's liveness and registration keys absent.
///  * forgetNode: one txn deleting the registration, compared on the liveness key being absent.
///  * Endpoints are tried in turn (etcd_gateway.h); a call ends within Options::timeout.
class EtcdClaimStore final : public claims::ClaimStore {
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

  /// `client` must outlive the store.
  EtcdClaimStore(http::HttpClient& client, Options options);

  [[nodiscard]] std::unique_ptr<claims::StoreCall> call() override;
  [[nodiscard]] bool renewsClaims() const override { return false; }

  /// The node's current lease (0: none granted yet).
  [[nodiscard]] std::int64_t leaseId() const { return lease_.id(); }
  [[nodiscard]] const etcd_kv::Keys& keys() const noexcept { return keys_; }
  [[nodiscard]] const Options& options() const noexcept { return options_; }

 private:
  friend class EtcdStoreCall;
  http::HttpClient& client_;
  Options options_;
  etcd_kv::Keys keys_;
  etcd::Endpoints endpoints_;
  etcd::NodeLease lease_;
  std::atomic<std::size_t> preferred_{0};
};

}  // namespace ibcni::ipam
