// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/cni/cmd_args.h"
#include "ibcni/cni/error.h"
#include "ibcni/cni/result.h"
#include "ibcni/cni/spec_version.h"
#include "ibcni/net/ip.h"

namespace ibcni::config {

/// How the interface reaches the pod.
enum class Mode {
  kSriov,  ///< move an existing netdev (an SR-IOV VF) into the pod
};

enum class LogLevel { kError, kWarn, kInfo, kDebug };

/// Where ibcni keeps its attachment records and locks unless `stateDir` says otherwise.
inline constexpr std::string_view kDefaultStateDir = "/var/lib/cni/ibcni";

/// An attachment named in a GC request (cni.dev/valid-attachments).
struct AttachmentKey {
  std::string containerId;
  std::string ifName;
  bool operator==(const AttachmentKey&) const = default;
};

/// The capabilities ibcni declares, as the runtime passed them in runtimeConfig.
struct RuntimeConfig {
  std::vector<net::IpPrefix> ips;            ///< "ips": handed to IPAM
  std::optional<net::HwAddress> mac;         ///< "mac": set on the pod interface
  std::optional<net::PciAddress> deviceId;   ///< "deviceID": selects the device
  std::optional<net::Guid> infinibandGuid;   ///< "infinibandGUID": validated; applied in sriov mode
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
  std::string ipamType;            ///< empty: no IPAM (layer 2 only)
  cni::Dns dns;
  LogLevel logLevel = LogLevel::kWarn;
  std::string logFile;             ///< empty: stderr
  std::string stateDir = std::string(kDefaultStateDir);

  RuntimeConfig runtime;
  std::vector<net::IpPrefix> argsIps;   ///< args.cni.ips
  std::optional<cni::AddResult> prevResult;
  std::vector<AttachmentKey> validAttachments;  ///< GC only
  std::vector<std::string> unknownKeys;         ///< top-level keys ibcni does not know (logged)
};

/// The parts of the request that must be read before anything else: the version check and the
/// logging settings. Never fails on a field other than cniVersion.
struct Preamble {
  std::string cniVersion;  ///< "" when absent
  LogLevel logLevel = LogLevel::kWarn;
  std::string logFile;
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

[[nodiscard]] const char* toString(Mode m);
[[nodiscard]] const char* toString(LogLevel l);

}  // namespace ibcni::config
