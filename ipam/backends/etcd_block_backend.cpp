// SPDX-License-Identifier: Apache-2.0
// The etcd block backend's options.
#include "ipam/backends/etcd_block_backend.h"

#include <memory>
#include <string>
#include <utility>

#include "ipam/claims/backend_support.h"

namespace ibcni::ipam {

namespace {

using backend::invalid;
using backend::printable;

}  // namespace

EtcdBlockBackend::EtcdBlockBackend(http::HttpClient& client, Options options)
    : ClaimRules(std::make_unique<EtcdClaimStore>(client, std::move(options))),
      etcd_(static_cast<const EtcdClaimStore&>(store())) {}

EtcdBlockBackend::Options EtcdBlockBackend::optionsFor(const config::ClusterConf& cluster, std::int64_t leaseId,
                                                      std::function<void(std::int64_t)> onLeaseGranted) {
  Options o;
  o.endpoints = cluster.etcd.endpoints;
  o.prefix = cluster.etcd.prefix;
  o.timeout = cluster.timeout;
  o.tls.caFile = cluster.etcd.caFile;
  o.tls.certFile = cluster.etcd.certFile;
  o.tls.keyFile = cluster.etcd.keyFile;
  o.leaseTtl = cluster.leaseDuration;
  o.leaseId = leaseId;
  o.onLeaseGranted = std::move(onLeaseGranted);
  return o;
}

BackendResult<void> EtcdBlockBackend::validate(const Options& options) {
  if (options.endpoints.empty()) {
    return std::unexpected(invalid("etcd.endpoints is empty: give at least one \"http(s)://host:port\""));
  }
  for (const auto& e : options.endpoints) {
    const bool scheme = e.starts_with("http://") || e.starts_with("https://");
    const auto host = e.substr(e.find("://") == std::string::npos ? 0 : e.find("://") + 3);
    if (!scheme || host.empty() || !printable(e) || e.find(' ') != std::string::npos || e.ends_with("/")) {
      return std::unexpected(invalid("etcd endpoint " + cni::quoted(e) +
                                     " is not \"http://host:port\" or \"https://host:port\" (no path)"));
    }
  }
  if (options.prefix.empty() || !options.prefix.ends_with("/") || !printable(options.prefix)) {
    return std::unexpected(invalid("etcd prefix " + cni::quoted(options.prefix) + " must be printable and end in '/'"));
  }
  if (options.timeout.count() <= 0 || options.leaseTtl.count() <= 0) {
    return std::unexpected(invalid("timeout and lease TTL must be positive"));
  }
  return {};
}

}  // namespace ibcni::ipam
