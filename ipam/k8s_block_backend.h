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

/// BlockBackend on the Kubernetes API: one coordination.k8s.io/v1 Lease per claimed block and per
/// claimed single address, in Options::namespace_, over an injected http::HttpClient.
///
///  * Lease names (leaseName()): "ibcni-" + E(pool) + "--b--" + E(block key) for a block,
///    "--a--" + E(address) for an address, "ibcni-" + E(pool) + "--pool" for the pool's
///    definition. E keeps [a-y0-9] and keeps '.' and '-' between two such characters; any other
///    byte (z, upper case, ':', a '.' or '-' next to another or at an end...) becomes 'z' and two
///    hex digits. E never yields "--", so the first "--" ends the pool: distinct (pool, kind, key)
///    give distinct names ("10.1.0.0-27" -> "10.1.0.0-27", "fd00::-120" -> "fd00z3az3a-120").
///    A name over 253 characters is refused (kInvalidArgument).
///  * Labels ibcni.io/pool, ibcni.io/kind (block, address, pool), ibcni.io/node (the value itself when
///    it is a valid label value, else "h" + 16 hex digits of its hash) select lists; annotations
///    ibcni.io/pool, ibcni.io/key (the block key or the address), ibcni.io/owner (addresses),
///    ibcni.io/fingerprint and ibcni.io/origin (the definition) are what is read back.
///  * spec: holderIdentity = the node, leaseDurationSeconds = Options::leaseDuration,
///    acquireTime and renewTime (MicroTime), leaseTransitions. Holder::version = resourceVersion,
///    claimedAt = acquireTime, renewedAt = renewTime.
///  * claim: POST (201: kClaimed); 409 AlreadyExists: GET, this node's (and owner's) -> kAdopted,
///    another's -> kHeldByOther (deleted in between: POST again).
///  * release: GET (404: kGone; another holder: kNotOurs; another resourceVersion: kChanged), then
///    DELETE with preconditions {uid, resourceVersion} (404: kGone; 409: GET again to tell).
///  * renew: for each held claim, GET then PUT of renewTime conditional on the resourceVersion
///    read (409: once more); another holder: lost; absent: claimed again (reestablished) or lost.
///    RenewOutcome::renewed is true when every held claim was renewed in place (none lost or re-created).
///  * definePool: POST of the definition Lease (never renewed); 409: GET, the stored one.
///  * takeOver: GET the Lease (absent: a plain claim; another resourceVersion than `seen`'s:
///    kHeldByOther with the current holder); it must have expired (renewTime, else acquireTime,
///    + leaseDurationSeconds < now) and GET /api/v1/nodes/<holder> must be 404; then one PUT with
///    resourceVersion = seen.version: holderIdentity = node, new acquireTime/renewTime,
///    leaseTransitions + 1 (200: kClaimed; 409: GET again, kHeldByOther).
///  * Errors: connect/DNS/broken transfer and 5xx and 429 -> kUnreachable; the call's timeout ->
///    kTimeout; TLS, 401, 403 -> kAuth; an unexpected status or body -> kBadAnswer; every message
///    carries the Status's message. Every public call, each round trip included, ends within
///    Options::timeout. Requests are not retried (the caller's next pass is the retry).
///  * Credentials: the bearer token is Options::token, or the content of Options::tokenFile read
///    again for every call (a projected ServiceAccount token rotates).
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

  [[nodiscard]] BackendResult<ClaimOutcome> claim(std::string_view pool, std::string_view block,
                                                  std::string_view node) override;
  [[nodiscard]] BackendResult<std::vector<Claim>> list(std::string_view pool) override;
  [[nodiscard]] BackendResult<std::vector<Claim>> listNode(std::string_view pool, std::string_view node) override;
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

  /// The Lease name of a claim ("" when it would pass 253 characters), for tests and listings.
  [[nodiscard]] static std::string leaseName(ClaimKind kind, std::string_view pool, std::string_view name);
  /// The Lease name of a pool's definition.
  [[nodiscard]] static std::string poolLeaseName(std::string_view pool);
  /// A label's value for `value` (itself when valid as a label value, else a hash).
  [[nodiscard]] static std::string labelValue(std::string_view value);

  struct Call;  // one public call: its deadline and token (k8s_block_backend.cpp)

 private:
  http::HttpClient& client_;
  Options options_;
};

}  // namespace ibcni::ipam
