// SPDX-License-Identifier: Apache-2.0
// Cluster mode's node-local memory of what this node holds in the shared pool: blocks.json in the
// pool's store directory, read and written under the store's lock. Every change is saved before the
// next backend call (ipam/README.md "Cluster safety", I3).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/ipam/block_backend.h"
#include "ibcni/os/boot_clock.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::ipam {

/// One block (or address) the node claimed, is about to claim, or is giving back.
struct LedgerEntry {
  enum class State {
    kIntent,     ///< written before the claim was sent; its answer is not known yet
    kOwned,      ///< the backend said it is this node's
    kReleasing,  ///< nothing is handed out from it any more; the release is not confirmed yet
    kLost,       ///< the backend shows it as another node's (or gone and taken): nothing is handed
                 ///< out from it; kept while local allocations remain in it, to report them
  };
  State state = State::kIntent;
  std::size_t set = 0;     ///< blocks: the range set
  std::string name;        ///< block key, or address
  ClaimAttrs attrs;        ///< addresses: owner, pod, lender
  std::string identity;    ///< the backend's grant (etcd create_revision, Kubernetes uid); "" unknown
  std::string version;     ///< the backend's version at the last claim or renewal
  std::string claimedAt;   ///< RFC 3339
  os::BootStamp since;     ///< when it entered its state (intent, releasing: for how long to wait)
  os::BootStamp emptySince;  ///< blocks: when the periodic pass first found it empty
  bool operator==(const LedgerEntry&) const = default;
};

/// "intent", "owned", "releasing", "lost"
[[nodiscard]] const char* ledgerStateName(LedgerEntry::State state);

/// The pool's definition as this node checked it against the backend's.
struct LedgerDefinition {
  std::string fields;    ///< canonical JSON (cluster_definition.h)
  std::string identity;  ///< the backend's grant of the definition
  std::string origin;
  bool operator==(const LedgerDefinition&) const = default;
};

/// blocks.json (format 2):
///   {"format": 2, "pool": P, "node": N, "network": the network that first used it here,
///    "backend": "etcd"|"kubernetes", "etcdLease": "ID", "definition": {...},
///    "confirmed": {"boot": ID, "ns": N}, "blocks": [...], "addresses": [...], ...}
/// Format 1 (no "format") is read too: its entries keep their state, the definition is checked
/// again.
struct Ledger {
  std::string pool;
  std::string node;
  std::string network;
  std::string backend;
  std::int64_t etcdLease = 0;
  std::optional<LedgerDefinition> definition;  ///< checked against the backend (nullopt: not yet)
  /// When the backend last confirmed every hold (the send time of the renewal that succeeded).
  os::BootStamp confirmed;
  std::vector<LedgerEntry> blocks;
  std::vector<LedgerEntry> addresses;
  /// When ADD last asked the backend about a pending claim: with the backend down, an ADD that fits
  /// the owned blocks does not wait for it again for a while.
  os::BootStamp pendingCheckedAt;
  /// When this node began asking the pool's holders for room (a demand in the backend), and when
  /// it last asked (each ADD that found no room).
  os::BootStamp demandedAt;
  os::BootStamp askedAt;
  bool operator==(const Ledger&) const = default;
};

inline constexpr const char* kLedgerFileName = "blocks.json";

/// The ledger in `dir`, or nullopt when there is none yet. EUCLEAN (op names the file) when it is
/// not a ledger.
[[nodiscard]] os::SysResult<std::optional<Ledger>> readLedger(const std::string& dir);
/// Writes the ledger: aside, fsync()ed, renamed over, the directory fsync()ed.
[[nodiscard]] os::SysResult<void> writeLedger(const std::string& dir, const Ledger& ledger);
/// Moves a ledger that cannot be read aside (blocks.json.corrupt-<time>), so that the node rebuilds
/// it from the backend. @return the new name.
[[nodiscard]] os::SysResult<std::string> setLedgerAside(const std::string& dir);

}  // namespace ibcni::ipam
