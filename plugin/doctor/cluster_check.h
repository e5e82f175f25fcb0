// SPDX-License-Identifier: Apache-2.0
// `ibcni doctor --config`'s checks of a cluster object (ipam.cluster, guidPool.cluster): who this
// node claims blocks as, whether it can reach the backend, the pool's blocks by the backend and by
// this node's ledger, and whether its holds are confirmed within the lease.
#pragma once

#include <functional>
#include <string>

#include "ibcni/cni/error.h"
#include "ibcni/config/ipam_conf.h"
#include "ipam/pool_report.h"
#include "plugin/doctor/config_check.h"

namespace ibcni::doctor {

/// A CNI error as one line: "msg (details) [CNI error N]".
[[nodiscard]] std::string errorText(const cni::Error& e);

/// Lists the pool's blocks (one backend call); null: the backend is not asked.
using PoolLister = std::function<cni::Result<ipam::PoolReport>()>;

/// The checks of cluster object `c`, named `poolText` in messages ("cluster pool \"p\" (etcd)"); what
/// holds goes to r.ok, what does not to r.problems (messages name c.path's keys).
[[nodiscard]] ClusterCheckReport checkClusterPool(const ConfigCheckInputs& in, const config::ClusterConf& c,
                                                  const std::string& poolText, const PoolLister& pools,
                                                  ConfigReport& r);

}  // namespace ibcni::doctor
