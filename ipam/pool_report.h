// SPDX-License-Identifier: Apache-2.0
// What `ibcni-ipam pools` and `ibcni doctor --config` tell about a cluster pool (ipam.cluster): the
// pool's blocks as the backend lists them, their holders, this node's fill and ledger. Plain data:
// EmbeddedIpam::pools() builds it, printPoolReport/renderPoolReport print it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ibcni::ipam {

/// One block of the pool: claimed in the backend, or only in this node's ledger.
struct PoolBlockRow {
  std::string key;     ///< "10.56.0.32-27": the name the backend claims
  std::string cidr;    ///< "10.56.0.32/27"; empty when the key is none of this configuration's blocks
  std::optional<std::size_t> set;  ///< range set; nullopt with an empty cidr
  std::string holder;  ///< the node the backend names; empty when the backend does not list it
  bool mine = false;   ///< the holder is this node
  std::uint64_t size = 0;  ///< addresses in the block (blockSize)
  /// Addresses in use: known only for this node's blocks (from the node-local store).
  std::optional<std::uint64_t> inUse;
  std::optional<std::chrono::system_clock::time_point> claimedAt;  ///< the backend's
  std::optional<std::chrono::system_clock::time_point> renewedAt;  ///< the backend's (not with etcd)
  std::string ledgerState;  ///< this node's ledger: "owned", "intent", "releasing", "lost", or "" (not in it)
  std::optional<std::int64_t> emptyForSeconds;  ///< this node's ledger: empty for so long (periodic pass)
};

/// One single address a pod named (runtimeConfig ips, reservations), claimed in the backend.
struct PoolAddressRow {
  std::string address;
  std::string holder;
  std::string owner;   ///< "<containerID>:<ifname>"; empty for a loan not in use
  std::string pod;     ///< "namespace/name" of the pod that named it (reservations)
  std::string lender;  ///< a lent address: the node whose block it lies in
  std::optional<std::chrono::system_clock::time_point> claimedAt;
};

/// Where this node's ledger and the backend disagree.
struct PoolDisagreement {
  std::string block;    ///< a block key, or an address
  std::string ledger;   ///< "owned", "intent", "releasing", "lost", "absent"
  std::string backend;  ///< "this node", "node X", "absent"
};

struct PoolReport {
  bool guids = false;       ///< a GUID pool (guidPool.cluster): blocks are GUID ranges, named values GUIDs
  std::string network;      ///< the network of the configuration read
  std::string pool;         ///< ipam.cluster.pool
  std::string backend;      ///< "etcd", "kubernetes"
  std::string endpoint;     ///< etcd endpoints (comma-separated), or the kubeconfig's server
  std::string node;         ///< this node's name
  std::string nodeSource;   ///< "ipam.cluster.nodeName", the node-name file's path, or "hostname"
  std::uint32_t blockSize = 0;
  std::string storeDir;     ///< <dataDir>/.cluster/<pool>
  std::vector<std::string> rangeSets;   ///< each range set, described
  std::vector<std::string> setBlocks;   ///< per range set: how many blocks it has (decimal: IPv6 can be huge)
  std::string totalBlocks;  ///< decimal
  std::size_t claimedBlocks = 0;  ///< blocks of this configuration the backend lists as claimed
  std::string freeBlocks;   ///< decimal: totalBlocks - claimedBlocks
  std::map<std::string, std::size_t> perNode;  ///< node -> blocks it holds
  std::vector<PoolBlockRow> blocks;            ///< backend's, then ledger-only ones
  std::vector<PoolAddressRow> addresses;
  std::string fingerprint;                      ///< this configuration's ranges and block size
  bool ledgerPresent = false;
  /// How long ago the backend last confirmed this node's holds (nullopt: never on this boot).
  std::optional<std::int64_t> confirmedAgoSeconds;
  std::vector<PoolDisagreement> disagreements;
  std::chrono::milliseconds listTime{0};        ///< how long the backend's list call took
  std::vector<std::string> warnings;            ///< what could not be read (the store, the definition)
};

/// `ibcni-ipam pools --json`.
[[nodiscard]] std::string printPoolReport(const PoolReport& report);
/// `ibcni-ipam pools`: a header, an aligned table of the blocks, the named addresses, the totals;
/// ages are counted to `now`.
[[nodiscard]] std::string renderPoolReport(const PoolReport& report, std::chrono::system_clock::time_point now);


}  // namespace ibcni::ipam
