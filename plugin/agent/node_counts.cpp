// SPDX-License-Identifier: Apache-2.0
#include "plugin/agent/node_counts.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <tuple>
#include <utility>

#include "ibcni/os/netns_checker.h"
#include "ipam/cluster/block_ledger.h"
#include "ipam/policy/allocator.h"
#include "ipam/store/file_store.h"

namespace ibcni::plugin {

namespace {

std::uint64_t clamp64(ipam::U128 v) {
  return v > std::numeric_limits<std::uint64_t>::max() ? std::numeric_limits<std::uint64_t>::max()
                                                       : static_cast<std::uint64_t>(v);
}

// A cluster pool's blocks in this node's ledger, by state; how many it owns.
std::uint64_t countBlocks(const std::string& dir, const std::string& pool, NodeCounts& out) {
  auto ledger = ipam::readLedger(dir);
  if (!ledger) {
    out.errors.push_back("cluster pool " + pool + ": " + ledger.error().describe());
    return 0;
  }
  if (!*ledger) {
    return 0;
  }
  std::map<std::string, std::uint64_t> byState;
  for (const auto& b : (*ledger)->blocks) {
    ++byState[ipam::ledgerStateName(b.state)];
  }
  for (const auto& [state, n] : byState) {
    out.blocks.push_back(BlockCount{pool, state, n});
  }
  return byState["owned"];
}

// One pool directory that keeps its configuration (network.json): its use, read under its lock.
void countPool(const std::filesystem::path& dir, bool cluster, std::chrono::milliseconds lockWait,
               NodeCounts& out) {
  auto kept = readPoolConfig(dir);
  if (!kept) {
    out.errors.push_back(dir.string() + "/network.json: not an ibcni-ipam configuration");
    return;
  }
  if (!*kept) {
    return;  // not a pool, or one written before pools kept their configuration
  }
  const auto& conf = *kept;
  const config::IpamConfig& ipamConf = **conf->embeddedIpam;
  const std::string pool = dir.filename().string();
  if (!cluster && ipamConf.cluster) {
    return;  // a node-local directory of a network now in cluster mode: its pool is under .cluster
  }
  ipam::FileStore store(ipam::FileStore::Options{dir.string(), ipam::Allocator::spansOf(ipamConf), lockWait, {},
                                                 ipam::spaceOf(ipamConf).kind});
  auto checker = os::systemNetnsChecker();
  ipam::Allocator allocator(ipamConf, store, *checker);
  auto usage = allocator.usage();
  if (!usage) {
    out.errors.push_back((cluster ? "cluster pool " : "pool ") + pool + ": " + usage.error().msg);
    return;
  }
  AddressCount c{conf->name, pool, 0, 0};
  for (const auto& set : *usage) {
    c.used += set.inUse;
    c.free += set.freeCount;
  }
  if (cluster) {
    const ipam::U128 owned = ipam::U128{countBlocks(dir.string(), pool, out)} * ipamConf.cluster->blockSize;
    c.free = owned > c.used ? clamp64(owned - c.used) : 0;
  }
  out.addresses.push_back(std::move(c));
}

void countPoolsIn(const std::string& dir, bool cluster, std::chrono::milliseconds lockWait, NodeCounts& out) {
  std::error_code ec;
  std::vector<std::filesystem::path> pools;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().starts_with(".")) {
      continue;
    }
    pools.push_back(entry.path());
  }
  if (ec && ec != std::errc::no_such_file_or_directory) {
    out.errors.push_back("cannot list " + dir + ": " + ec.message());
  }
  std::sort(pools.begin(), pools.end());
  for (const auto& p : pools) {
    countPool(p, cluster, lockWait, out);
  }
}

}  // namespace

void countAttachments(const std::vector<std::string>& stateDirs, const StoreFactory& makeStore, NodeCounts& out) {
  std::map<std::pair<std::string, std::string>, std::uint64_t> counts;
  for (const auto& dir : stateDirs) {
    std::error_code ec;
    if (!std::filesystem::exists(dir, ec)) {
      continue;
    }
    auto records = makeStore(dir)->list("");
    if (!records) {
      out.errors.push_back("cannot list the attachment records in " + dir + ": " + records.error().describe());
      continue;
    }
    for (const auto& r : *records) {
      ++counts[{r.network, r.mode}];
    }
  }
  for (const auto& [key, n] : counts) {
    out.attachments.push_back(AttachmentCount{key.first, key.second, n});
  }
}

void countPools(const std::vector<std::string>& dataDirs, std::chrono::milliseconds lockWait, NodeCounts& out) {
  for (const auto& dir : dataDirs) {
    countPoolsIn(dir, /*cluster=*/false, lockWait, out);
    countPoolsIn(dir + "/.cluster", /*cluster=*/true, lockWait, out);
  }
  std::sort(out.blocks.begin(), out.blocks.end(),
            [](const BlockCount& a, const BlockCount& b) {
              return std::tie(a.pool, a.state) < std::tie(b.pool, b.state);
            });
}

std::map<std::string, std::uint64_t> actionCounts(const ReconcileReport& report) {
  std::map<std::string, std::uint64_t> counts;
  for (const auto& a : report.attachments) {
    ++counts[a.action];
  }
  for (const auto& a : report.allocations) {
    ++counts[a.action];
  }
  return counts;
}

}  // namespace ibcni::plugin
