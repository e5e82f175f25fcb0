// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/cni/cmd_args.h"
#include "ibcni/cni/error.h"
#include "ibcni/cni/result.h"
#include "ibcni/cni/spec_version.h"
#include "ibcni/config/guid_pool_conf.h"
#include "ibcni/config/ipam_conf.h"
#include "ibcni/log/level.h"
#include "ibcni/net/ip.h"
#include "ibcni/net/pkey.h"

namespace ibcni::config {

/// How the interface reaches the pod.
enum class Mode {
  kSriov,  ///< move an existing netdev (an SR-IOV VF) into the pod
  kIpoib,  ///< create an IPoIB pkey child of an IPoIB parent in the pod
};

/// `ipoibMode`: the IPoIB child's transport.
enum class IpoibMode { kDatagram, kConnected };

/// `logLevel`.
using LogLevel = log::Level;

/// Where ibcni keeps its attachment records and locks unless `stateDir` says otherwise. tmpfs: a
/// record describes kernel state (a device in a pod netns, a VF's GUID) that a reboot discards with
/// every pod, so it has no use after one, and writing it costs no disk flush.
inline constexpr std::string_view kDefaultStateDir = "/run/ibcni";

/// The capabilities ibcni declares, as the runtime passed them in runtimeConfig.
struct RuntimeConfig {
  std::vector<net::IpPrefix> ips;            ///< "ips": handed to IPAM
  std::optional<net::HwAddress> mac;         ///< "mac": set on the pod interface
  std::optional<net::PciAddress> deviceId;   ///< "deviceID": selects the device
  std::optional<net::Guid> infinibandGuid;   ///< "infinibandGUID": the VF's node and port GUID
  std::string deviceInfoFile;                ///< "CNIDeviceInfoFile": Multus' device-info file, if any
};

/// `linkState`: how the PF presents the VF's link (IFLA_VF_LINK_STATE).
enum class VfLinkState { kAuto, kEnable, kDisable };

/// `verbsCheck`: whether and how the RDMA device behind the interface is checked with libibverbs.
struct VerbsCheck {
  enum class Mode {
    kOff,      ///< not checked
    kWarn,     ///< checked; problems are logged, ADD and CHECK succeed
    kRequire,  ///< checked; a problem fails ADD (after a full rollback) and CHECK with error 109
  };
  Mode mode = Mode::kWarn;
  std::uint32_t timeoutMs = 2000;  ///< the probe process is killed after this
  bool qpProbe = false;            ///< `probe: "qp"`: also bring a UD QP to RTS
};

/// `rdmaIsolation`: whether the VF's RDMA device moves into the pod's netns.
enum class RdmaIsolation {
  kAuto,  ///< move it when the node's RDMA subsystem is in exclusive netns mode
  kOn,    ///< move it; refuse when the node is in shared mode
  kOff,   ///< never move it
};

/// `vfio`: whether sriov mode gives a VF bound to vfio-pci to a VM (KubeVirt): the VF stays in the
/// host, bound to vfio-pci, its GUIDs and link state set through its PF, and nothing moves into the
/// pod's netns.
enum class VfioUse {
  kAuto,  ///< a VF bound to vfio-pci (or a vendor's *_vfio_pci) goes to a VM; any other to the pod
  kOn,    ///< a network for VMs: deviceID must be bound to vfio-pci
  kOff,   ///< a network for pods: a VF bound to vfio-pci is refused
};

/// `policyRouting`: the interface answers on itself (multi-rail pods, several interfaces in one
/// subnet). Its routes go into a table of its own, a rule sends traffic from each of its addresses
/// there, and its ARP and reverse-path sysctls are set for interfaces that share a subnet
/// (docs/configuration.md "Multi-rail pods").
struct PolicyRouting {
  /// The interface's table; unset: derived from CNI_IFNAME (policy_routing.h, policyTable).
  std::optional<std::uint32_t> table;
  std::uint32_t priority = 1000;  ///< the rules' priority (`ip rule ... pref`)
};

/// A network configuration after parsing, canonicalizing and validating. Everything downstream
/// trusts it.
struct NetConf {
  std::string cniVersion;          ///< as given, e.g. "1.0.0"
  cni::SpecVersion version = cni::SpecVersion::k110;
  std::string name;
  std::string type;
  Mode mode = Mode::kSriov;

  /// The device to move, by PCI address: runtimeConfig.deviceID, else deviceID, else pciBusID.
  std::optional<net::PciAddress> deviceId;
  /// ... or by host netdev name ("device"), when no PCI address is given.
  std::string device;

  std::optional<std::uint32_t> mtu;
  std::optional<VfLinkState> linkState;  ///< unset: the VF's link state is left alone
  /// `pkey` the VF's pkey table must hold, without the membership bit (Pkey::partition()).
  std::optional<net::Pkey> pkey;
  RdmaIsolation rdmaIsolation = RdmaIsolation::kAuto;
  VfioUse vfio = VfioUse::kAuto;
  std::optional<PolicyRouting> policyRouting;  ///< unset: the interface's routes stay in main
  std::optional<net::Guid> argsGuid;     ///< args.cni.guid
  /// `guidPool` (sriov mode only), parsed, or what is wrong with it (also: given in ipoib mode).
  /// Kept as a result like embeddedIpam: ADD and CHECK refuse a broken one when they parse it; DEL,
  /// GC and STATUS go on with it (DEL still puts the VF's GUIDs back).
  std::optional<cni::Result<GuidPoolConf>> guidPool;
  VerbsCheck verbsCheck;

