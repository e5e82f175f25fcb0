// SPDX-License-Identifier: Apache-2.0
// The keys and values of the etcd block backend (etcd_block_backend.h lists them): what a claim, a
// node's registration or liveness and a pool's definition are written as, and what is read back
// from them (the keys themselves are EtcdBlockBackend's members, defined in etcd_kv_codec.cpp).
// etcd_gateway.h speaks etcd's JSON gateway.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ipam/backends/etcd_gateway.h"
#include "ibcni/ipam/block_backend.h"

namespace ibcni::ipam::etcd_kv {

using SysClock = std::chrono::system_clock;

/// The time now, as written in values (RFC 3339).
[[nodiscard]] std::string nowText();
/// A claim's value: {"node","claimedAt"} and the attributes given ("owner", "pod", "lender").
[[nodiscard]] std::string claimValue(std::string_view node, const ClaimAttrs& attrs, const std::string& claimedAt);
/// A node key's value: {"node", `when`: now}.
[[nodiscard]] std::string nodeValue(std::string_view node, const char* when);
/// The holder a claim's value names; identity and version from the key's revisions.
[[nodiscard]] BackendResult<Holder> holderOf(const etcd::Kv& kv, const etcd::Call& call);
/// A revision given back as text (Holder::version, PoolDefinition::identity); nullopt when it is
/// not a positive number.
[[nodiscard]] std::optional<std::int64_t> revisionOf(std::string_view text);
/// The definition of `pool` a key holds.
[[nodiscard]] BackendResult<PoolDefinition> definitionOf(const etcd::Kv& kv, std::string_view pool,
                                                         const etcd::Call& call);
/// A pool definition's value: {"fields","origin"} and "closed" when it is.
[[nodiscard]] std::string definitionValue(const PoolDefinition& def);

}  // namespace ibcni::ipam::etcd_kv
