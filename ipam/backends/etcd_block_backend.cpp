// SPDX-License-Identifier: Apache-2.0
#include "ipam/backends/etcd_block_backend.h"

#include <charconv>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipam/backends/backend_support.h"
#include "ibcni/os/time_text.h"

namespace ibcni::ipam {

namespace {

using backend::checkNames;
using backend::excerpt;
using backend::ours;
using backend::invalid;
using backend::printable;
using backend::validName;
using etcd::json;
using etcd::Kv;
using SysClock = std::chrono::system_clock;

/// Claims read back in one renewal transaction (etcd refuses more than --max-txn-ops, 128).
constexpr std::size_t kRenewChunk = 100;

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
  return PoolDefinition{std::string(pool), doc["fields"].get<std::string>(), doc.value("origin", std::string()),
                        std::to_string(kv.modRevision),
                        doc.contains("closed") && doc["closed"].is_boolean() && doc["closed"].get<bool>()};
}

std::string definitionValue(const PoolDefinition& def) {
  json v{{"fields", def.fields}, {"origin", def.origin}};
  if (def.closed) {
    v["closed"] = true;
  }
  return v.dump();
}

}  // namespace

EtcdBlockBackend::EtcdBlockBackend(http::HttpClient& client, Options options)
    : client_(client),
      options_(std::move(options)),
      endpoints_{options_.endpoints, options_.timeout, options_.tls},
      leaseId_(options_.leaseId) {}

EtcdBlockBackend::Options EtcdBlockBackend::optionsFor(const config::ClusterConf& cluster, std::int64_t leaseId,
                                                      std::function<void(std::int64_t)> onLeaseGranted) {
  Options o;
  o.endpoints = cluster.etcd.endpoints;
  o.prefix = cluster.etcd.prefix;
  o.timeout = cluster.timeout;
  o.tls.caFile = cluster.etcd.caFile;
  o.tls.certFile = cluster.etcd.certFile;
  o.tls.keyFile = cluster.etcd.keyFile;
  o.leaseTtl = cluster.leaseDuration;
  o.leaseId = leaseId;
  o.onLeaseGranted = std::move(onLeaseGranted);
  return o;
}

BackendResult<void> EtcdBlockBackend::validate(const Options& options) {
  if (options.endpoints.empty()) {
    return std::unexpected(invalid("etcd.endpoints is empty: give at least one \"http(s)://host:port\""));
  }
  for (const auto& e : options.endpoints) {
    const bool scheme = e.starts_with("http://") || e.starts_with("https://");
    const auto host = e.substr(e.find("://") == std::string::npos ? 0 : e.find("://") + 3);
    if (!scheme || host.empty() || !printable(e) || e.find(' ') != std::string::npos || e.ends_with("/")) {
      return std::unexpected(invalid("etcd endpoint " + cni::quoted(e) +
                                     " is not \"http://host:port\" or \"https://host:port\" (no path)"));
    }
  }
  if (options.prefix.empty() || !options.prefix.ends_with("/") || !printable(options.prefix)) {
    return std::unexpected(invalid("etcd prefix " + cni::quoted(options.prefix) + " must be printable and end in '/'"));
  }
  if (options.timeout.count() <= 0 || options.leaseTtl.count() <= 0) {
    return std::unexpected(invalid("timeout and lease TTL must be positive"));
  }
  return {};
}

etcd::Call EtcdBlockBackend::call() { return etcd::Call(client_, endpoints_, preferred_); }

std::string EtcdBlockBackend::poolPrefix(std::string_view pool) const {
  return options_.prefix + "pools/" + std::string(pool) + "/";
}

std::string EtcdBlockBackend::claimKey(ClaimKind kind, std::string_view pool, std::string_view name) const {
  return poolPrefix(pool) + (kind == ClaimKind::kBlock ? "blocks/" : "addresses/") + std::string(name);
}

