// SPDX-License-Identifier: Apache-2.0
#include "ipam/backends/production_backends.h"

#include "ipam/backends/etcd_block_backend.h"
#include "ipam/backends/k8s_block_backend.h"

namespace ibcni::plugin {

namespace {

cni::Result<std::unique_ptr<ipam::BlockBackend>> etcdBackend(http::HttpClient& client, const config::ClusterConf& c,
                                                             const ipam::BackendContext& ctx) {
  auto o = ipam::EtcdBlockBackend::optionsFor(c, ctx.etcdLease, ctx.onLeaseGranted);
  if (auto v = ipam::EtcdBlockBackend::validate(o); !v) {
    return std::unexpected(ipam::toCniError(v.error(), c.path + ".etcd"));
  }
  return std::make_unique<ipam::EtcdBlockBackend>(client, std::move(o));
}

}  // namespace

ipam::BackendFactory productionBackends(http::HttpClient& client) {
  return [&client](const config::ClusterConf& c,
            const ipam::BackendContext& ctx) -> cni::Result<std::unique_ptr<ipam::BlockBackend>> {
    if (c.backend == config::ClusterBackend::kEtcd) {
      return etcdBackend(client, c, ctx);
    }
    auto o = ipam::KubernetesBlockBackend::optionsFor(c);
    if (!o) {
      return std::unexpected(o.error());
    }
    return std::make_unique<ipam::KubernetesBlockBackend>(client, std::move(*o));
  };
}

ipam::EmbeddedIpamOptions clusterCapable(http::HttpClient& client) {
  ipam::EmbeddedIpamOptions o;
  o.backends = productionBackends(client);
  o.poolIndexDir = std::string(ipam::kDefaultPoolIndexDir);
  return o;
}

}  // namespace ibcni::plugin
