// SPDX-License-Identifier: Apache-2.0
// The etcd block backend's pools: their definitions, the pools' registry and the nodes' demands
// (etcd_kv_codec.h has their keys and values); forgetNode.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipam/backends/backend_support.h"
#include "ipam/backends/etcd_block_backend.h"
#include "ipam/backends/etcd_kv_codec.h"
#include "ibcni/os/time_text.h"

namespace ibcni::ipam {

namespace {

using backend::checkNames;
using backend::excerpt;
using backend::invalid;
using etcd::json;
using etcd_kv::definitionOf;
using etcd_kv::definitionValue;
using etcd_kv::nowText;
using etcd_kv::revisionOf;
using etcd_kv::SysClock;

/// The mod_revision a definition was seen at, as the caller gives it back.
BackendResult<std::int64_t> definitionVersion(std::string_view seen) {
  const auto version = revisionOf(seen);
  if (!version) {
    return std::unexpected(invalid("definition version " + cni::quoted(seen) + " is not an etcd mod_revision"));
  }
  return *version;
}

/// A definition read, as found (definition() and replaceDefinition() answer it so).
BackendResult<std::optional<PoolDefinition>> found(BackendResult<PoolDefinition> d) {
  if (!d) {
    return std::unexpected(std::move(d.error()));
  }
  return std::optional<PoolDefinition>(std::move(*d));
}

/// The definition of `pool` that the range op `i` of transaction `t` read back after it was
/// `done` ("read", "written").
BackendResult<PoolDefinition> definitionIn(const etcd::TxnAnswer& t, std::size_t i, std::string_view pool,
                                           const etcd::Call& c, const char* done) {
  auto kvs = etcd::rangeResult(t, i, c);
  if (!kvs) {
    return std::unexpected(std::move(kvs.error()));
  }
  if (kvs->empty()) {
    return std::unexpected(c.bad("the definition of pool " + cni::quoted(pool) + " vanished while it was " + done));
  }
  return definitionOf(kvs->front(), pool, c);
}

}  // namespace

BackendResult<PoolDefinition> EtcdBlockBackend::definePool(const PoolDefinition& def) {
  if (auto v = checkNames({def.pool}); !v) {
    return std::unexpected(v.error());
  }
  auto c = call();
  const std::string key = definitionKey(def.pool);
  const std::string value = definitionValue(def);
  auto t = etcd::txn(c, json::array({etcd::compareCreate(key, 0)}), json::array({etcd::putOp(key, value)}),
                     json::array({etcd::rangeOp(key)}));
  if (!t) {
    return std::unexpected(std::move(t.error()));
  }
  if (t->succeeded) {
    PoolDefinition stored = def;
    stored.identity = std::to_string(t->revision);
    return stored;
  }
  return definitionIn(*t, 0, def.pool, c, "read");
}

BackendResult<std::optional<PoolDefinition>> EtcdBlockBackend::definition(std::string_view pool) {
  if (auto v = checkNames({pool}); !v) {
    return std::unexpected(v.error());
  }
  auto c = call();
  auto kvs = etcd::range(c, definitionKey(pool));
  if (!kvs) {
    return std::unexpected(std::move(kvs.error()));
  }
  if (kvs->empty()) {
    return std::optional<PoolDefinition>();
  }
  return found(definitionOf(kvs->front(), pool, c));
}

BackendResult<PoolRegistry> EtcdBlockBackend::registry() {
  auto c = call();
  auto kvs = etcd::range(c, registryKey());
  if (!kvs) {
    return std::unexpected(std::move(kvs.error()));
  }
  PoolRegistry out;
  if (kvs->empty()) {
    return out;
  }
  const json doc = json::parse(kvs->front().value, nullptr, false);
  if (!doc.is_object() || !doc.contains("pools") || !doc["pools"].is_object()) {
    return std::unexpected(c.bad("the pools' registry is not {\"pools\": {...}}: " + excerpt(kvs->front().value)));
  }
  for (const auto& [pool, fields] : doc["pools"].items()) {
    if (!fields.is_string()) {
      return std::unexpected(c.bad("the pools' registry names pool " + cni::quoted(pool) + " without its fields"));
    }
    out.pools[pool] = fields.get<std::string>();
  }
  out.version = std::to_string(kvs->front().modRevision);
  return out;
}

BackendResult<bool> EtcdBlockBackend::writeRegistry(const PoolRegistry& registry) {
  auto c = call();
  const std::string key = registryKey();
  json pools = json::object();
  for (const auto& [pool, fields] : registry.pools) {
    pools[pool] = fields;
  }
  const auto version = registry.version.empty() ? std::optional<std::int64_t>(0) : revisionOf(registry.version);
  if (!version) {
    return std::unexpected(invalid("registry version " + cni::quoted(registry.version) + " is not an etcd mod_revision"));
  }
  const json compare = *version == 0 ? etcd::compareCreate(key, 0) : etcd::compareMod(key, *version);
  auto t = etcd::txn(c, json::array({compare}), json::array({etcd::putOp(key, json{{"pools", pools}}.dump())}),
                     json::array());
  if (!t) {
    return std::unexpected(std::move(t.error()));
  }
  return t->succeeded;
}

BackendResult<std::optional<PoolDefinition>> EtcdBlockBackend::replaceDefinition(const PoolDefinition& def,
                                                                                  std::string_view seen) {
  if (auto v = checkNames({def.pool}); !v) {
    return std::unexpected(v.error());
  }
  const auto version = definitionVersion(seen);
  if (!version) {
    return std::unexpected(std::move(version.error()));
  }
  auto c = call();
  const std::string key = definitionKey(def.pool);
  auto t = etcd::txn(c, json::array({etcd::compareMod(key, *version)}),
                     json::array({etcd::putOp(key, definitionValue(def)), etcd::rangeOp(key)}), json::array());
  if (!t) {
    return std::unexpected(std::move(t.error()));
  }
  if (!t->succeeded) {
    return std::optional<PoolDefinition>();
  }
  return found(definitionIn(*t, 1, def.pool, c, "written"));
}

BackendResult<bool> EtcdBlockBackend::removeDefinition(std::string_view pool, std::string_view seen) {
  if (auto v = checkNames({pool}); !v) {
    return std::unexpected(v.error());
  }
  const auto version = definitionVersion(seen);
  if (!version) {
    return std::unexpected(std::move(version.error()));
  }
  auto c = call();
  const std::string key = definitionKey(pool);
  auto t = etcd::txn(c, json::array({etcd::compareMod(key, *version)}), json::array({etcd::deleteOp(key)}),
                     json::array());
  if (!t) {
    return std::unexpected(std::move(t.error()));
  }
  return t->succeeded;
}

BackendResult<void> EtcdBlockBackend::demand(std::string_view pool, std::string_view node, int wanted) {
  if (auto v = checkNames({pool, node}); !v) {
    return std::unexpected(v.error());
  }
  auto c = call();
  const std::string key = demandKey(pool, node);
  const std::string value = json{{"node", node}, {"wanted", wanted}, {"requestedAt", nowText()}}.dump();
  // On the node's lease: a node whose agent stopped asks for nothing.
  std::int64_t lease = leaseId();
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (lease == 0 || attempt > 0) {
      auto g = grantLease(c, lease);
      if (!g) {
        return std::unexpected(std::move(g.error()));
      }
      lease = *g;
    }
    auto t = etcd::txn(c, json::array(), json::array({etcd::putOp(key, value, lease)}), json::array());
    if (t) {
      return {};
    }
    if (!etcd::leaseNotFound(t.error())) {
      return std::unexpected(std::move(t.error()));
    }
  }
  return std::unexpected(c.bad("the node's lease kept expiring while its demand was recorded"));
}