std::string EtcdBlockBackend::aliveKey(std::string_view node) const {
  return options_.prefix + "nodes/" + std::string(node) + "/alive";
}

std::string EtcdBlockBackend::registeredKey(std::string_view node) const {
  return options_.prefix + "nodes/" + std::string(node) + "/registered";
}

std::int64_t EtcdBlockBackend::leaseId() const {
  const std::lock_guard lock(leaseMutex_);
  return leaseId_;
}

BackendResult<std::int64_t> EtcdBlockBackend::grantLease(etcd::Call& call, std::int64_t replacing) {
  const std::lock_guard lock(leaseMutex_);
  if (leaseId_ != 0 && leaseId_ != replacing) {
    return leaseId_;  // another thread granted one meanwhile
  }
  auto r = call.post("/v3/lease/grant", json{{"TTL", std::to_string(options_.leaseTtl.count())}});
  if (!r) {
    return std::unexpected(std::move(r.error()));
  }
  const auto id = etcd::int64Field(*r, "ID");
  if (!id || *id <= 0) {
    return std::unexpected(call.bad("lease grant answered no lease ID: " + excerpt(r->dump())));
  }
  leaseId_ = *id;
  if (options_.onLeaseGranted) {
    options_.onLeaseGranted(*id);
  }
  return *id;
}

// The node's lease kept alive; one that expired (or was never granted) is granted anew, and
// `regranted` says the node's liveness had lapsed.
BackendResult<std::int64_t> EtcdBlockBackend::keepAlive(etcd::Call& call, bool& regranted) {
  const std::int64_t lease = leaseId();
  if (lease != 0) {
    auto r = call.post("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}});
    if (!r) {
      return std::unexpected(std::move(r.error()));
    }
    // A streamed answer: {"result":{"ID":"..","TTL":".."}}; TTL omitted (0) once expired.
    const json& result = r->contains("result") ? (*r)["result"] : *r;
    const auto ttl = etcd::int64Field(result, "TTL");
    if (!ttl) {
      return std::unexpected(call.bad("keepalive answer without a readable TTL: " + excerpt(r->dump())));
    }
    if (*ttl > 0) {
      return lease;
    }
    regranted = true;
  }
  return grantLease(call, lease);
}

BackendResult<ClaimOutcome> EtcdBlockBackend::claim(ClaimKind kind, std::string_view pool, std::string_view name,
                                                    std::string_view node, const ClaimAttrs& attrs) {
  if (auto v = checkNames({pool, name, node}); !v) {
    return std::unexpected(v.error());
  }
  auto c = call();
  return claimWith(c, kind, pool, name, node, attrs);
}

// claim() within the call `c` (and its deadline).
BackendResult<ClaimOutcome> EtcdBlockBackend::claimWith(etcd::Call& c, ClaimKind kind, std::string_view pool,
                                                        std::string_view name, std::string_view node,
                                                        const ClaimAttrs& attrs) {
  const std::string key = claimKey(kind, pool, name);
  const std::string claimedAt = nowText();
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto t = etcd::txn(c, json::array({etcd::compareCreate(key, 0)}),
                       json::array({etcd::putOp(key, claimValue(node, attrs, claimedAt)),
                                    etcd::putOp(registeredKey(node), nodeValue(node, "registeredAt"))}),
                       json::array({etcd::rangeOp(key)}));
    if (!t) {
      return std::unexpected(std::move(t.error()));
    }
    if (t->succeeded) {
      Holder h{std::string(node), attrs, std::to_string(t->revision), std::to_string(t->revision),
               os::parseRfc3339(claimedAt), std::nullopt, false, false};
      return ClaimOutcome{ClaimState::kClaimed, std::move(h)};
    }
    auto kvs = etcd::rangeResult(*t, 0, c);
    if (!kvs) {
      return std::unexpected(std::move(kvs.error()));
    }
    if (kvs->empty()) {
      continue;  // deleted in between: create again
    }
    auto h = holderOf(kvs->front(), c);
    if (!h) {
      return std::unexpected(std::move(h.error()));
    }
    if (!ours(kind, *h, node, attrs)) {
      return ClaimOutcome{ClaimState::kHeldByOther, std::move(*h)};
    }
    auto adopted = adoptHeld(c, kind, kvs->front(), std::move(*h), node, attrs);
    if (!adopted || adopted->state != ClaimState::kHeldByOther) {
      return adopted;
    }
    // Changed while it was being adopted: look again.
  }
  return std::unexpected(c.bad("key " + cni::quoted(key) + " kept changing during the claim"));
}

