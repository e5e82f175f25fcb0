// SPDX-License-Identifier: Apache-2.0
// The embedded IPAM (ipam.type "ibcni-ipam"), run in process by ibcni and as the standalone
// ibcni-ipam plugin: policy (allocator.h) over a crash-safe store (file_store.h).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/cni/error.h"
#include "ibcni/config/ipam_conf.h"
#include "ibcni/ipam/ipam.h"
#include "ibcni/os/netns_checker.h"
#include "ipam/cluster/cluster_pool.h"
#include "ipam/cluster/node_identity.h"
#include "ipam/config/node_name.h"
#include "ipam/pool_report.h"

namespace ibcni::ipam {


/// Where a node keeps, across reboots, the configuration of each cluster pool whose store is in the
/// default data directory (on tmpfs, wiped by a reboot), so that the node agent finds the pool again
/// and gives back its idle blocks without waiting for the pool's next ADD (ipam/README.md, I7).
inline constexpr std::string_view kDefaultPoolIndexDir = "/var/lib/ibcni/pools";

/// The file in each pool's directory that keeps its configuration (IpamConfig::networkFile).
inline constexpr const char* kNetworkFileName = "network.json";

/// How an EmbeddedIpam is built; every field has a production default.
struct EmbeddedIpamOptions {
  std::string defaultDataDir = std::string(config::kDefaultIpamDataDir);     ///< used when ipam.dataDir is absent
  std::chrono::milliseconds lockTimeout = std::chrono::seconds(30);  ///< wait for the network's lock
  std::shared_ptr<os::NetnsChecker> netnsChecker;                        ///< null: os::systemNetnsChecker()
  std::function<std::chrono::system_clock::time_point()> clock;      ///< null: system_clock::now
  /// Cluster mode's boot clock (how long ago the node's holds were confirmed). Null: os::bootNow.
  std::function<os::BootStamp()> bootClock;
  /// Cluster mode (ipam.cluster): builds the backend. Null: a configuration with ipam.cluster is
  /// refused (error 4). The programs pass the production one (HTTP(S) through libcurl).
  BackendFactory backends;
  /// Where the node's name is read when ipam.cluster.nodeName is absent (then the host name).
  std::string nodeNameFile = std::string(config::kNodeNameFile);
  /// Where the configuration of each cluster pool stored under defaultDataDir is also kept, to
  /// survive a reboot (config::kDefaultPoolIndexDir in the programs; empty: not kept). Pools of
  /// another dataDir are not: the operator chose where they live.
  std::string poolIndexDir;
};

/// One cluster pool in the pool index (EmbeddedIpamOptions::poolIndexDir): its kind ("address" or
/// "guid"), its store directory and the file the store keeps its configuration in (network.json,
/// pool.json), as the store keeps it.
struct PoolIndexEntry {
  std::string kind;
  std::string storeDir;
  std::string fileName;
  std::string text;
};

/// Keeps `entry` in the pool index when the options keep one and the store is under their
/// defaultDataDir (written only when it changed). A failure is only logged: the index is for a
/// node agent after a reboot, not for the ADD.
void keepPoolIndex(const EmbeddedIpamOptions& options, const std::string& pool, const PoolIndexEntry& entry);

/// Every entry of the pool index at `dir` (unreadable or malformed ones skipped, logged).
[[nodiscard]] std::vector<PoolIndexEntry> readPoolIndex(const std::string& dir);



/// The embedded IPAM: host-local's configuration and results, plus exclusions, per-pod
/// reservations, crash-safe storage whose ADD cost does not grow as the pool fills, and
/// reclaiming of addresses whose pod's network namespace is gone.
///
/// Each call takes the IPAM's request (ibcni/ipam/ipam.h: the network's name, its `ipam` object as
/// config/ parsed it once, runtimeConfig.ips, args.cni.ips, prevResult, cni.dev/valid-attachments)
/// with the validated attachment and pod identity (Request::args, Request::cniArgs). Allocations live in
/// <dataDir>/<network name>; one lock file there serializes every process using the network, and
/// kNetworkFileName there keeps the configuration of the latest ADD, so that a node agent without
/// the runtime's files (`ibcni reconcile`) can reclaim the pool.
///
/// Error codes: 5 (store unreadable, corrupt or not
/// writable: the message names the file), 6/7 (configuration; the message names the field path),
/// 11 (lock busy past the timeout, or a requested/reserved address is held by a live attachment),
/// 50 (STATUS: cannot allocate), 107 (CHECK: no addresses held), 108 (a range set is exhausted).
class EmbeddedIpam final : public Ipam, public IpamUpkeep {
 public:
  explicit EmbeddedIpam(EmbeddedIpamOptions options = {});

