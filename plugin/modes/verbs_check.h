// SPDX-License-Identifier: Apache-2.0
// The verbs check: what libibverbs sees of the RDMA port behind a pod interface, judged. The facts
// come from a verbs::VerbsProbe (a child process in the pod's netns); the decisions are here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plugin/deps.h"
#include "ibcni/cni/error.h"
#include "ibcni/net/ip.h"
#include "ibcni/net/pkey.h"
#include "ibcni/netlink/netlink.h"
#include "ibcni/os/netns.h"
#include "ibcni/rdma/rdma_netlink.h"
#include "ibcni/verbs/verbs_probe.h"
#include "plugin/invocation.h"

namespace ibcni::plugin {

/// One problem the check found: what is wrong and what fixes it.
struct VerbsFinding {
  std::string check;    ///< short name: "libibverbs", "device", "open", "port state", ...
  std::string problem;
  std::string fix;
};

/// What the port should show beyond being usable.
struct VerbsExpectations {
  std::string device;                  ///< the RDMA device behind the interface
  std::uint32_t port = 1;
  std::optional<net::Pkey> pkey;       ///< without the membership bit
  std::vector<net::IpAddress> ips;     ///< RoCE: each needs a RoCE v2 GID
  bool qpProbe = false;
  /// The VF's GUID when sriov mode took it from guidPool (then a missing partition is the subnet
  /// manager not having admitted it yet), and the pool's name.
  std::string poolGuid;
  std::string guidPool;
};

/// What the host tells of the RDMA device behind an interface, before libibverbs is asked: whether
/// there is one, whether the pod can see it, and what the PCI function and its PF are.
struct RdmaFacts {
  config::Mode mode = config::Mode::kSriov;
  std::string subject;        ///< how the config named the device: deviceID = "...", device = "...", the parent
  std::string netdev;         ///< its netdev in the host (ipoib: the parent)
  bool infiniband = false;    ///< that netdev is an IPoIB link
  std::optional<net::PciAddress> pciAddress;  ///< its PCI function, if it has one
  std::string driver;         ///< the function's bound driver
  std::optional<net::PciAddress> pfPci;       ///< an SR-IOV VF's PF
  bool pfInfiniband = false;  ///< the PF's netdev is an IPoIB link
  std::vector<std::string> pfRdmaDevices;
  std::string rdmaDevice;     ///< the interface's RDMA device; empty: none was found
  bool rdmaMoved = false;     ///< ADD moves (moved) it into the pod's netns (rdmaIsolation)
  std::optional<rdma::NetnsMode> netnsMode;  ///< nullopt: RDMA netlink cannot tell, or not looked up
};

/// Gathers RdmaFacts from sysfs and RDMA netlink in `host`. `pciAddress` and `netdev` are the
/// device's as resolve() found them (ipoib: the parent, whose PCI function is looked up when
/// `pciAddress` is none); `rdmaDevice`/`rdmaMoved` what the mode found and did. Looks up only what
/// judgeRdmaPresence reads for that case (ADD's hot path): nothing when the RDMA device moved with
/// the interface, the netns mode when it stays in the host, the function and its PF for a finding.
[[nodiscard]] RdmaFacts rdmaFacts(Deps& deps, const os::Netns& host, const Invocation& inv,
                                  const std::optional<net::PciAddress>& pciAddress, const nl::Link& netdev,
                                  const std::string& rdmaDevice, bool rdmaMoved);

/// The rule for "the pod has no RDMA device behind this interface", one per cause ibcni can tell
/// apart, each with its fix:
/// - sriov, no RDMA device, but the netdev is IPoIB or the VF's PF is InfiniBand or has an RDMA
///   device ("driver": the VF's RDMA driver is not loaded, or the VF is bound to another driver);
/// - sriov, no RDMA device and nothing RDMA about the function or its PF ("not RDMA-capable":
///   the device plugin handed out the wrong device, a resource without isRdma);
/// - an RDMA device that stays in the host while the node is in exclusive RDMA netns mode
///   ("not visible": rdmaIsolation false; ipoib: a child cannot take its HCA's device along);
/// - ipoib, no RDMA device: the config names no rdmaDevice and the parent's PCI function has none.
/// nullopt: there is an RDMA device the pod should see; the verbs probe judges the rest.
[[nodiscard]] std::optional<VerbsFinding> judgeRdmaPresence(const RdmaFacts& facts);

/// Judges `result` against `want`. Empty: the RDMA side works as far as verbs can tell.
[[nodiscard]] std::vector<VerbsFinding> evaluateVerbs(const verbs::ProbeResult& result, const VerbsExpectations& want);

/// Runs the check as `inv`'s verbsCheck says: off → nothing; warn → findings logged; require →
/// error 109 listing every finding with its fix. First judgeRdmaPresence(`facts`) (a finding there
/// is the only one: there is nothing to probe), then the probe of `want` from inside `netnsPath`.
[[nodiscard]] cni::Result<void> runVerbsCheck(const Invocation& inv, Deps& deps, const std::string& netnsPath,
                                              const RdmaFacts& facts, const VerbsExpectations& want);

}  // namespace ibcni::plugin
