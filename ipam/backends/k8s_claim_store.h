// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "ibcni/http/http_client.h"
#include "ipam/backends/k8s_api.h"
#include "ipam/claims/claim_store.h"

namespace ibcni::ipam {

/// The claim store on the Kubernetes API: one coordination.k8s.io/v1 Lease per claim (block or
/// address), per pool definition and per node's demand, in Options::namespace_, over an injected
/// http::HttpClient. A Lease fits: it is small, namespaced, has a holder and a renewal time that
/// say whose it is and whether its holder still renews it, and every write is compared on its
/// resourceVersion; RBAC can grant exactly it.
///
///  * Lease names (k8s_lease_codec.h): "ibcni-" + E(pool) + "--b--" + E(block key) for a block,
///    "--a--" + E(address) for an address, "--d--" + E(node) for a demand, "ibcni-" + E(pool) +
///    "--pool" for the definition, "ibcni-pool-registry" for the pools' registry. E keeps [a-y0-9]
///    and keeps '.' and '-' between two such characters; any other byte becomes 'z' and two hex
///    digits. E never yields "--", so the first "--" ends the pool: distinct (pool, kind, key) give
///    distinct names. A name over 253 characters is refused.
///  * Labels ibcni.io/pool, ibcni.io/kind (block, address, pool, demand), ibcni.io/node select
///    lists; annotations ibcni.io/pool, ibcni.io/key, ibcni.io/owner, ibcni.io/pod, ibcni.io/lender
///    (addresses), ibcni.io/definition and ibcni.io/origin (the definition), ibcni.io/wanted (a
///    demand) are what is read back.
///  * spec: holderIdentity = the node, leaseDurationSeconds, acquireTime, renewTime (MicroTime),
///    leaseTransitions. Holder::identity = uid, version = resourceVersion.
///  * readDefinition: a GET not older than the newest write of this store's calls (k8s::WriteMark):
///    the read after a claim sees every definition written before it, from the watch cache.
///  * create: POST (201; 409: GET). update: PUT on the version seen, renewTime now; a node's
///    renewal rewrites each claim it holds so (renewsClaims()): that is what fences a taker, whose
///    PUT is conditional on the version it saw.
///  * remove: DELETE with preconditions {uid, resourceVersion} (202 or a deletionTimestamp: kept by
///    finalizers, kPending).
///  * takeIfGone / removeIfGone: GET; the Lease must be as seen, lapsed (renewTime +
///    leaseDurationSeconds < now), and its holder's Node absent (404); then one PUT (or DELETE)
///    conditional on the version seen.
///  * A create in a namespace that does not exist (404 `namespaces "x" not found`) is
///    kInvalidArgument naming ipam.cluster.kubernetes.namespace.
///  * Errors: connect/DNS/broken transfer, 5xx and 429 → kUnreachable; the call's timeout →
///    kTimeout; TLS, 401, 403 → kAuth; an unexpected status or body → kBadAnswer. Every public call
///    ends within Options::timeout. Credentials: Options::token, or Options::tokenFile read again
///    for every call (a projected ServiceAccount token rotates).
class K8sClaimStore final : public claims::ClaimStore {
 public:
  struct Options {
    std::string server;                    ///< "https://host:port" (no trailing '/')
    std::string namespace_ = "kube-system";
    http::TlsOptions tls;                  ///< CA, client certificate
    std::string token;                     ///< bearer token ("" : none, or tokenFile's)
    std::string tokenFile;                 ///< read for every call when set (wins over token)
    std::chrono::milliseconds timeout{5000};         ///< per public call
    std::chrono::seconds leaseDuration{300};         ///< spec.leaseDurationSeconds
    k8s::WriteMark* writes = nullptr;  ///< set by the store: where its calls note their writes
  };

  /// `client` must outlive the store.
  K8sClaimStore(http::HttpClient& client, Options options) : client_(client), options_(std::move(options)) {
    options_.writes = &writes_;
  }

  [[nodiscard]] std::unique_ptr<claims::StoreCall> call() override;
  [[nodiscard]] bool renewsClaims() const override { return true; }

 private:
  http::HttpClient& client_;
  Options options_;
  k8s::WriteMark writes_;  ///< its calls' newest write: a definition read comes after it (readDefinition)
};

}  // namespace ibcni::ipam
