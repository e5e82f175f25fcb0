// SPDX-License-Identifier: Apache-2.0
// The Kubernetes block backend's pools: their definitions, the pools' registry and the nodes'
// demands, each a Lease (k8s_lease_codec.h); forgetNode.
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipam/backends/backend_support.h"
#include "ipam/backends/k8s_api.h"
#include "ipam/backends/k8s_block_backend.h"
#include "ipam/backends/k8s_lease_codec.h"
#include "ibcni/os/time_text.h"

namespace ibcni::ipam {

namespace {

using backend::checkNames;
using backend::invalid;
using k8s::SysClock;
using k8s_leases::LeaseSession;
using k8s_leases::LeaseView;
using k8s_leases::changing;
using k8s_leases::definitionAnnotations;
using k8s_leases::definitionLease;
using k8s_leases::definitionOf;
using k8s_leases::demandLease;
using k8s_leases::json;
using k8s_leases::kAnnPool;
using k8s_leases::kAnnPools;
using k8s_leases::kAnnWanted;
using k8s_leases::kAttempts;
using k8s_leases::kLabelKind;
using k8s_leases::kLabelPool;
using k8s_leases::kRegistryLease;
using k8s_leases::labels;
using k8s_leases::newLease;
using k8s_leases::updateOf;

/// Runs `then(call, name, lease)` on pool `pool`'s definition Lease as read in a call of its own
/// (nullopt when there is none); the pool's name is checked before anything is sent.
template <class T, class Then>
BackendResult<T> onDefinitionLease(http::HttpClient& client, const KubernetesBlockBackend::Options& o,
                                   std::string_view pool, Then then) {
  auto name = definitionLease(pool);
  if (!name) {
    return std::unexpected(name.error());
  }
  LeaseSession s(client, o);
  auto cur = s.call.getLease(*name);
  if (!cur) {
    return std::unexpected(cur.error());
  }
  return then(s.call, *name, *cur);
}

/// The definition `v` holds, as found (definition() and replaceDefinition() answer it so).
BackendResult<std::optional<PoolDefinition>> foundDefinition(const LeaseView& v, std::string_view pool,
                                                             const k8s::Call& call) {
  auto d = definitionOf(v, pool, call);
  if (!d) {
    return std::unexpected(d.error());
  }
  return std::optional<PoolDefinition>(std::move(*d));
}

}  // namespace

BackendResult<PoolDefinition> KubernetesBlockBackend::definePool(const PoolDefinition& def) {
  auto defLease = definitionLease(def.pool);
  if (!defLease) {
    return std::unexpected(defLease.error());
  }
  const std::string& name = *defLease;
  LeaseSession s(client_, options_);
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    const json annotations = definitionAnnotations(def);
    auto created = s.call.createLease(
        newLease(name, options_.namespace_, labels(def.pool, "pool", ""), annotations, "", options_.leaseDuration));
    if (!created) {
      return std::unexpected(created.error());
    }
    if (*created) {
      return definitionOf(**created, def.pool, s.call);
    }
    auto cur = s.call.getLease(name);
    if (!cur) {
      return std::unexpected(cur.error());
    }
    if (*cur) {
      return definitionOf(**cur, def.pool, s.call);
    }
  }
  return std::unexpected(changing(name, s.call));
}

BackendResult<std::optional<PoolDefinition>> KubernetesBlockBackend::definition(std::string_view pool) {
  using Found = std::optional<PoolDefinition>;
  return onDefinitionLease<Found>(
      client_, options_, pool,
      [pool](k8s::Call& call, const std::string&, const std::optional<LeaseView>& cur) -> BackendResult<Found> {
        if (!cur) {
          return Found();
        }
        return foundDefinition(*cur, pool, call);
      });
}

BackendResult<PoolRegistry> KubernetesBlockBackend::registry() {
  LeaseSession s(client_, options_);
  auto cur = s.call.getLease(kRegistryLease);
  if (!cur) {
    return std::unexpected(cur.error());
  }
  PoolRegistry out;
  if (!*cur) {
    return out;
  }
  const json pools = json::parse((**cur).annotation(kAnnPools), nullptr, false);
  if (!pools.is_object()) {
    return std::unexpected(BackendError{BackendErrc::kBadAnswer, options_.server,
                                        std::string("Lease ") + kRegistryLease + " has no " + kAnnPools +
                                            " annotation holding a JSON object",
                                        0});
  }
  for (const auto& [pool, fields] : pools.items()) {
    if (fields.is_string()) {
      out.pools[pool] = fields.get<std::string>();
    }
  }
  out.version = (**cur).resourceVersion;
  return out;
}

