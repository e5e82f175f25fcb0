// SPDX-License-Identifier: Apache-2.0
// The etcd claim store: each operation of claims::StoreCall as etcd transactions; etcd_kv_codec.h
// has the keys and values, etcd_lease.h the node's lease.
#include "ipam/backends/etcd_claim_store.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ibcni/os/time_text.h"
#include "ipam/claims/backend_support.h"

namespace ibcni::ipam {

namespace {

using claims::ClaimRef;
using claims::Created;
using claims::Removed;
using claims::Renewal;
using claims::Taken;
using etcd::json;
using etcd::TxnAnswer;
using etcd_kv::claimValue;
using etcd_kv::definitionIn;
using etcd_kv::holderIn;
using etcd_kv::nodeValue;
using etcd_kv::nowText;
using etcd_kv::ops;
using etcd_kv::removedBy;
using etcd_kv::revision;
using backend::andThen;
using backend::transform;

/// Claims read back in one renewal transaction (etcd refuses more than --max-txn-ops, 128).
constexpr std::size_t kRenewChunk = 100;

}  // namespace

class EtcdStoreCall final : public claims::StoreCall {
 public:
  explicit EtcdStoreCall(EtcdClaimStore& s) : s_(s), k_(s.keys_), c_(s.client_, s.endpoints_, s.preferred_) {}

  BackendResult<std::optional<Holder>> read(const ClaimRef& ref) override {
    return holderIn(etcd::range(c_, key(ref)), c_);
  }

  BackendResult<std::vector<Claim>> list(ClaimKind kind, std::string_view pool,
                                         std::optional<std::string_view> node) override {
    const std::string prefix = k_.claim(kind, pool, "");
    return andThen(txn(ops({}), ops({etcd::rangePrefixOp(prefix), etcd::rangePrefixOp(k_.nodes(), true)}), ops({})),
                   [&](const TxnAnswer& t) { return etcd_kv::claimsIn(t, kind, prefix, k_, node, c_); });
  }

  BackendResult<Created> create(const ClaimRef& ref, std::string_view node, const ClaimAttrs& attrs) override {
    const std::string at = nowText();
    auto t = txn(ops({etcd::compareCreate(key(ref), 0)}), putClaim(ref, node, attrs, at), ops({etcd::rangeOp(key(ref))}));
    if (t && t->succeeded) {
      return Created{true, etcd_kv::holderNow(node, attrs, std::to_string(t->revision), t->revision, at)};
    }
    return transform(andThen(std::move(t), [&](const TxnAnswer& a) { return holderIn(etcd::rangeResult(a, 0, c_), c_); }),
                     [](std::optional<Holder> h) { return Created{false, std::move(h)}; });
  }

  BackendResult<std::optional<Holder>> update(const ClaimRef& ref, const Holder& seen,
                                              const ClaimAttrs& attrs) override {
    const std::string at = seen.claimedAt ? os::rfc3339(*seen.claimedAt) : nowText();
    auto written = andThen(revision(seen.version, "the claim's"), [&](std::int64_t v) {
      return txn(ops({etcd::compareMod(key(ref), v)}), ops({etcd::putOp(key(ref), claimValue(seen.node, attrs, at))}),
                 ops({}));
    });
    return transform(std::move(written), [&](const TxnAnswer& t) {
      if (!t.succeeded) {
        return std::optional<Holder>();
      }
      Holder h = seen;
      h.attrs = attrs;
      h.version = std::to_string(t.revision);
      h.stale = false;
      return std::optional<Holder>(std::move(h));
    });
  }

  BackendResult<Removed> remove(const ClaimRef& ref, const Holder& seen) override {
    auto t = andThen(revision(seen.version, "the claim's"), [&](std::int64_t v) {
      return txn(ops({etcd::compareMod(key(ref), v)}), ops({etcd::deleteOp(key(ref))}), ops({}));
    });
    return transform(std::move(t), [](const TxnAnswer& a) { return a.succeeded ? Removed::kDeleted : Removed::kConflict; });
  }

