// SPDX-License-Identifier: Apache-2.0
// One call of the embedded IPAM (embedded_ipam*.cpp): the request's `ipam` configuration, the
// node-local store in the network's directory, the allocator over it and, in cluster mode, the pool
// the allocator hands out from.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ibcni/os/unique_fd.h"
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

/// Cluster mode: this node's name (which it claims blocks as), with s.dir set to the pool's
/// directory under `dataDir` (clusterPoolDir, in the space of s.config). Error 4 without
/// options.backends.
[[nodiscard]] cni::Result<std::string> clusterNode(Session& s, const std::string& dataDir,
                                                   const EmbeddedIpamOptions& options);

/// A store's directory, only to read it: used when it is there, reached under the rules of
/// os/safe_path.h as openSession() reaches it (a refusal is error 7, a failing system call `ioCode`).
/// @return it, open, or no descriptor when it is not there.
[[nodiscard]] cni::Result<os::UniqueFd> checkStoreDir(const std::string& dir, cni::Errc ioCode);

/// The store, the allocator and (cluster mode) the pool of `s`, whose config and dir are set: the
/// directory reached as openSession() says; the store in the space of s.config. `network` is the
/// network the pool's ledger and definition name, `node` this node's name (cluster mode).
[[nodiscard]] cni::Result<void> openStore(Session& s, const std::string& network, const std::string& node,
                                          const EmbeddedIpamOptions& options, cni::Errc ioCode, bool create);

/// The session of `request`: its store in <dataDir>/<network name> (cluster mode: the pool's
/// directory), reached and created under os/safe_path.h's rules (a refusal is error 7, a failing
/// system call `ioCode`). `create` false only reads: the directory is used when it is there.
[[nodiscard]] cni::Result<std::unique_ptr<Session>> openSession(const Request& request,
                                                                const EmbeddedIpamOptions& options,
                                                                cni::Errc ioCode = cni::Errc::kIoFailure,
                                                                bool create = true);

/// Makes the file at `path` hold `text` unless it does already (ADD inside owned blocks stays
/// free of needless writes): written aside and renamed over, so a reader sees one whole file.
/// @return whether it was written (it was missing or held something else).
[[nodiscard]] os::SysResult<bool> keepFile(const std::string& path, const std::string& text);

/// `options` with the production default of every field left empty (netns checker, clock, data
/// directory).
[[nodiscard]] EmbeddedIpamOptions withDefaults(EmbeddedIpamOptions options);

/// An allocation as the node agent's report lists it.
[[nodiscard]] ReleasedAllocation toReleased(const Allocation& a);

/// A store under its lock, with every allocation in it.
struct LockedStore {
  StoreLock lock;
  std::vector<Allocation> held;
};

/// Locks `store` (11 when it stays busy) and lists its allocations (5 when it cannot).
[[nodiscard]] cni::Result<LockedStore> lockAndList(Store& store);

/// Cluster mode's share of the node agent's pass over `s`: this node's blocks renewed, given
/// back, adopted (ClusterPool::maintain), under the store's lock, into out.upkeep. Nothing
/// without a pool.
[[nodiscard]] cni::Result<void> keepBlocks(Session& s, bool dryRun, ReclaimOutcome& out);

/// The report of the cluster pool of `s` for `network` (EmbeddedIpam::pools): one list call of
/// its blocks and one of its named values, this node's ledger and fill. Changes nothing.
[[nodiscard]] cni::Result<PoolReport> reportPool(Session& s, const std::string& network,
                                                 const EmbeddedIpamOptions& options);

}  // namespace ibcni::ipam
