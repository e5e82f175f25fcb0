// SPDX-License-Identifier: Apache-2.0
// The production backends of ibcni-ipam's cluster mode (ipam.cluster), for ibcni and ibcni-ipam:
// etcd's JSON gateway or Kubernetes Leases, over HTTP(S) with libcurl loaded on first use.
#pragma once

#include "ipam/cluster/cluster_pool.h"
#include "ipam/embedded_ipam.h"

namespace ibcni::plugin {

/// Builds the backend ipam.cluster.backend names. The HTTP client lives as long as the process;
/// libcurl is loaded only when a backend first sends a request (a node without libcurl runs
/// every node-local configuration, and gets error 4 naming libcurl in cluster mode).
[[nodiscard]] ipam::BackendFactory productionBackends();

/// The embedded IPAM's production options: defaults, with productionBackends().
[[nodiscard]] ipam::EmbeddedIpamOptions clusterCapable();

}  // namespace ibcni::plugin
