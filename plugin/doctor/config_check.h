// SPDX-License-Identifier: Apache-2.0
// `ibcni doctor --config FILE`: would this network config work on this node? The config is read by
// the plugin's own parser and each device it could be given is resolved by the mode's own resolve()
// (which changes nothing), so the answer is the one ADD would give, before any pod exists.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "plugin/deps.h"
#include "plugin/doctor/doctor.h"
#include "ibcni/config/net_conf.h"
#include "ibcni/os/netns.h"
#include "ipam/pool_report.h"

namespace ibcni::doctor {

/// What checkConfig() works with: the plugin's dependencies (production ones in `ibcni doctor`,
/// fakes in tests) and what the node report already found.
struct ConfigCheckInputs {
  plugin::Deps& deps;
  const os::Netns& host;
  const DoctorReport& node;           ///< its SR-IOV PFs are the VFs a device plugin can hand out
  std::vector<std::string> cniPath;   ///< where delegated IPAM plugins are looked for
  std::string verbsNetnsPath = "/proc/self/ns/net";
  /// Cluster mode (ipam.cluster): the pool's report as `ibcni-ipam pools` makes it
  /// (EmbeddedIpam::pools with the production backends). Null: the backend is not asked.
  std::function<cni::Result<ipam::PoolReport>(const ipam::Request&)> clusterPools = nullptr;
  /// guidPool.cluster: the GUID pool's report as `ibcni pools` makes it (EmbeddedGuidPools::pools).
  /// Null: the backend is not asked.
  std::function<cni::Result<ipam::PoolReport>(const config::GuidPoolConf&, const std::string& network)> guidPools =
      nullptr;
  /// Cluster mode: "" when libcurl loads, else why not. Null: not checked.
  std::function<std::string()> libcurlProblem = nullptr;
  /// Where the node's name is read when ipam.cluster.nodeName is absent (then the host name).
  std::string nodeNameFile = std::string(config::kNodeNameFile);
  /// Cluster mode: seconds between two passes of the node agent (`ibcni reconcile`; the
  /// DaemonSet's IBCNI_RECONCILE_INTERVAL, 0: no agent), and where that figure came from.
  std::optional<std::int64_t> agentInterval = std::nullopt;
  std::string agentIntervalSource = {};
};

/// The ibcni network config inside `text` (a NetworkAttachmentDefinition as kubectl prints it, a
/// config list with an ibcni entry, or the network config itself), as JSON text; a list's entry
/// gets the list's cniVersion and name, as libcni passes them.
/// @return error 7 saying what `text` is instead, and what to give.
[[nodiscard]] cni::Result<std::string> ibcniConfigIn(std::string_view text);

/// `config` (an ibcni network config) parsed as `command` parses it. When the device plugin picks
/// the device (no deviceID, pciBusID or device: Multus injects the VF it picked), with a stand-in
/// deviceID while parsing, taken out again.
[[nodiscard]] cni::Result<config::NetConf> parseNadConfig(const std::string& config, cni::Command command);

/// Judges `text`: a NetworkAttachmentDefinition as `kubectl get net-attach-def NAME -o json`
/// prints it, a network config (type ibcni), or a config list with an ibcni entry.
/// - sriov without a device (the device plugin picks one per pod): every VF of the node's SR-IOV
///   PFs is tried; the config works when at least one would be accepted. A VF without a GUID is
///   accepted on condition (needsGuid) when the config does not set one.
/// - sriov with deviceID/device, ipoib: that device or parent.
/// Then what STATUS checks (stateDir writable, IPAM plugin installed and ready) and, unless
/// verbsCheck is off, the verbs check of each accepted device's RDMA port (from the host: the pod
/// sees the same port) without the RoCE address part. With ipam.cluster: the node name ADD uses
/// and where it comes from, libcurl, the kubeconfig (kubernetes backend), one timed list of the
/// pool's blocks, and this node's blocks as its ledger and the backend see them. Never throws.
[[nodiscard]] ConfigReport checkConfig(std::string_view text, const std::string& file, const ConfigCheckInputs& in);

}  // namespace ibcni::doctor
