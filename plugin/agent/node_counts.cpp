// SPDX-License-Identifier: Apache-2.0
#include "plugin/agent/node_counts.h"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <tuple>
#include <utility>

#include "ipam/pool_use.h"

namespace ibcni::plugin {

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
  ipam::PoolUseReport use = ipam::readPoolUse(dataDirs, lockWait);
  for (auto& pool : use.pools) {
    for (const auto& [state, n] : pool.blocks) {
      out.blocks.push_back(BlockCount{pool.pool, state, n});
    }
    out.addresses.push_back(AddressCount{std::move(pool.network), std::move(pool.pool), pool.used, pool.free});
  }
  std::move(use.errors.begin(), use.errors.end(), std::back_inserter(out.errors));
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
