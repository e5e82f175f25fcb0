// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>

#include "ibcni/cni/error.h"
#include "ibcni/config/ipam_conf.h"
#include "ibcni/http/http_client.h"
#include "ipam/backends/k8s_claim_store.h"
#include "ipam/claims/claim_rules.h"

namespace ibcni::ipam {

struct Kubeconfig;

/// BlockBackend on the Kubernetes API: the claim protocol (claims/claim_rules.h) over the
/// Kubernetes claim store (k8s_claim_store.h has the Leases and the requests).
class KubernetesBlockBackend final : public claims::ClaimRules {
 public:
  using Options = K8sClaimStore::Options;

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

  /// The Lease name of a claim ("" when it would pass 253 characters), for tests and listings.
  [[nodiscard]] static std::string leaseName(ClaimKind kind, std::string_view pool, std::string_view name);
  /// The Lease name of a pool's definition.
  [[nodiscard]] static std::string poolLeaseName(std::string_view pool);
  /// The Lease name of a node's demand in a pool.
  [[nodiscard]] static std::string demandLeaseName(std::string_view pool, std::string_view node);
  /// A label's value for `value` (itself when valid as a label value, else a hash).
  [[nodiscard]] static std::string labelValue(std::string_view value);
};

}  // namespace ibcni::ipam