  // ipoib mode: the parent, by netdev name or by RDMA device and port.
  std::string master;                    ///< `master`: the IPoIB parent netdev
  std::string rdmaDevice;                ///< `rdmaDevice`: pick the IPoIB netdev of this device's `port`
  std::uint32_t port = 1;                ///< `port` of `rdmaDevice`, from 1
  std::optional<IpoibMode> ipoibMode;    ///< unset: the parent's
  bool umcast = false;                   ///< `umcast`: allow user-space multicast
  std::string ipamType;            ///< empty: no IPAM (layer 2 only)
  /// ipam.type "ibcni-ipam" (or ibcni-ipam run as an IPAM plugin): the `ipam` object, parsed, or
  /// what is wrong with it. The embedded IPAM reports the error when it is called, as a delegated
  /// IPAM plugin would report its own (so DEL still puts the device back first).
  std::optional<cni::Result<IpamConfig>> embeddedIpam;
  cni::Dns dns;
  LogLevel logLevel = LogLevel::kWarn;
  std::string logFile;             ///< empty: stderr
  std::string stateDir = std::string(kDefaultStateDir);

  RuntimeConfig runtime;
  std::vector<net::IpPrefix> argsIps;   ///< args.cni.ips
  std::optional<cni::AddResult> prevResult;
  /// GC only: cni.dev/valid-attachments (or cni.dev/attachments); nullopt when neither is given.
  std::optional<std::vector<cni::AttachmentKey>> validAttachments;
  std::vector<std::string> unknownKeys;         ///< top-level keys ibcni does not know (logged)
};

/// The request's JSON document, read once (config/ alone knows its type).
struct RequestDocument;

/// The parts of the request that must be read before anything else: the version check and the
/// logging settings. Never fails on a field other than cniVersion.
struct Preamble {
  std::string cniVersion;  ///< "" when absent
  LogLevel logLevel = LogLevel::kWarn;
  std::string logFile;
  /// The document it was read from, for parseNetConf(preamble, ...): the text is parsed once.
  std::shared_ptr<const RequestDocument> document;
};

/// Reads stdin as JSON and extracts the preamble.
/// @return error 6 when stdin is not a JSON object.
[[nodiscard]] cni::Result<Preamble> parsePreamble(std::string_view stdinText);

/// Which executable reads the configuration: ibcni itself, or ibcni-ipam run as an IPAM plugin
/// (which needs no device, but needs ipam.type).
enum class Role { kPlugin, kIpamPlugin };

/// Parses, canonicalizes and validates the whole request configuration for `command`.
/// @return error 1 for an unsupported cniVersion, 6 for undecodable JSON, 7 naming the field, the
///         value and what is accepted for anything invalid.
[[nodiscard]] cni::Result<NetConf> parseNetConf(std::string_view stdinText, cni::Command command,
                                               Role role = Role::kPlugin);
/// The same, from the document parsePreamble already read (the dispatcher's path).
[[nodiscard]] cni::Result<NetConf> parseNetConf(const Preamble& preamble, cni::Command command,
                                               Role role = Role::kPlugin);

/// The network served by ibcni-ipam in a .conf or .conflist file (`ibcni-ipam gc CONFIG_FILE`): the
/// file itself, or the conflist's plugin whose ipam.type is ibcni-ipam with the list's name and
/// cniVersion, read as ibcni-ipam reads a request (the IPAM's parser: ipam/config/ipam_network.cpp).
/// @return error 6 when the file is not a JSON object or has no such plugin; the errors of
///         parseNetConf otherwise.
[[nodiscard]] cni::Result<NetConf> parseIpamNetworkFile(std::string_view fileText);

/// Parses a partition key given as a JSON-ish text ("0x7fff", "32767") for `field`, by the rules of
/// net::Pkey::parse (the full-membership bit is dropped). What it refuses gets an explanation.
/// @return the pkey without the membership bit, or error 7 naming `field` and `text`.
[[nodiscard]] cni::Result<net::Pkey> parsePkey(std::string_view field, std::string_view text);

/// A GUID for the VF given in `field`: 8 colon-separated hex octets, neither all zeros nor all ones.
/// @return error 7 naming `field` and `text` otherwise.
[[nodiscard]] cni::Result<net::Guid> parseVfGuid(std::string_view field, std::string_view text);

[[nodiscard]] const char* toString(Mode m);
[[nodiscard]] const char* toString(VfLinkState s);
[[nodiscard]] const char* toString(IpoibMode m);
[[nodiscard]] const char* toString(LogLevel l);

}  // namespace ibcni::config
