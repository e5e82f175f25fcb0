// SPDX-License-Identifier: Apache-2.0
#include "ipam/backends/etcd_kv_codec.h"

#include <charconv>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipam/claims/backend_support.h"
#include "ibcni/os/time_text.h"

namespace ibcni::ipam {

namespace etcd_kv {

using backend::excerpt;
using etcd::json;
using etcd::Kv;

std::string nowText() { return os::rfc3339(SysClock::now()); }

std::string claimValue(std::string_view node, const ClaimAttrs& attrs, const std::string& claimedAt) {
  json v{{"node", node}, {"claimedAt", claimedAt}};
  for (auto [key, field] : {std::pair{"owner", &attrs.owner}, std::pair{"pod", &attrs.pod},
                            std::pair{"lender", &attrs.lender}}) {
    if (!field->empty()) {
      v[key] = *field;
    }
  }
  return v.dump();
}

std::string nodeValue(std::string_view node, const char* when) {
  return json{{"node", node}, {when, nowText()}}.dump();
}

/// The holder a claim's value names; identity and version from the key's revisions.
BackendResult<Holder> holderOf(const Kv& kv, const etcd::Call& call) {
  const json doc = json::parse(kv.value, nullptr, false);
  if (!doc.is_object() || !doc.contains("node") || !doc["node"].is_string()) {
    return std::unexpected(call.bad("key " + cni::quoted(kv.key) + " holds " + excerpt(kv.value) +
                                    ", not {\"node\":...}"));
  }
  Holder h;
  h.node = doc["node"].get<std::string>();
  const auto str = [&doc](const char* k) {
    return doc.contains(k) && doc[k].is_string() ? doc[k].get<std::string>() : std::string();
  };
  h.attrs = ClaimAttrs{str("owner"), str("pod"), str("lender")};
  if (auto at = str("claimedAt"); !at.empty()) {
    h.claimedAt = os::parseRfc3339(at);
  }
  h.identity = std::to_string(kv.createRevision);
  h.version = std::to_string(kv.modRevision);
  h.stale = kv.lease != 0;
  return h;
}

json ops(std::initializer_list<json> list) {
  json out = json::array();
  for (const auto& op : list) {
    out.push_back(op);
  }
  return out;
}

BackendResult<std::int64_t> revision(std::string_view version, std::string_view what) {
  if (const auto r = revisionOf(version)) {
    return *r;
  }
  return std::unexpected(
      backend::invalid(std::string(what) + " version " + cni::quoted(version) + " is not an etcd mod_revision"));
}

Holder holderNow(std::string_view node, const ClaimAttrs& attrs, std::string identity, std::int64_t revision,
                 const std::string& at) {
  Holder h;
  h.node = node;
  h.attrs = attrs;
  h.identity = std::move(identity);
  h.version = std::to_string(revision);
  h.claimedAt = os::parseRfc3339(at);
  return h;
}

std::optional<std::int64_t> revisionOf(std::string_view text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v <= 0) {
    return std::nullopt;
  }
  return v;
}

BackendResult<PoolDefinition> definitionOf(const Kv& kv, std::string_view pool, const etcd::Call& call) {
  const json doc = json::parse(kv.value, nullptr, false);
  if (!doc.is_object() || !doc.contains("fields") || !doc["fields"].is_string()) {
    return std::unexpected(call.bad("definition of pool " + cni::quoted(pool) + " is not {\"fields\": ...}: " +
                                    excerpt(kv.value)));
  }
  const auto flag = [&](const char* name) {
    return doc.contains(name) && doc[name].is_boolean() && doc[name].get<bool>();
  };
  return PoolDefinition{std::string(pool), doc["fields"].get<std::string>(), doc.value("origin", std::string()),
                        std::to_string(kv.modRevision), flag("closed"), flag("registered")};
}

std::string definitionValue(const PoolDefinition& def) {
  json v{{"fields", def.fields}, {"origin", def.origin}};
  if (def.closed) {
    v["closed"] = true;
  }
  if (def.registered) {
    v["registered"] = true;
  }
  return v.dump();
}

BackendResult<std::optional<Holder>> holderIn(BackendResult<std::vector<Kv>> kvs, const etcd::Call& call) {
  if (!kvs) {
    return std::unexpected(std::move(kvs.error()));
  }
  if (kvs->empty()) {
    return std::optional<Holder>();
  }
  auto h = holderOf(kvs->front(), call);
  if (!h) {
    return std::unexpected(std::move(h.error()));
  }
  return std::optional<Holder>(std::move(*h));
}

BackendResult<std::optional<PoolDefinition>> definitionIn(BackendResult<std::vector<Kv>> kvs, std::string_view pool,
                                                          const etcd::Call& call) {
  if (!kvs) {
    return std::unexpected(std::move(kvs.error()));
  }
  if (kvs->empty()) {
    return std::optional<PoolDefinition>();
  }
  auto d = definitionOf(kvs->front(), pool, call);
  if (!d) {
    return std::unexpected(std::move(d.error()));
  }
  return std::optional<PoolDefinition>(std::move(*d));
}

BackendResult<std::vector<Claim>> claimsIn(const etcd::TxnAnswer& t, ClaimKind kind, std::string_view prefix,
                                           const Keys& keys, std::optional<std::string_view> node,
                                           const etcd::Call& call) {
  auto claims = etcd::rangeResult(t, 0, call);
  auto liveness = etcd::rangeResult(t, 1, call);
  if (!claims || !liveness) {
    return std::unexpected(!claims ? std::move(claims.error()) : std::move(liveness.error()));
  }
  const std::string nodes = keys.nodes();
  std::set<std::string> alive;
  for (const auto& kv : *liveness) {
    if (kv.key.ends_with("/alive")) {
      alive.insert(kv.key.substr(nodes.size(), kv.key.size() - nodes.size() - 6));
    }
  }
  std::vector<Claim> out;
  for (const auto& kv : *claims) {
    auto h = holderOf(kv, call);
    if (!h) {
      return std::unexpected(std::move(h.error()));
    }
    if (!node || h->node == *node) {
      h->lapsed = !alive.contains(h->node);
      out.push_back(Claim{kind, kv.key.substr(prefix.size()), std::move(*h)});
    }
  }
  return out;
}

BackendResult<claims::Removed> removedBy(BackendResult<etcd::TxnAnswer> t, std::size_t i, const etcd::Call& call) {
  if (!t) {
    return std::unexpected(std::move(t.error()));
  }
  if (t->succeeded) {
    return claims::Removed::kDeleted;
  }
  auto kvs = etcd::rangeResult(*t, i, call);
  if (!kvs) {
    return std::unexpected(std::move(kvs.error()));
  }
  return kvs->empty() ? claims::Removed::kGone : claims::Removed::kConflict;
}

BackendResult<PoolRegistry> registryOf(const Kv& kv, const etcd::Call& call) {
  const json doc = json::parse(kv.value, nullptr, false);
  if (!doc.is_object() || !doc.contains("pools") || !doc["pools"].is_object()) {
    return std::unexpected(call.bad("the pools' registry is not {\"pools\": {...}}: " + excerpt(kv.value)));
  }
  PoolRegistry out;
  for (const auto& [pool, fields] : doc["pools"].items()) {
    if (!fields.is_string()) {
      return std::unexpected(call.bad("the pools' registry names pool " + cni::quoted(pool) + " without its fields"));
    }
    out.pools[pool] = fields.get<std::string>();
  }
  out.version = std::to_string(kv.modRevision);
  return out;
}

std::string registryValue(const PoolRegistry& registry) {
  json pools = json::object();
  for (const auto& [pool, fields] : registry.pools) {
    pools[pool] = fields;
  }
  return json{{"pools", pools}}.dump();
}

std::string demandValue(std::string_view node, int wanted) {
  return json{{"node", node}, {"wanted", wanted}, {"requestedAt", nowText()}}.dump();
}

Demand demandOf(const Kv& kv, std::string_view prefix, std::chrono::seconds ttl) {
  const json doc = json::parse(kv.value, nullptr, false);
  Demand d;
  d.node = kv.key.substr(prefix.size());
  if (doc.is_object()) {
    d.wanted = doc.contains("wanted") && doc["wanted"].is_number_integer() ? doc["wanted"].get<int>() : 1;
    if (doc.contains("requestedAt") && doc["requestedAt"].is_string()) {
      d.requestedAt = os::parseRfc3339(doc["requestedAt"].get<std::string>());
    }
  }
  d.lapsed = !d.requestedAt || *d.requestedAt + ttl < SysClock::now();
  return d;
}

std::string Keys::pool(std::string_view pool) const { return prefix + "pools/" + std::string(pool) + "/"; }

std::string Keys::claim(ClaimKind kind, std::string_view pool, std::string_view name) const {
  return this->pool(pool) + (kind == ClaimKind::kBlock ? "blocks/" : "addresses/") + std::string(name);
}

std::string Keys::definition(std::string_view pool) const { return prefix + "definitions/" + std::string(pool); }

std::string Keys::registry() const { return prefix + "registry"; }

std::string Keys::demand(std::string_view pool, std::string_view node) const {
  return this->pool(pool) + "demand/" + std::string(node);
}

std::string Keys::nodes() const { return prefix + "nodes/"; }

std::string Keys::alive(std::string_view node) const { return nodes() + std::string(node) + "/alive"; }

std::string Keys::registered(std::string_view node) const { return nodes() + std::string(node) + "/registered"; }

}  // namespace etcd_kv

}  // namespace ibcni::ipam
