// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ibcni/ipam/guid_pool.h"

namespace ibcni::testing {

/// GUID pools in memory: hands out the lowest free GUID of the pool's range (or the requested one),
/// keeps every allocation per store directory and (network, containerID, ifname), records every
/// call and fails a call on request.
class FakeGuidPools final : public ipam::GuidPools {
 public:
  using Key = std::tuple<std::string, std::string, std::string>;  ///< network, containerID, ifname

  std::map<std::string, std::map<Key, net::Guid>> stores;  ///< store dir -> allocations
  std::vector<std::string> calls;                          ///< "allocate c1/net1", "release c1/net1"
  std::map<std::string, cni::Error> failures;              ///< "allocate"/"release" -> error, until cleared

  std::string storeDirOf(const config::GuidPoolConf& pool) const override {
    return (pool.dataDir.empty() ? std::string("/run/ibcni-ipam") : pool.dataDir) + "/.guid/" + pool.pool;
  }

  cni::Result<ipam::GuidLease> allocate(const ipam::GuidRequest& r) override {
    const cni::AttachmentKey key{r.args.containerId, r.args.ifName};
    if (auto e = record("allocate", key)) {
      return std::unexpected(*e);
    }
    auto& store = stores[storeDirOf(r.pool)];
    const Key mine{r.network, key.containerId, key.ifName};
    if (auto it = store.find(mine); it != store.end()) {
      return ipam::GuidLease{it->second, r.pool.pool, storeDirOf(r.pool)};
    }
    net::Guid pick{0};
    if (r.requested) {
      if (auto holder = holderOf(store, *r.requested)) {
        return cni::fail(cni::Errc::kTryAgainLater, "requested GUID (" + r.requestedFrom + ") " +
                                                        r.requested->toString() + " is held by " + *holder);
      }
      pick = *r.requested;
    } else {
      for (std::uint64_t v = r.pool.first.value;; ++v) {
        if (!holderOf(store, net::Guid{v})) {
          pick = net::Guid{v};
          break;
        }
        if (v == r.pool.last.value) {
          return cni::fail(cni::Errc::kIpamExhausted, "guidPool " + r.pool.pool + " has no free GUID");
        }
      }
    }
    store[mine] = pick;
    return ipam::GuidLease{pick, r.pool.pool, storeDirOf(r.pool)};
  }

  cni::Result<bool> release(const std::string& dir, const cni::AttachmentKey& key,
                            const std::string& network) override {
    if (auto e = record("release", key)) {
      return std::unexpected(*e);
    }
    auto it = stores.find(dir);
    return it != stores.end() && it->second.erase(Key{network, key.containerId, key.ifName}) > 0;
  }

  cni::Result<std::optional<net::Guid>> held(const std::string& dir, const cni::AttachmentKey& key) override {
    if (auto e = record("held", key)) {
      return std::unexpected(*e);
    }
    if (auto it = stores.find(dir); it != stores.end()) {
      for (const auto& [k, g] : it->second) {
        if (std::get<1>(k) == key.containerId && std::get<2>(k) == key.ifName) {
          return std::optional<net::Guid>(g);
        }
      }
    }
    return std::optional<net::Guid>{};
  }

  cni::Result<std::vector<ipam::ReleasedAllocation>> gc(const config::GuidPoolConf& pool, const std::string& network,
                                                        const std::vector<cni::AttachmentKey>& keep) override {
    if (auto e = record("gc", {network, ""})) {
      return std::unexpected(*e);
    }
    std::vector<ipam::ReleasedAllocation> released;
    auto& store = stores[storeDirOf(pool)];
    for (auto it = store.begin(); it != store.end();) {
      const auto& [net, cid, ifName] = it->first;
      if (net == network && std::find(keep.begin(), keep.end(), cni::AttachmentKey{cid, ifName}) == keep.end()) {
        released.push_back({cid, ifName, "", "", {it->second.toString()}, net});
        it = store.erase(it);
      } else {
        ++it;
      }
    }
    return released;
  }

  cni::Result<ipam::ReclaimOutcome> maintain(
      const std::string& dir, bool dryRun,
      const std::function<bool(const std::string&, const cni::AttachmentKey&)>& recorded) override {
    if (auto e = record("maintain", {dir, ""})) {
      return std::unexpected(*e);
    }
    ipam::ReclaimOutcome out;
    auto& store = stores[dir];
    for (auto it = store.begin(); it != store.end();) {
      const auto& [net, cid, ifName] = it->first;
      if (recorded(net, {cid, ifName})) {
        ++it;
        continue;
      }
      out.released.push_back({cid, ifName, "", "", {it->second.toString()}, net});
      it = dryRun ? std::next(it) : store.erase(it);
    }
    return out;
  }

  /// Every GUID held, over all stores.
  [[nodiscard]] std::size_t count() const {
    std::size_t n = 0;
    for (const auto& [dir, s] : stores) {
      n += s.size();
    }
    return n;
  }

 private:
  static std::optional<std::string> holderOf(const std::map<Key, net::Guid>& store, net::Guid g) {
    for (const auto& [k, v] : store) {
      if (v.value == g.value) {
        return std::get<1>(k) + "/" + std::get<2>(k);
      }
    }
    return std::nullopt;
  }

  std::optional<cni::Error> record(const std::string& verb, const cni::AttachmentKey& key) {
    calls.push_back(verb + " " + key.toString());
    if (auto it = failures.find(verb); it != failures.end()) {
      return it->second;
    }
    return std::nullopt;
  }
};

}  // namespace ibcni::testing
