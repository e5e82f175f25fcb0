// SPDX-License-Identifier: Apache-2.0
// The keys and values of the etcd claim store (etcd_claim_store.h lists them): what a claim, a
// node's registration or liveness, a pool's definition, the registry and a demand are written as,
// and what is read back from them. etcd_gateway.h speaks etcd's JSON gateway.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipam/backends/etcd_gateway.h"
#include "ibcni/ipam/block_backend.h"
#include "ipam/claims/claim_store.h"

namespace ibcni::ipam::etcd_kv {

using SysClock = std::chrono::system_clock;

/// The keys, under `prefix` ("/ibcni/" by default).
struct Keys {
  std::string prefix;
  [[nodiscard]] std::string pool(std::string_view pool) const;
  [[nodiscard]] std::string claim(ClaimKind kind, std::string_view pool, std::string_view name) const;
  [[nodiscard]] std::string definition(std::string_view pool) const;
  [[nodiscard]] std::string registry() const;
  [[nodiscard]] std::string demand(std::string_view pool, std::string_view node) const;
  [[nodiscard]] std::string nodes() const;
  [[nodiscard]] std::string alive(std::string_view node) const;
  [[nodiscard]] std::string registered(std::string_view node) const;
};

/// The time now, as written in values (RFC 3339).
[[nodiscard]] std::string nowText();
/// A claim's value: {"node","claimedAt"} and the attributes given ("owner", "pod", "lender").
[[nodiscard]] std::string claimValue(std::string_view node, const ClaimAttrs& attrs, const std::string& claimedAt);
/// A node key's value: {"node", `when`: now}.
[[nodiscard]] std::string nodeValue(std::string_view node, const char* when);
/// The holder a claim's value names; identity and version from the key's revisions; stale when the
/// key hangs on a lease (an older ibcni wrote it so).
[[nodiscard]] BackendResult<Holder> holderOf(const etcd::Kv& kv, const etcd::Call& call);
/// A JSON array of transaction operations or compares.
[[nodiscard]] etcd::json ops(std::initializer_list<etcd::json> list);
/// A version given back (Holder::version, PoolDefinition::identity) as the mod_revision it is;
/// kInvalidArgument naming `what` when it is not one.
[[nodiscard]] BackendResult<std::int64_t> revision(std::string_view version, std::string_view what);
/// The holder a claim put at `revision` (and `at`, RFC 3339) makes.
[[nodiscard]] Holder holderNow(std::string_view node, const ClaimAttrs& attrs, std::string identity,
                               std::int64_t revision, const std::string& at);
/// A revision given back as text (Holder::version, PoolDefinition::identity); nullopt when it is
/// not a positive number.
[[nodiscard]] std::optional<std::int64_t> revisionOf(std::string_view text);
/// The definition of `pool` a key holds.
[[nodiscard]] BackendResult<PoolDefinition> definitionOf(const etcd::Kv& kv, std::string_view pool,
                                                         const etcd::Call& call);
/// A pool definition's value: {"fields","origin"} and "closed" when it is.
[[nodiscard]] std::string definitionValue(const PoolDefinition& def);
/// The holder of the claim a range read (`kvs`), nullopt when it read nothing.
[[nodiscard]] BackendResult<std::optional<Holder>> holderIn(BackendResult<std::vector<etcd::Kv>> kvs,
                                                            const etcd::Call& call);
/// The definition of `pool` a range read, nullopt when it read nothing.
[[nodiscard]] BackendResult<std::optional<PoolDefinition>> definitionIn(BackendResult<std::vector<etcd::Kv>> kvs,
                                                                        std::string_view pool, const etcd::Call& call);
/// The claims of `kind` under `prefix` (range op 0 of `t`, only `node`'s when given), each lapsed
/// unless its node has a liveness key among the keys under `keys.nodes()` (range op 1).
[[nodiscard]] BackendResult<std::vector<Claim>> claimsIn(const etcd::TxnAnswer& t, ClaimKind kind,
                                                         std::string_view prefix, const Keys& keys,
                                                         std::optional<std::string_view> node, const etcd::Call& call);
/// How a compared delete ended: deleted, else gone or changed as its failure range (op `i`) says.
[[nodiscard]] BackendResult<claims::Removed> removedBy(BackendResult<etcd::TxnAnswer> t, std::size_t i,
                                                       const etcd::Call& call);
/// The pools' registry a key holds: {"pools": {pool: fields}}.
[[nodiscard]] BackendResult<PoolRegistry> registryOf(const etcd::Kv& kv, const etcd::Call& call);
[[nodiscard]] std::string registryValue(const PoolRegistry& registry);
/// A demand's value: {"node","wanted","requestedAt"}.
[[nodiscard]] std::string demandValue(std::string_view node, int wanted);
/// The demand under `prefix` (the pool's demand keys), lapsed when older than `ttl`.
[[nodiscard]] Demand demandOf(const etcd::Kv& kv, std::string_view prefix, std::chrono::seconds ttl);

}  // namespace ibcni::ipam::etcd_kv
