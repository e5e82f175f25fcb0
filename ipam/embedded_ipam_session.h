// SPDX-License-Identifier: Apache-2.0
// One call of the embedded IPAM (embedded_ipam*.cpp): the request's `ipam` configuration, the
// node-local store in the network's directory, the allocator over it and, in cluster mode, the pool
// the allocator hands out from.
#pragma once

#include <memory>
#include <string>

#include "ipam/cluster/cluster_pool.h"
#include "ipam/embedded_ipam.h"
#include "ipam/policy/allocator.h"
#include "ipam/store/file_store.h"

namespace ibcni::ipam {

// One invocation's configuration, store and policy. Not movable: the allocator refers to the
// configuration (the request's) and the store.
struct Session {
  const IpamConfig& config;
  std::string dir;
  std::unique_ptr<FileStore> store;
  std::unique_ptr<Allocator> allocator;
  std::unique_ptr<ClusterPool> pool;  ///< cluster mode only
};

/// The session of `request`: its store in <dataDir>/<network name> (cluster mode: the pool's
/// directory), reached and created under os/safe_path.h's rules (a refusal is error 7, a failing
/// system call `ioCode`). `create` false only reads: the directory is used when it is there.
[[nodiscard]] cni::Result<std::unique_ptr<Session>> openSession(const Request& request,
                                                                const EmbeddedIpamOptions& options,
                                                                cni::Errc ioCode = cni::Errc::kIoFailure,
                                                                bool create = true);

}  // namespace ibcni::ipam
