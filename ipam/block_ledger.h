// SPDX-License-Identifier: Apache-2.0
// Cluster mode's node-local memory of what this node holds in the shared pool: blocks.json in the
// pool's store directory, read and written under the store's lock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/os/sys_error.h"

namespace ibcni::ipam {

/// One block (or address) the node claimed or is about to claim.
struct LedgerEntry {
  enum class State { kIntent, kOwned };
  State state = State::kIntent;  ///< kIntent: written before the claim was sent; its answer is not known yet
  std::size_t set = 0;           ///< blocks: the range set
  std::string name;              ///< block key, or address
  std::string owner;             ///< addresses: "<containerID>:<ifname>"
  std::string version;           ///< the backend's version token of the claim
  std::string claimedAt;         ///< RFC 3339
  std::string emptySince;        ///< blocks: RFC 3339 when the periodic pass first found it empty
  bool operator==(const LedgerEntry&) const = default;
};

/// blocks.json:
///   {"pool": P, "node": N, "fingerprint": F, "network": name of the network that first used it,
///    "backend": "etcd"|"kubernetes", "etcdLease": "ID",
///    "blocks": [{"state": "intent"|"owned", "set": 0, "name": "10.56.0.32-27", "version": "...", ...}],
///    "addresses": [{"state": ..., "name": "10.56.9.9", "owner": "<containerID>:<ifname>", ...}],
///    "defined": true}
struct Ledger {
  std::string pool;
  std::string node;
  std::string fingerprint;
  std::string network;
  std::string backend;
  std::int64_t etcdLease = 0;
  std::vector<LedgerEntry> blocks;
  std::vector<LedgerEntry> addresses;
  bool defined = false;  ///< the pool's definition was checked against the backend's
  /// When ADD last asked the backend about a pending claim (RFC 3339): with the backend down, an
  /// ADD that fits the owned blocks does not wait for it again for a while.
  std::string pendingCheckedAt;
};

inline constexpr const char* kLedgerFileName = "blocks.json";

/// The ledger in `dir`, or nullopt when there is none yet. EUCLEAN (op names the file) when it is
/// not a ledger.
[[nodiscard]] os::SysResult<std::optional<Ledger>> readLedger(const std::string& dir);
/// Writes the ledger: aside, fsync()ed, renamed over, the directory fsync()ed.
[[nodiscard]] os::SysResult<void> writeLedger(const std::string& dir, const Ledger& ledger);

}  // namespace ibcni::ipam