BackendResult<std::vector<Demand>> EtcdBlockBackend::demands(std::string_view pool) {
  if (auto v = checkNames({pool}); !v) {
    return std::unexpected(v.error());
  }
  auto c = call();
  const std::string prefix = demandKey(pool, "");
  auto kvs = etcd::rangePrefix(c, prefix);
  if (!kvs) {
    return std::unexpected(std::move(kvs.error()));
  }
  std::vector<Demand> out;
  for (const auto& kv : *kvs) {
    const json doc = json::parse(kv.value, nullptr, false);
    Demand d;
    d.node = kv.key.substr(prefix.size());
    if (doc.is_object()) {
      d.wanted = doc.contains("wanted") && doc["wanted"].is_number_integer() ? doc["wanted"].get<int>() : 1;
      if (doc.contains("requestedAt") && doc["requestedAt"].is_string()) {
        d.requestedAt = os::parseRfc3339(doc["requestedAt"].get<std::string>());
      }
    }
    d.lapsed = !d.requestedAt || *d.requestedAt + options_.leaseTtl < SysClock::now();
    out.push_back(std::move(d));
  }
  return out;
}

BackendResult<void> EtcdBlockBackend::withdraw(std::string_view pool, std::string_view node) {
  if (auto v = checkNames({pool, node}); !v) {
    return std::unexpected(v.error());
  }
  auto c = call();
  auto t = etcd::txn(c, json::array(), json::array({etcd::deleteOp(demandKey(pool, node))}),
                     json::array());
  if (!t) {
    return std::unexpected(std::move(t.error()));
  }
  return {};
}

BackendResult<void> EtcdBlockBackend::forgetNode(std::string_view node) {
  if (auto v = checkNames({node}); !v) {
    return std::unexpected(v.error());
  }
  auto c = call();
  auto t = etcd::txn(c, json::array({etcd::compareCreate(aliveKey(node), 0)}),
                     json::array({etcd::deleteOp(registeredKey(node))}), json::array());
  if (!t) {
    return std::unexpected(std::move(t.error()));
  }
  if (!t->succeeded) {
    return std::unexpected(invalid("node " + cni::quoted(node) + " is alive: its agent renewed its lease less than " +
                                   std::to_string(options_.leaseTtl.count()) +
                                   " s (leaseDurationSeconds) ago; forget a node only once it is gone for good (its "
                                   "agent stopped and its pods gone), after its lease has lapsed"));
  }
  return {};
}

}  // namespace ibcni::ipam
