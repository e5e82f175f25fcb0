// SPDX-License-Identifier: Apache-2.0
// What the node agent counts on this node for its metrics, as plain values: the attachment records
// of the state directories and the address pools of ibcni-ipam's data directories. Read from disk
// only: no backend is asked. The exposition (agent/metrics/) maps them to metric families.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ibcni/state/attachment_store.h"
#include "plugin/agent/pod_ports.h"
#include "plugin/agent/reconcile.h"

namespace ibcni::plugin {

/// Attachment records of one network in one mode ("ipoib", "sriov").
struct AttachmentCount {
  std::string network;
  std::string mode;
  std::uint64_t count = 0;
  bool operator==(const AttachmentCount&) const = default;
};

/// One ibcni-ipam address pool: a node-local one (<dataDir>/<network>, pool = the network's name)
/// or a cluster one (<dataDir>/.cluster/<pool>, network = the network its network.json names).
struct AddressCount {
  std::string network;
  std::string pool;
  std::uint64_t used = 0;  ///< addresses held inside the pool's ranges
  /// Node-local: what round-robin can still hand out (ranges less gateways and exclusions, less used).
  /// Cluster: the capacity of the blocks this node owns (block size each) less used, at least 0.
  std::uint64_t free = 0;
  bool operator==(const AddressCount&) const = default;
};

/// A cluster pool's blocks in this node's ledger (blocks.json) in one state ("intent", "owned",
/// "releasing", "lost").
struct BlockCount {
  std::string pool;
  std::string state;
  std::uint64_t count = 0;
  bool operator==(const BlockCount&) const = default;
};

struct NodeCounts {
  std::vector<AttachmentCount> attachments;  ///< sorted by network, mode
  std::vector<AddressCount> addresses;       ///< in directory order: node-local pools, then cluster pools
  std::vector<BlockCount> blocks;            ///< sorted by pool, state
  std::vector<PodPortCounters> ports;        ///< the pods' RDMA ports (readPodPorts), as last read
  std::vector<std::string> errors;           ///< what could not be read, in words
};

using StoreFactory = std::function<std::unique_ptr<state::AttachmentStore>(const std::string& stateDir)>;

/// The attachment records of every state directory (a missing directory counts none).
void countAttachments(const std::vector<std::string>& stateDirs, const StoreFactory& makeStore, NodeCounts& out);

/// The pools of every ibcni-ipam data directory that keep their configuration (network.json): each
/// store read under its lock (waiting at most `lockWait` for an ADD or DEL that holds it).
void countPools(const std::vector<std::string>& dataDirs, std::chrono::milliseconds lockWait, NodeCounts& out);

/// How many outcomes of each action one reconcile pass had (AttachmentOutcome and AllocationOutcome:
/// "undone", "alive", "released", ...).
[[nodiscard]] std::map<std::string, std::uint64_t> actionCounts(const ReconcileReport& report);

}  // namespace ibcni::plugin
