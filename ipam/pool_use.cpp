// SPDX-License-Identifier: Apache-2.0
#include "ipam/pool_use.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "ibcni/os/file_io.h"
#include "ibcni/os/netns_checker.h"
#include "ipam/cluster/block_ledger.h"
#include "ipam/embedded_ipam.h"
#include "ipam/embedded_ipam_session.h"
#include "ipam/policy/allocator.h"
#include "ipam/store/file_store.h"

namespace ibcni::ipam {

namespace {

std::uint64_t clamp64(U128 v) {
  return v > std::numeric_limits<std::uint64_t>::max() ? std::numeric_limits<std::uint64_t>::max()
                                                       : static_cast<std::uint64_t>(v);
}

// A cluster pool's blocks in this node's ledger, by state, into use.blocks; how many it owns.
std::uint64_t countBlocks(const std::string& dir, PoolUse& use, PoolUseReport& out) {
  auto ledger = readLedger(dir);
  if (!ledger) {
    out.errors.push_back("cluster pool " + use.pool + ": " + ledger.error().describe());
    return 0;
  }
  if (!*ledger) {
    return 0;
  }
  for (const auto& b : (*ledger)->blocks) {
    ++use.blocks[ledgerStateName(b.state)];
  }
  const auto owned = use.blocks.find("owned");
  return owned == use.blocks.end() ? 0 : owned->second;
}

// One pool directory that keeps its configuration: its use, read under its lock.
void readPool(const std::filesystem::path& dir, bool cluster, std::chrono::milliseconds lockWait,
              PoolUseReport& out) {
  auto kept = readPoolConfig(dir);
  if (!kept) {
    out.errors.push_back(kept.error().msg);
    return;
  }
  if (!*kept) {
    return;  // not a pool, or one written before pools kept their configuration
  }
  const config::NetConf& conf = **kept;
  const IpamConfig& ipamConf = **conf.embeddedIpam;
  if (!cluster && ipamConf.cluster) {
    return;  // a node-local directory of a network now in cluster mode: its pool is under .cluster
  }
  PoolUse use{conf.name, dir.filename().string(), cluster, 0, 0, {}};
  const std::string what = (cluster ? "cluster pool " : "pool ") + use.pool + ": ";
  auto dirFd = checkStoreDir(dir.string(), cni::Errc::kIoFailure);
  if (!dirFd || !*dirFd) {
    out.errors.push_back(what + (dirFd ? std::string("its directory is gone")
                                       : dirFd.error().msg + " (" + dirFd.error().details + ")"));
    return;
  }
  FileStore store(FileStore::Options{dir.string(), Allocator::spansOf(ipamConf), lockWait, std::move(*dirFd),
                                     spaceOf(ipamConf).kind});
  auto checker = os::systemNetnsChecker();
  Allocator allocator(ipamConf, store, *checker);
  auto usage = allocator.usage();
  if (!usage) {
    out.errors.push_back(what + usage.error().msg);
    return;
  }
  for (const auto& set : *usage) {
    use.used += set.inUse;
    use.free += set.freeCount;
  }
  if (cluster) {
    const U128 owned = U128{countBlocks(dir.string(), use, out)} * ipamConf.cluster->blockSize;
    use.free = owned > use.used ? clamp64(owned - use.used) : 0;
  }
  out.pools.push_back(std::move(use));
}

void readPoolsIn(const std::string& dir, bool cluster, std::chrono::milliseconds lockWait, PoolUseReport& out) {
  std::error_code ec;
  std::vector<std::filesystem::path> pools;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (!entry.path().filename().string().starts_with(".")) {
      pools.push_back(entry.path());
    }
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    out.errors.push_back("cannot list " + dir + ": " + ec.message());
  }
  std::sort(pools.begin(), pools.end());
  for (const auto& p : pools) {
    readPool(p, cluster, lockWait, out);
  }
}

}  // namespace

cni::Result<std::optional<config::NetConf>> readPoolConfig(const std::filesystem::path& poolDir) {
  const std::string file = (poolDir / kNetworkFileName).string();
  auto text = os::readFile(file, std::size_t{1} << 20);
  if (!text) {
    return std::optional<config::NetConf>();
  }
  auto conf = config::parseIpamNetworkFile(*text);
  if (!conf) {
    return cni::fail(cni::Errc::kIoFailure, file + ": " + conf.error().msg);
  }
  if (!conf->embeddedIpam || !*conf->embeddedIpam) {
    return cni::fail(cni::Errc::kIoFailure,
                     file + ": " + (conf->embeddedIpam ? conf->embeddedIpam->error().msg : "no ibcni-ipam object"));
  }
  return std::optional<config::NetConf>(std::move(*conf));
}

PoolUseReport readPoolUse(const std::vector<std::string>& dataDirs, std::chrono::milliseconds lockWait) {
  PoolUseReport out;
  for (const auto& dir : dataDirs) {
    readPoolsIn(dir, /*cluster=*/false, lockWait, out);
    readPoolsIn(dir + "/.cluster", /*cluster=*/true, lockWait, out);
  }
  return out;
}

}  // namespace ibcni::ipam
