// SPDX-License-Identifier: Apache-2.0
#include "ipam/backends/production_backends.h"

#include "ipam/backends/etcd_block_backend.h"
#include "lib/http/curl_http_client.h"
#include "ipam/backends/k8s_block_backend.h"

namespace ibcni::plugin {

namespace {

http::HttpClient& httpClient() {
  static http::CurlHttpClient client;
  return client;
}

cni::Result<std::unique_ptr<ipam::BlockBackend>> etcdBackend(const config::ClusterConf& c,
                                                             const ipam::BackendContext& ctx) {
  auto o = ipam::EtcdBlockBackend::optionsFor(c, ctx.etcdLease, ctx.onLeaseGranted);
  if (auto v = ipam::EtcdBlockBackend::validate(o); !v) {
    return std::unexpected(ipam::toCniError(v.error(), "ipam.cluster.etcd"));
  }
  return std::make_unique<ipam::EtcdBlockBackend>(httpClient(), std::move(o));
}

}  // namespace

ipam::BackendFactory productionBackends() {
  return [](const config::ClusterConf& c,
            const ipam::BackendContext& ctx) -> cni::Result<std::unique_ptr<ipam::BlockBackend>> {
    if (c.backend == config::ClusterBackend::kEtcd) {
      return etcdBackend(c, ctx);
    }
    auto o = ipam::KubernetesBlockBackend::optionsFor(c);
    if (!o) {
      return std::unexpected(o.error());
    }
    return std::make_unique<ipam::KubernetesBlockBackend>(httpClient(), std::move(*o));
  };
}

ipam::EmbeddedIpamOptions clusterCapable() {
  ipam::EmbeddedIpamOptions o;
  o.backends = productionBackends();
  return o;
}

}  // namespace ibcni::plugin