BackendResult<bool> KubernetesBlockBackend::writeRegistry(const PoolRegistry& registry) {
  json pools = json::object();
  for (const auto& [pool, fields] : registry.pools) {
    pools[pool] = fields;
  }
  const json annotations{{kAnnPools, pools.dump()}};
  LeaseSession s(client_, options_);
  if (registry.version.empty()) {
    json body = newLease(kRegistryLease, options_.namespace_, json{{kLabelKind, "registry"}}, annotations, "",
                         options_.leaseDuration);
    auto created = s.call.createLease(body);
    if (!created) {
      return std::unexpected(created.error());
    }
    return created->has_value();
  }
  auto cur = s.call.getLease(kRegistryLease);
  if (!cur) {
    return std::unexpected(cur.error());
  }
  if (!*cur || (**cur).resourceVersion != registry.version) {
    return false;
  }
  json body = updateOf(**cur, options_.namespace_);
  body["metadata"]["annotations"] = annotations;
  auto put = s.call.putLease(kRegistryLease, body);
  if (!put) {
    return std::unexpected(put.error());
  }
  return put->has_value();
}

BackendResult<std::optional<PoolDefinition>> KubernetesBlockBackend::replaceDefinition(const PoolDefinition& def,
                                                                                        std::string_view seen) {
  using Found = std::optional<PoolDefinition>;
  return onDefinitionLease<Found>(
      client_, options_, def.pool,
      [&](k8s::Call& call, const std::string& name, const std::optional<LeaseView>& cur) -> BackendResult<Found> {
        if (!cur || cur->resourceVersion != seen) {
          return Found();
        }
        json body = updateOf(*cur, options_.namespace_);
        body["metadata"]["annotations"] = definitionAnnotations(def);
        auto put = call.putLease(name, body);
        if (!put) {
          return std::unexpected(put.error());
        }
        if (!*put) {
          return Found();
        }
        return foundDefinition(**put, def.pool, call);
      });
}

BackendResult<bool> KubernetesBlockBackend::removeDefinition(std::string_view pool, std::string_view seen) {
  return onDefinitionLease<bool>(
      client_, options_, pool,
      [seen](k8s::Call& call, const std::string& name, const std::optional<LeaseView>& cur) -> BackendResult<bool> {
        if (!cur) {
          return true;
        }
        if (cur->resourceVersion != seen) {
          return false;
        }
        auto status = call.deleteLease(name, cur->uid, cur->resourceVersion);
        if (!status) {
          return std::unexpected(status.error());
        }
        return *status == k8s::Call::Deleted::kDeleted || *status == k8s::Call::Deleted::kGone;
      });
}

BackendResult<void> KubernetesBlockBackend::demand(std::string_view pool, std::string_view node, int wanted) {
  auto demandName = demandLease(pool, node);
  if (!demandName) {
    return std::unexpected(demandName.error());
  }
  const std::string& name = *demandName;
  LeaseSession s(client_, options_);
  const json annotations{{kAnnPool, pool}, {kAnnWanted, std::to_string(wanted)}};
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    auto created = s.call.createLease(newLease(name, options_.namespace_, labels(pool, "demand", node), annotations,
                                               node, options_.leaseDuration));
    if (!created) {
      return std::unexpected(created.error());
    }
    if (*created) {
      return {};
    }
    auto cur = s.call.getLease(name);
    if (!cur) {
      return std::unexpected(cur.error());
    }
    if (!*cur) {
      continue;
    }
    json body = updateOf(**cur, options_.namespace_);
    body["metadata"]["annotations"] = annotations;
    body["spec"]["renewTime"] = os::rfc3339Micros(SysClock::now());
    auto put = s.call.putLease(name, body);
    if (!put) {
      return std::unexpected(put.error());
    }
    if (*put) {
      return {};
    }
  }
  return std::unexpected(changing(name, s.call));
}

BackendResult<std::vector<Demand>> KubernetesBlockBackend::demands(std::string_view pool) {
  if (auto v = checkNames({pool}); !v) {
    return std::unexpected(v.error());
  }
  LeaseSession s(client_, options_);
  auto leases = s.call.listLeases(std::string(kLabelPool) + "=" + labelValue(pool) + "," + kLabelKind + "=demand");
  if (!leases) {
    return std::unexpected(leases.error());
  }
  std::vector<Demand> out;
  for (const auto& v : *leases) {
    if (v.annotation(kAnnPool) != pool) {
      continue;
    }
    Demand d;
    d.node = v.holderIdentity;
    d.requestedAt = v.renewTime;
    d.wanted = std::max(1, std::atoi(v.annotation(kAnnWanted).c_str()));
    d.lapsed = v.lapsed(SysClock::now(), options_.leaseDuration);
    out.push_back(std::move(d));
  }
  return out;
}

BackendResult<void> KubernetesBlockBackend::withdraw(std::string_view pool, std::string_view node) {
  auto demandName = demandLease(pool, node);
  if (!demandName) {
    return std::unexpected(demandName.error());
  }
  const std::string& name = *demandName;
  LeaseSession s(client_, options_);
  auto status = s.call.deleteLease(name, "", "");
  if (!status) {
    return std::unexpected(status.error());
  }
  return {};
}

BackendResult<void> KubernetesBlockBackend::forgetNode(std::string_view node) {
  return std::unexpected(invalid("with the kubernetes backend a node is gone when its Node object is: `kubectl delete "
                                 "node " +
                                 std::string(node) + "` once it is drained; its claims are then taken over"));
}

}  // namespace ibcni::ipam