// A claim found held by this node (`kv`, read as `held`): adopted as it is, or rewritten (one
// compare-and-swap) when it names another attachment of the same pod, or still hangs on a lease
// (an older ibcni put it there). kHeldByOther: it changed meanwhile.
BackendResult<ClaimOutcome> EtcdBlockBackend::adoptHeld(etcd::Call& c, ClaimKind kind, const Kv& kv, Holder held,
                                                        std::string_view node, const ClaimAttrs& attrs) {
  const bool rewrite = kv.lease != 0 || (kind == ClaimKind::kAddress && held.attrs != attrs);
  if (!rewrite) {
    return ClaimOutcome{ClaimState::kAdopted, std::move(held)};
  }
  const std::string claimedAt = held.claimedAt ? os::rfc3339(*held.claimedAt) : nowText();
  const ClaimAttrs now = kind == ClaimKind::kAddress ? attrs : held.attrs;
  auto t = etcd::txn(c, json::array({etcd::compareMod(kv.key, kv.modRevision)}),
                     json::array({etcd::putOp(kv.key, claimValue(node, now, claimedAt))}), json::array());
  if (!t) {
    return std::unexpected(std::move(t.error()));
  }
  if (!t->succeeded) {
    return ClaimOutcome{ClaimState::kHeldByOther, std::move(held)};
  }
  held.attrs = now;
  held.version = std::to_string(t->revision);
  return ClaimOutcome{ClaimState::kAdopted, std::move(held)};
}

BackendResult<std::vector<Claim>> EtcdBlockBackend::list(ClaimKind kind, std::string_view pool,
                                                         std::optional<std::string_view> node) {
  if (auto v = checkNames({pool}); !v) {
    return std::unexpected(v.error());
  }
  auto c = call();
  const std::string prefix = claimKey(kind, pool, "");
  const std::string nodes = options_.prefix + "nodes/";
  auto t = etcd::txn(c, json::array(), json::array({etcd::rangePrefixOp(prefix), etcd::rangePrefixOp(nodes, true)}),
                     json::array());
  if (!t) {
    return std::unexpected(std::move(t.error()));
  }
  auto claims = etcd::rangeResult(*t, 0, c);
  auto liveness = etcd::rangeResult(*t, 1, c);
  if (!claims || !liveness) {
    return std::unexpected(!claims ? std::move(claims.error()) : std::move(liveness.error()));
  }
  std::set<std::string> alive;
  for (const auto& kv : *liveness) {
    if (kv.key.ends_with("/alive")) {
      alive.insert(kv.key.substr(nodes.size(), kv.key.size() - nodes.size() - 6));
    }
  }
  std::vector<Claim> out;
  for (const auto& kv : *claims) {
    auto h = holderOf(kv, c);
    if (!h) {
      return std::unexpected(std::move(h.error()));
    }
    if (node && h->node != *node) {
      continue;
    }
    h->lapsed = !alive.contains(h->node);
    out.push_back(Claim{kind, kv.key.substr(prefix.size()), std::move(*h)});
  }
  return out;
}