  BackendResult<Renewal> keepAlive(std::string_view node, std::string_view pool,
                                   const std::vector<HeldClaim>& held) override {
    Renewal out;
    auto lease = s_.lease_.keepAlive(c_, out.livenessRenewed);
    // The liveness put and the reads in one transaction per chunk.
    for (std::size_t from = 0; lease && (from == 0 || from < held.size()); from += kRenewChunk) {
      const std::size_t to = std::min(held.size(), from + kRenewChunk);
      json puts = ops({etcd::putOp(k_.alive(node), nodeValue(node, "renewedAt"), *lease),
                       etcd::putOp(k_.registered(node), nodeValue(node, "registeredAt"))});
      for (std::size_t i = from; i < to; ++i) {
        puts.push_back(etcd::rangeOp(k_.claim(held[i].kind, pool, held[i].name)));
      }
      auto t = txn(ops({}), puts, ops({}));
      if (!t && etcd::leaseNotFound(t.error())) {
        lease = s_.lease_.grant(c_, *lease);  // expired between the keepalive and the put: once more
        out.livenessRenewed = true;
        if (!lease) {
          break;
        }
        puts[0] = etcd::putOp(k_.alive(node), nodeValue(node, "renewedAt"), *lease);
        t = txn(ops({}), puts, ops({}));
      }
      if (!t) {
        return std::unexpected(std::move(t.error()));
      }
      for (std::size_t i = from; i < to; ++i) {
        auto h = holderIn(etcd::rangeResult(*t, 2 + i - from, c_), c_);
        if (!h) {
          return std::unexpected(std::move(h.error()));
        }
        out.held.push_back(std::move(*h));
      }
    }
    return lease ? BackendResult<Renewal>(std::move(out)) : std::unexpected(std::move(lease.error()));
  }

  BackendResult<Taken> takeIfGone(const ClaimRef& ref, const Holder& seen, std::string_view node,
                                  const ClaimAttrs& attrs) override {
    const std::string at = nowText();
    auto t = goneTxn(ref, seen, putClaim(ref, node, attrs, at));
    if (t && t->succeeded) {
      return Taken{true, etcd_kv::holderNow(node, attrs, seen.identity, t->revision, at)};
    }
    return transform(andThen(std::move(t), [&](const TxnAnswer& a) { return holderIn(etcd::rangeResult(a, 0, c_), c_); }),
                     [](std::optional<Holder> h) { return Taken{false, std::move(h)}; });
  }

  BackendResult<Removed> removeIfGone(const ClaimRef& ref, const Holder& seen) override {
    return removedBy(goneTxn(ref, seen, ops({etcd::deleteOp(key(ref))})), 0, c_);
  }

  BackendResult<void> forgetNode(std::string_view node) override {
    auto t = txn(ops({etcd::compareCreate(k_.alive(node), 0)}), ops({etcd::deleteOp(k_.registered(node))}), ops({}));
    if (t && !t->succeeded) {
      return std::unexpected(backend::invalid(
          "node " + cni::quoted(node) + " is alive: its agent renewed its lease less than " +
          std::to_string(s_.options_.leaseTtl.count()) +
          " s (leaseDurationSeconds) ago; forget a node only once it is gone for good (its agent stopped and its pods "
          "gone), after its lease has lapsed"));
    }
    return transform(std::move(t), [](const TxnAnswer&) {});
  }

  BackendResult<std::optional<PoolDefinition>> readDefinition(std::string_view pool) override {
    return definitionIn(etcd::range(c_, k_.definition(pool)), pool, c_);
  }

  BackendResult<std::optional<PoolDefinition>> createDefinition(const PoolDefinition& def) override {
    const std::string key = k_.definition(def.pool);
    auto t = txn(ops({etcd::compareCreate(key, 0)}), ops({etcd::putOp(key, etcd_kv::definitionValue(def))}),
                 ops({etcd::rangeOp(key)}));
    return andThen(std::move(t), [&](const TxnAnswer& a) -> BackendResult<std::optional<PoolDefinition>> {
      if (!a.succeeded) {
        return definitionIn(etcd::rangeResult(a, 0, c_), def.pool, c_);
      }
      PoolDefinition stored = def;
      stored.identity = std::to_string(a.revision);
      return std::optional<PoolDefinition>(std::move(stored));
    });
  }

  BackendResult<std::optional<PoolDefinition>> updateDefinition(const PoolDefinition& def,
                                                                std::string_view seen) override {
    const std::string key = k_.definition(def.pool);
    auto t = andThen(revision(seen, "definition"), [&](std::int64_t v) {
      return txn(ops({etcd::compareMod(key, v)}), ops({etcd::putOp(key, etcd_kv::definitionValue(def)), etcd::rangeOp(key)}),
                 ops({}));
    });
    return andThen(std::move(t), [&](const TxnAnswer& a) {
      return a.succeeded ? definitionIn(etcd::rangeResult(a, 1, c_), def.pool, c_)
                         : BackendResult<std::optional<PoolDefinition>>();
    });
  }

  BackendResult<Removed> removeDefinition(std::string_view pool, std::string_view seen) override {
    const std::string key = k_.definition(pool);
    return andThen(revision(seen, "definition"), [&](std::int64_t v) {
      return removedBy(txn(ops({etcd::compareMod(key, v)}), ops({etcd::deleteOp(key)}), ops({etcd::rangeOp(key)})), 0,
                       c_);
    });
  }

