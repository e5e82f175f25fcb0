// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/cni/cmd_args.h"
#include "ibcni/cni/error.h"
#include "ibcni/cni/result.h"
#include "ibcni/config/ipam_conf.h"
#include "ibcni/net/ip.h"

namespace ibcni::ipam {

/// One call to an IPAM plugin: what an allocation needs of the request as config/ parsed it once
/// (plugin/invocation.h's ipamRequest() takes it from the network configuration), and the validated
/// environment. It refers to the invocation's values and lives no longer than the call.
struct Request {
  const cni::CmdArgs& args;     ///< ibcni's own CNI_* environment; the command is replaced per call
  const cni::CniArgs& cniArgs;  ///< CNI_ARGS, parsed (pod identity, IP=)
  std::string_view network{};   ///< the network's name: a node-local pool's directory, its allocations' owner
  std::string_view ipamType{};  ///< ipam.type
  /// ibcni-ipam's settings (ipam.type "ibcni-ipam", or ibcni-ipam's own role) as config/ parsed them:
  /// null when another plugin serves the network, an error when they were refused.
  const cni::Result<config::IpamConfig>* settings = nullptr;
  std::span<const net::IpPrefix> runtimeIps{};  ///< runtimeConfig.ips (the ips capability)
  std::span<const net::IpPrefix> argsIps{};     ///< args.cni.ips
  const cni::AddResult* prevResult = nullptr;  ///< CHECK: what ADD returned
  /// GC: cni.dev/valid-attachments; null when the request names none.
  const std::vector<cni::AttachmentKey>* validAttachments = nullptr;
  /// The complete stdin ibcni received, for a delegated plugin: the spec requires a delegating
  /// plugin to pass the configuration on byte for byte. The embedded IPAM never reads it.
  std::string_view rawConfig{};
};

/// One allocation released by GC or by reclaiming, for reports and logs.
struct ReleasedAllocation {
  std::string containerId;
  std::string ifName;
  std::string pod;  ///< "namespace/name", empty outside Kubernetes
  std::string netns;
  std::vector<std::string> addresses;
  std::string network = {};  ///< whose allocation it was (a GUID pool serves several networks); may be empty
};

/// What the periodic pass did to a cluster pool's blocks (ipam.cluster), besides releasing
/// allocations: for the node agent's report.
struct PoolUpkeep {
  std::string pool;
  std::string node;
  bool renewed = false;          ///< every hold of this node was confirmed by the backend
  bool livenessRenewed = false;  ///< the node's liveness had lapsed (its agent did not run for a lease)
  std::vector<std::string> releasedBlocks;     ///< empty blocks given back (dry run: would be)
  std::vector<std::string> lostBlocks;         ///< claims another node holds now: nothing more is handed out from them
  std::vector<std::string> adoptedBlocks;      ///< claims the backend lists as this node's that the ledger lacked
  std::vector<std::string> releasedAddresses;  ///< single-address claims no attachment holds any more
  std::vector<std::string> reclaimedBlocks;    ///< claims found gone from the backend and claimed again
  std::vector<std::string> takenOver;          ///< claims of nodes certainly gone, taken over or removed
  std::vector<std::string> lent;               ///< addresses lent to nodes that asked for room
  std::vector<std::string> loansReturned;      ///< addresses lent earlier, given back by their borrower
};

/// What reclaiming a pool did: the allocations released and, for a cluster pool, its upkeep.
struct ReclaimOutcome {
  std::vector<ReleasedAllocation> released;
  std::optional<PoolUpkeep> upkeep;  ///< cluster pools only
};

/// The IPAM plugin a network uses. Errors from the plugin keep its code, msg and details.
class Ipam {
 public:
  virtual ~Ipam() = default;
  /// @return the addresses, routes and DNS the plugin allocated (interfaces are ignored).
  [[nodiscard]] virtual cni::Result<cni::AddResult> add(const Request& request) = 0;
  [[nodiscard]] virtual cni::Result<void> del(const Request& request) = 0;
  [[nodiscard]] virtual cni::Result<void> check(const Request& request) = 0;
  [[nodiscard]] virtual cni::Result<void> gc(const Request& request) = 0;
  [[nodiscard]] virtual cni::Result<void> status(const Request& request) = 0;
};

/// The upkeep of the IPAM pools kept on this node, for `ibcni reconcile`. Only the embedded IPAM
/// keeps what it needs: a delegated plugin has no such verb.
class IpamUpkeep {
 public:
  virtual ~IpamUpkeep() = default;
  /// Releases every allocation of the request's pool whose pod's network namespace is gone
  /// (`dryRun`: only lists them) and, for a cluster pool, does its periodic pass (renewed, given
  /// back, lost, adopted).
  [[nodiscard]] virtual cni::Result<ReclaimOutcome> reclaimPool(const Request& request, bool dryRun) = 0;
};

}  // namespace ibcni::ipam