BackendResult<ReleaseOutcome> EtcdBlockBackend::release(ClaimKind kind, std::string_view pool, std::string_view name,
                                                        std::string_view node, std::string_view owner) {
  if (auto v = checkNames({pool, name, node}); !v) {
    return std::unexpected(v.error());
  }
  auto c = call();
  const std::string key = claimKey(kind, pool, name);
  // The holder is in the value, which a compare cannot read: read it, then delete on the
  // mod_revision read, so that the state judged ours is exactly the one deleted.
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto r = c.post("/v3/kv/range", json{{"key", os::base64Encode(key)}});
    if (!r) {
      return std::unexpected(std::move(r.error()));
    }
    auto kvs = etcd::kvsOf(*r, c);
    if (!kvs) {
      return std::unexpected(std::move(kvs.error()));
    }
    if (kvs->empty()) {
      return ReleaseOutcome::kGone;
    }
    auto h = holderOf(kvs->front(), c);
    if (!h) {
      return std::unexpected(std::move(h.error()));
    }
    if (h->node != node || (!owner.empty() && h->attrs.owner != owner)) {
      return ReleaseOutcome::kNotOurs;
    }
    auto t = etcd::txn(c, json::array({etcd::compareMod(key, kvs->front().modRevision)}),
                       json::array({etcd::deleteOp(key)}), json::array());
    if (!t) {
      return std::unexpected(std::move(t.error()));
    }
    if (t->succeeded) {
      return ReleaseOutcome::kReleased;
    }
  }
  return std::unexpected(c.bad("key " + cni::quoted(key) + " kept changing during its release"));
}

BackendResult<RenewOutcome> EtcdBlockBackend::renew(std::string_view node, std::string_view pool,
                                                    const std::vector<HeldClaim>& held) {
  if (auto v = checkNames({pool, node}); !v) {
    return std::unexpected(v.error());
  }
  for (const auto& h : held) {
    if (auto v = checkNames({h.name}); !v) {
      return std::unexpected(v.error());
    }
  }
  auto c = call();
  RenewOutcome out;
  auto lease = keepAlive(c, out.livenessRenewed);
  if (!lease) {
    return std::unexpected(std::move(lease.error()));
  }
  // The liveness put and the reads in one transaction: a takeover (which compares the liveness
  // key absent) is either before it, and seen here, or after it, and refused.
  for (std::size_t first = 0; first == 0 || first < held.size(); first += kRenewChunk) {
    const std::size_t last = std::min(held.size(), first + kRenewChunk);
    json ops = json::array({etcd::putOp(aliveKey(node), nodeValue(node, "renewedAt"), *lease),
                            etcd::putOp(registeredKey(node), nodeValue(node, "registeredAt"))});
    for (std::size_t i = first; i < last; ++i) {
      ops.push_back(etcd::rangeOp(claimKey(held[i].kind, pool, held[i].name)));
    }
    auto t = etcd::txn(c, json::array(), ops, json::array());
    if (!t && etcd::leaseNotFound(t.error())) {
      // Expired between the keepalive and the put: once more on a new lease.
      lease = grantLease(c, *lease);
      if (!lease) {
        return std::unexpected(std::move(lease.error()));
      }
      out.livenessRenewed = true;
      ops[0] = etcd::putOp(aliveKey(node), nodeValue(node, "renewedAt"), *lease);
      t = etcd::txn(c, json::array(), ops, json::array());
    }
    if (!t) {
      return std::unexpected(std::move(t.error()));
    }
    for (std::size_t i = first; i < last; ++i) {
      auto kvs = etcd::rangeResult(*t, 2 + i - first, c);
      if (!kvs) {
        return std::unexpected(std::move(kvs.error()));
      }
      HoldCheck check;
      if (kvs->empty()) {
        out.claims.push_back(check);
        continue;
      }
      auto h = holderOf(kvs->front(), c);
      if (!h) {
        return std::unexpected(std::move(h.error()));
      }
      const bool same = h->node == node && (held[i].identity.empty() || held[i].identity == h->identity);
      check.state = same ? HoldCheck::State::kKept : HoldCheck::State::kLost;
      if (same && kvs->front().lease != 0) {
        // Written by an older ibcni on the node's lease: moved off it, so that nothing expires it.
        auto moved = adoptHeld(c, held[i].kind, kvs->front(), *h, node, h->attrs);
        if (moved && moved->state == ClaimState::kAdopted) {
          h->version = moved->holder.version;
        }
      }
      check.now = std::move(*h);
      out.claims.push_back(std::move(check));
    }
  }
  return out;
}

