// SPDX-License-Identifier: Apache-2.0
// The Kubernetes block backend's options and its Leases' names.
#include "ipam/backends/k8s_block_backend.h"

#include <memory>
#include <string>
#include <utility>

#include "ipam/backends/k8s_api.h"
#include "ipam/backends/k8s_lease_codec.h"
#include "ipam/backends/kubeconfig.h"
#include "ipam/claims/backend_support.h"

namespace ibcni::ipam {

namespace {

using backend::invalid;
using backend::printable;

}  // namespace

KubernetesBlockBackend::KubernetesBlockBackend(http::HttpClient& client, Options options)
    : ClaimRules(std::make_unique<K8sClaimStore>(client, std::move(options))) {}

cni::Result<KubernetesBlockBackend::Options> KubernetesBlockBackend::optionsFor(const config::ClusterConf& cluster) {
  auto kc = loadKubeconfig(cluster.kubernetes.kubeconfig, cluster.kubernetes.context);
  if (!kc) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     cluster.path + ".kubernetes.kubeconfig: " + kc.error().describe() +
                         "; the DaemonSet's installer writes " + std::string(config::kDefaultKubeconfig) +
                         " (docs/cluster-ipam.md, RBAC)");
  }
  Options o = optionsFrom(*kc);
  o.namespace_ = cluster.kubernetes.leaseNamespace;
  o.timeout = cluster.timeout;
  o.leaseDuration = cluster.leaseDuration;
  if (auto v = validate(o); !v) {
    return std::unexpected(
        toCniError(v.error(), cluster.path + ".kubernetes (kubeconfig " + cluster.kubernetes.kubeconfig + ")"));
  }
  return o;
}

KubernetesBlockBackend::Options KubernetesBlockBackend::optionsFrom(const Kubeconfig& kubeconfig) {
  Options o;
  o.server = kubeconfig.server;
  o.tls = kubeconfig.tls;
  o.token = kubeconfig.token;
  o.tokenFile = kubeconfig.tokenFile;
  return o;
}

BackendResult<void> KubernetesBlockBackend::validate(const Options& options) {
  const auto& s = options.server;
  const bool scheme = s.starts_with("http://") || s.starts_with("https://");
  if (!scheme || s.size() <= s.find("://") + 3 || !printable(s) || s.find(' ') != std::string::npos ||
      s.ends_with("/")) {
    return std::unexpected(invalid("Kubernetes API server " + cni::quoted(s) +
                                   " is not \"https://host:port\" (no trailing '/')"));
  }
  if (!k8s::dnsLabel(options.namespace_)) {
    return std::unexpected(invalid("namespace " + cni::quoted(options.namespace_) +
                                   " is not a DNS-1123 label (lower case letters, digits, '-')"));
  }
  if (options.timeout.count() <= 0 || options.leaseDuration.count() <= 0) {
    return std::unexpected(invalid("timeout and lease duration must be positive"));
  }
  return {};
}

std::string KubernetesBlockBackend::leaseName(ClaimKind kind, std::string_view pool, std::string_view name) {
  return k8s_leases::claimLeaseName(kind, pool, name);
}

std::string KubernetesBlockBackend::poolLeaseName(std::string_view pool) { return k8s_leases::poolLeaseName(pool); }

std::string KubernetesBlockBackend::demandLeaseName(std::string_view pool, std::string_view node) {
  return k8s_leases::demandLeaseName(pool, node);
}

std::string KubernetesBlockBackend::labelValue(std::string_view value) { return k8s::labelValue(value); }

}  // namespace ibcni::ipam
