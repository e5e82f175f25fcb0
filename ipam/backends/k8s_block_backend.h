// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/cni/error.h"
#include "ibcni/config/ipam_conf.h"
#include "ibcni/http/http_client.h"
#include "ibcni/ipam/block_backend.h"

namespace ibcni::ipam {

struct Kubeconfig;

/// BlockBackend on the Kubernetes API: one coordination.k8s.io/v1 Lease per claim (block or
/// address), per pool definition and per node's demand, in Options::namespace_, over an injected
/// http::HttpClient.
///
///  * Lease names (leaseName()): "ibcni-" + E(pool) + "--b--" + E(block key) for a block, "--a--" +
///    E(address) for an address, "--d--" + E(node) for a demand, "ibcni-" + E(pool) + "--pool" for
///    the definition, "ibcni-pool-registry" for the pools' registry. E keeps [a-y0-9] and keeps '.' and '-' between two such characters; any other
///    byte becomes 'z' and two hex digits. E never yields "--", so the first "--" ends the pool:
///    distinct (pool, kind, key) give distinct names. A name over 253 characters is refused.
///  * Labels ibcni.io/pool, ibcni.io/kind (block, address, pool, demand), ibcni.io/node select
///    lists; annotations ibcni.io/pool, ibcni.io/key, ibcni.io/owner, ibcni.io/pod, ibcni.io/lender
///    (addresses), ibcni.io/definition and ibcni.io/origin (the definition), ibcni.io/wanted (a
///    demand) are what is read back.
///  * spec: holderIdentity = the node, leaseDurationSeconds, acquireTime, renewTime (MicroTime),
///    leaseTransitions. Holder::identity = uid, version = resourceVersion.
///  * claim: POST (201); 409: GET, this node's → adopted (an address of the same pod for another
///    attachment: its owner rewritten by a PUT on the version read).
///  * release: GET, then DELETE with preconditions {uid, resourceVersion read} (409: again; 202:
///    kept by finalizers → kPending).
///  * renew: per held claim, GET then PUT of renewTime on the version read; the renewal is what
///    fences a taker (whose PUT is conditional on the version it saw).
///  * takeOver / removeGone: GET; the Lease must be as seen, lapsed (renewTime +
///    leaseDurationSeconds < now), and its holder's Node absent (404); then one PUT (or DELETE)
///    conditional on the version seen.
///  * A create in a namespace that does not exist (404 `namespaces "x" not found`) is
///    kInvalidArgument naming ipam.cluster.kubernetes.namespace.
///  * Errors: connect/DNS/broken transfer, 5xx and 429 → kUnreachable; the call's timeout →
///    kTimeout; TLS, 401, 403 → kAuth; an unexpected status or body → kBadAnswer. Every public call
///    ends within Options::timeout. Credentials: Options::token, or Options::tokenFile read again
///    for every call (a projected ServiceAccount token rotates).
class KubernetesBlockBackend final : public BlockBackend {
 public:
  struct Options {
    std::string server;                    ///< "https://host:port" (no trailing '/')
    std::string namespace_ = "kube-system";
    http::TlsOptions tls;                  ///< CA, client certificate
    std::string token;                     ///< bearer token ("" : none, or tokenFile's)
    std::string tokenFile;                 ///< read for every call when set (wins over token)
    std::chrono::milliseconds timeout{5000};         ///< per public call
    std::chrono::seconds leaseDuration{300};         ///< spec.leaseDurationSeconds
  };

  /// `client` must outlive the backend.
  KubernetesBlockBackend(http::HttpClient& client, Options options);

  /// The server, CA, client certificate and token(File) of a kubeconfig; namespace_, timeout and
  /// leaseDuration keep their defaults (the caller sets them from ipam.cluster).
  [[nodiscard]] static Options optionsFrom(const Kubeconfig& kubeconfig);
  /// The options ipam.cluster gives: its kubeconfig (and context) read, then the namespace,
  /// timeoutMs and leaseDurationSeconds. Error 7 naming the kubeconfig file and the field when it
  /// cannot be used.
  [[nodiscard]] static cni::Result<Options> optionsFor(const config::ClusterConf& cluster);

  /// Checks the options: server http(s)://, namespace a DNS-1123 label, timeout and
  /// leaseDuration positive.
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

  /// The Lease name of a claim ("" when it would pass 253 characters), for tests and listings.
  [[nodiscard]] static std::string leaseName(ClaimKind kind, std::string_view pool, std::string_view name);
  /// The Lease name of a pool's definition.
  [[nodiscard]] static std::string poolLeaseName(std::string_view pool);
  /// The Lease name of a node's demand in a pool.
  [[nodiscard]] static std::string demandLeaseName(std::string_view pool, std::string_view node);
  /// A label's value for `value` (itself when valid as a label value, else a hash).
  [[nodiscard]] static std::string labelValue(std::string_view value);

 private:
  Options options_;
  http::HttpClient& client_;
};

}  // namespace ibcni::ipam