// One transaction that does `success` only if the claim is still as `seen` and its holder is
// certainly gone: neither its liveness key nor its registration exists.
BackendResult<etcd::TxnAnswer> EtcdBlockBackend::goneTxn(etcd::Call& c, const std::string& key, const Holder& seen,
                                                         json success) {
  const auto version = revisionOf(seen.version);
  if (!version || !validName(seen.node)) {
    return std::unexpected(invalid("the seen holder " + cni::quoted(seen.node) + " at version " +
                                   cni::quoted(seen.version) + " is not a claim read from etcd"));
  }
  return etcd::txn(c,
                   json::array({etcd::compareMod(key, *version), etcd::compareCreate(aliveKey(seen.node), 0),
                                etcd::compareCreate(registeredKey(seen.node), 0)}),
                   std::move(success), json::array({etcd::rangeOp(key)}));
}

BackendResult<ClaimOutcome> EtcdBlockBackend::takeOver(ClaimKind kind, std::string_view pool, std::string_view name,
                                                       std::string_view node, const Holder& seen,
                                                       const ClaimAttrs& attrs) {
  if (auto v = checkNames({pool, name, node}); !v) {
    return std::unexpected(v.error());
  }
  auto c = call();
  const std::string key = claimKey(kind, pool, name);
  const std::string claimedAt = nowText();
  auto t = goneTxn(c, key, seen,
                   json::array({etcd::putOp(key, claimValue(node, attrs, claimedAt)),
                                etcd::putOp(registeredKey(node), nodeValue(node, "registeredAt"))}));
  if (!t) {
    return std::unexpected(std::move(t.error()));
  }
  if (t->succeeded) {
    Holder h{std::string(node), attrs, seen.identity, std::to_string(t->revision), os::parseRfc3339(claimedAt),
             std::nullopt, false, false};
    return ClaimOutcome{ClaimState::kClaimed, std::move(h)};
  }
  auto kvs = etcd::rangeResult(*t, 0, c);
  if (!kvs) {
    return std::unexpected(std::move(kvs.error()));
  }
  if (kvs->empty()) {
    return claimWith(c, kind, pool, name, node, attrs);  // released meanwhile: free, within this call
  }
  auto h = holderOf(kvs->front(), c);
  if (!h) {
    return std::unexpected(std::move(h.error()));
  }
  const bool mine = ours(kind, *h, node, attrs);
  return ClaimOutcome{mine ? ClaimState::kAdopted : ClaimState::kHeldByOther, std::move(*h)};
}

BackendResult<ReleaseOutcome> EtcdBlockBackend::removeGone(ClaimKind kind, std::string_view pool,
                                                           std::string_view name, const Holder& seen) {
  if (auto v = checkNames({pool, name}); !v) {
    return std::unexpected(v.error());
  }
  auto c = call();
  const std::string key = claimKey(kind, pool, name);
  auto t = goneTxn(c, key, seen, json::array({etcd::deleteOp(key)}));
  if (!t) {
    return std::unexpected(std::move(t.error()));
  }
  if (t->succeeded) {
    return ReleaseOutcome::kReleased;
  }
  auto kvs = etcd::rangeResult(*t, 0, c);
  if (!kvs) {
    return std::unexpected(std::move(kvs.error()));
  }
  return kvs->empty() ? ReleaseOutcome::kGone : ReleaseOutcome::kNotOurs;
}

