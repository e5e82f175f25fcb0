// SPDX-License-Identifier: Apache-2.0
// The etcd block backend's options, the node's lease and its claims (claim, list, release, renew,
// takeOver, removeGone); etcd_block_backend_pools.cpp has the pools' definitions, registry and
// demands, etcd_kv_codec.h the keys and values.
#include "ipam/backends/etcd_block_backend.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipam/backends/backend_support.h"
#include "ipam/backends/etcd_kv_codec.h"
#include "ibcni/os/time_text.h"

namespace ibcni::ipam {

namespace {

using backend::checkNames;
using backend::excerpt;
using backend::invalid;
using backend::ours;
using backend::printable;
using backend::validName;
using etcd::json;
using etcd::Kv;
using etcd_kv::claimValue;
using etcd_kv::holderOf;
using etcd_kv::nodeValue;
using etcd_kv::nowText;
using etcd_kv::revisionOf;

/// Claims read back in one renewal transaction (etcd refuses more than --max-txn-ops, 128).
constexpr std::size_t kRenewChunk = 100;

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
    auto kvs = etcd::range(c, key);
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
  if (auto v = backend::checkRenewal(pool, node, held); !v) {
    return std::unexpected(v.error());
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

}  // namespace ibcni::ipam
