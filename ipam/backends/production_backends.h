// SPDX-License-Identifier: Apache-2.0
// The production backends of ibcni-ipam's cluster mode (ipam.cluster), for ibcni and ibcni-ipam:
// etcd's JSON gateway or Kubernetes Leases, over the HTTP(S) client each executable gives
// (plugin/cli/production_http.h: ibcni loads libcurl on first use, ibcni-ipam relays through ibcni).
#pragma once

#include "ibcni/http/http_client.h"
#include "ipam/cluster/cluster_pool.h"
#include "ipam/embedded_ipam.h"

namespace ibcni::plugin {

/// Builds the backend ipam.cluster.backend names, sending its requests with `client`, which must
/// live as long as the factory and what it builds (the process's). Nothing is sent, and nothing
/// loaded, until a backend first sends a request: a node-local configuration never does.
[[nodiscard]] ipam::BackendFactory productionBackends(http::HttpClient& client);

/// The embedded IPAM's production options: defaults, with productionBackends(client).
[[nodiscard]] ipam::EmbeddedIpamOptions clusterCapable(http::HttpClient& client);

}  // namespace ibcni::plugin