BackendResult<PoolDefinition> EtcdBlockBackend::definePool(const PoolDefinition& def) {
  if (auto v = checkNames({def.pool}); !v) {
    return std::unexpected(v.error());
  }
  auto c = call();
  const std::string key = options_.prefix + "definitions/" + def.pool;
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
  auto kvs = etcd::rangeResult(*t, 0, c);
  if (!kvs) {
    return std::unexpected(std::move(kvs.error()));
  }
  if (kvs->empty()) {
    return std::unexpected(c.bad("the definition of pool " + cni::quoted(def.pool) + " vanished while it was read"));
  }
  return definitionOf(kvs->front(), def.pool, c);
}

BackendResult<std::optional<PoolDefinition>> EtcdBlockBackend::definition(std::string_view pool) {
  if (auto v = checkNames({pool}); !v) {
    return std::unexpected(v.error());
  }
  auto c = call();
  auto r = c.post("/v3/kv/range", json{{"key", os::base64Encode(options_.prefix + "definitions/" + std::string(pool))}});
  if (!r) {
    return std::unexpected(std::move(r.error()));
  }
  auto kvs = etcd::kvsOf(*r, c);
  if (!kvs) {
    return std::unexpected(std::move(kvs.error()));
  }
  if (kvs->empty()) {
    return std::optional<PoolDefinition>();
  }
  auto d = definitionOf(kvs->front(), pool, c);
  if (!d) {
    return std::unexpected(std::move(d.error()));
  }
  return std::optional<PoolDefinition>(std::move(*d));
}

BackendResult<PoolRegistry> EtcdBlockBackend::registry() {
  auto c = call();
  auto r = c.post("/v3/kv/range", json{{"key", os::base64Encode(options_.prefix + "registry")}});
  if (!r) {
    return std::unexpected(std::move(r.error()));
  }
  auto kvs = etcd::kvsOf(*r, c);
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
  const std::string key = options_.prefix + "registry";
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
  const auto version = revisionOf(seen);
  if (!version) {
    return std::unexpected(invalid("definition version " + cni::quoted(seen) + " is not an etcd mod_revision"));
  }
  auto c = call();
  const std::string key = options_.prefix + "definitions/" + def.pool;
  auto t = etcd::txn(c, json::array({etcd::compareMod(key, *version)}),
                     json::array({etcd::putOp(key, definitionValue(def)), etcd::rangeOp(key)}), json::array());
  if (!t) {
    return std::unexpected(std::move(t.error()));
  }
  if (!t->succeeded) {
    return std::optional<PoolDefinition>();
  }
  auto kvs = etcd::rangeResult(*t, 1, c);
  if (!kvs) {
    return std::unexpected(std::move(kvs.error()));
  }
  if (kvs->empty()) {
    return std::unexpected(c.bad("the definition of pool " + cni::quoted(def.pool) + " vanished while it was written"));
  }
  auto d = definitionOf(kvs->front(), def.pool, c);
  if (!d) {
    return std::unexpected(std::move(d.error()));
  }
  return std::optional<PoolDefinition>(std::move(*d));
}

BackendResult<bool> EtcdBlockBackend::removeDefinition(std::string_view pool, std::string_view seen) {
  if (auto v = checkNames({pool}); !v) {
    return std::unexpected(v.error());
  }
  const auto version = revisionOf(seen);
  if (!version) {
    return std::unexpected(invalid("definition version " + cni::quoted(seen) + " is not an etcd mod_revision"));
  }
  auto c = call();
  const std::string key = options_.prefix + "definitions/" + std::string(pool);
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
  const std::string key = poolPrefix(pool) + "demand/" + std::string(node);
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
  const std::string prefix = poolPrefix(pool) + "demand/";
  auto r = c.post("/v3/kv/range", etcd::rangePrefixBody(prefix));
  if (!r) {
    return std::unexpected(std::move(r.error()));
  }
  auto kvs = etcd::kvsOf(*r, c);
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
  auto t = etcd::txn(c, json::array(), json::array({etcd::deleteOp(poolPrefix(pool) + "demand/" + std::string(node))}),
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