  BackendResult<PoolRegistry> readRegistry() override {
    return andThen(etcd::range(c_, k_.registry()), [&](const std::vector<etcd::Kv>& kvs) {
      return kvs.empty() ? BackendResult<PoolRegistry>() : etcd_kv::registryOf(kvs.front(), c_);
    });
  }

  BackendResult<bool> writeRegistry(const PoolRegistry& registry) override {
    const std::string key = k_.registry();
    auto compare = registry.version.empty() ? BackendResult<json>(etcd::compareCreate(key, 0))
                                            : transform(revision(registry.version, "registry"),
                                                        [&](std::int64_t v) { return etcd::compareMod(key, v); });
    auto t = andThen(std::move(compare), [&](const json& cmp) {
      return txn(ops({cmp}), ops({etcd::putOp(key, etcd_kv::registryValue(registry))}), ops({}));
    });
    return transform(std::move(t), [](const TxnAnswer& a) { return a.succeeded; });
  }

  BackendResult<void> putDemand(std::string_view pool, std::string_view node, int wanted) override {
    // On the node's lease: a node whose agent stopped asks for nothing.
    std::int64_t lease = s_.lease_.id();
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (lease == 0 || attempt > 0) {
        auto g = s_.lease_.grant(c_, lease);
        if (!g) {
          return std::unexpected(std::move(g.error()));
        }
        lease = *g;
      }
      auto t = txn(ops({}), ops({etcd::putOp(k_.demand(pool, node), etcd_kv::demandValue(node, wanted), lease)}),
                   ops({}));
      if (t || !etcd::leaseNotFound(t.error())) {
        return transform(std::move(t), [](const TxnAnswer&) {});
      }
    }
    return std::unexpected(c_.bad("the node's lease kept expiring while its demand was recorded"));
  }

  BackendResult<std::vector<Demand>> listDemands(std::string_view pool) override {
    const std::string prefix = k_.demand(pool, "");
    return transform(etcd::rangePrefix(c_, prefix), [&](const std::vector<etcd::Kv>& kvs) {
      std::vector<Demand> out;
      for (const auto& kv : kvs) {
        out.push_back(etcd_kv::demandOf(kv, prefix, s_.options_.leaseTtl));
      }
      return out;
    });
  }

  BackendResult<void> deleteDemand(std::string_view pool, std::string_view node) override {
    return transform(txn(ops({}), ops({etcd::deleteOp(k_.demand(pool, node))}), ops({})), [](const TxnAnswer&) {});
  }

  BackendError changing(std::string_view what) const override { return c_.bad(std::string(what)); }

 private:
  std::string key(const ClaimRef& ref) const { return k_.claim(ref.kind, ref.pool, ref.name); }

  BackendResult<TxnAnswer> txn(json compare, json success, json failure) {
    return etcd::txn(c_, std::move(compare), std::move(success), std::move(failure));
  }

  /// The claim's put and its node's registration.
  json putClaim(const ClaimRef& ref, std::string_view node, const ClaimAttrs& attrs, const std::string& at) const {
    return ops({etcd::putOp(key(ref), claimValue(node, attrs, at)),
                etcd::putOp(k_.registered(node), nodeValue(node, "registeredAt"))});
  }

  /// One transaction that does `success` only if the claim is still as `seen` and its holder is
  /// certainly gone: neither its liveness key nor its registration exists.
  BackendResult<TxnAnswer> goneTxn(const ClaimRef& ref, const Holder& seen, json success) {
    const auto version = etcd_kv::revisionOf(seen.version);
    if (!version || !backend::validName(seen.node)) {
      return std::unexpected(backend::invalid("the seen holder " + cni::quoted(seen.node) + " at version " +
                                              cni::quoted(seen.version) + " is not a claim read from etcd"));
    }
    return txn(ops({etcd::compareMod(key(ref), *version), etcd::compareCreate(k_.alive(seen.node), 0),
                    etcd::compareCreate(k_.registered(seen.node), 0)}),
               std::move(success), ops({etcd::rangeOp(key(ref))}));
  }

  EtcdClaimStore& s_;
  const etcd_kv::Keys& k_;
  etcd::Call c_;
};

EtcdClaimStore::EtcdClaimStore(http::HttpClient& client, Options options)
    : client_(client),
      options_(std::move(options)),
      keys_{options_.prefix},
      endpoints_{options_.endpoints, options_.timeout, options_.tls},
      lease_(options_.leaseTtl, options_.leaseId, options_.onLeaseGranted) {}

std::unique_ptr<claims::StoreCall> EtcdClaimStore::call() { return std::make_unique<EtcdStoreCall>(*this); }

}  // namespace ibcni::ipam