  /// Allocates one address from each range set (idempotent per containerID and ifname) and
  /// returns what host-local would: ips (address with the subnet's prefix, gateway), routes and dns.
  [[nodiscard]] cni::Result<cni::AddResult> add(const Request& request) override;
  /// Releases what the attachment holds; succeeds when it holds nothing.
  [[nodiscard]] cni::Result<void> del(const Request& request) override;
  /// Fails (107) unless the attachment holds an address in every range set (and, when
  /// prevResult is given, each of them is in prevResult.ips).
  [[nodiscard]] cni::Result<void> check(const Request& request) override;
  /// Releases every allocation of the network not in cni.dev/valid-attachments.
  [[nodiscard]] cni::Result<void> gc(const Request& request) override;
  /// Fails (50) when the data directory is not writable or a range set has no free address.
  [[nodiscard]] cni::Result<void> status(const Request& request) override;

  /// Releases every allocation of the network whose network namespace is gone (the `gc`
  /// subcommand of ibcni-ipam, run by hand or by a timer). Allocations whose namespace exists or
  /// cannot be checked are kept.
  /// `dryRun`: release nothing, only say what would be released.
  [[nodiscard]] cni::Result<std::vector<ReleasedAllocation>> reclaim(const Request& request,
                                                                     bool dryRun = false);
  /// reclaim(), with what the periodic pass did to a cluster pool's blocks (renewed, given back,
  /// lost, adopted).
  [[nodiscard]] cni::Result<ReclaimOutcome> reclaimPool(const Request& request, bool dryRun) override;

  /// Cluster mode: the pool's blocks as the backend lists them (one list call, one listAddresses
  /// call), with their holders, this node's fill (its blocks only: the others' allocations live
  /// on their nodes) and ledger, and the totals. Changes nothing: no directory is created, no
  /// claim is made or renewed. Error 7 when the configuration has no ipam.cluster; a backend
  /// error as toCniError() words it (11 unreachable/timeout, naming the endpoint).
  [[nodiscard]] cni::Result<PoolReport> pools(const Request& request);

  /// Cluster mode: replaces the pool's definition with this configuration's once the pool is
  /// drained (`ibcni-ipam pools CONFIG --redefine`; ClusterPool::redefine). Error 7 naming the
  /// claims left.
  [[nodiscard]] cni::Result<PoolDefinition> redefinePool(const Request& request);

  /// Cluster mode: takes the drained pool out of the pools' registry and removes its definition, so
  /// that another pool may have its ranges (`ibcni-ipam pools CONFIG --retire`;
  /// ClusterPool::retire). Error 7 naming the claims left.
  [[nodiscard]] cni::Result<void> retirePool(const Request& request);

  /// Cluster mode, etcd backend: declares node `node` gone for good (`ibcni-ipam forget-node`), so
  /// that the other nodes' agents take over its claims. Refused (7) while its liveness lasts, and
  /// with the kubernetes backend (delete the Node object instead).
  [[nodiscard]] cni::Result<void> forgetNode(const Request& request, const std::string& node);

 private:
  /// The record of `key` made by this request's network in another store of `dataDir` than `skip`
  /// (a pool the configuration no longer names), released there. @return whether one was.
  [[nodiscard]] cni::Result<bool> releaseElsewhere(const Request& request, const std::string& dataDir,
                                                   const AttachmentKey& key, const std::string& skip);

  EmbeddedIpamOptions options_;
};

}  // namespace ibcni::ipam
