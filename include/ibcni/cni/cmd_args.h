// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <compare>
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/cni/error.h"
#include "ibcni/net/ip.h"

namespace ibcni::cni {

enum class Command { kAdd, kDel, kCheck, kVersion, kGc, kStatus };

[[nodiscard]] const char* toString(Command c);

/// The invocation's CNI_* environment, validated per verb.
struct CmdArgs {
  Command command = Command::kVersion;
  std::string containerId;        ///< CNI_CONTAINERID
  std::string netns;              ///< CNI_NETNS (may be empty on DEL)
  std::string ifName;             ///< CNI_IFNAME
  std::string rawArgs;            ///< CNI_ARGS as given
  std::vector<std::string> path;  ///< CNI_PATH split on ':' (empty entries dropped)
};

/// One attachment of a container to a network: CNI_CONTAINERID and CNI_IFNAME, the key of ADD and
/// DEL, of ibcni's records and of the IPAM's allocations (and of GC's cni.dev/valid-attachments).
struct AttachmentKey {
  std::string containerId;
  std::string ifName;
  auto operator<=>(const AttachmentKey&) const = default;
  /// "containerID/ifname", for messages.
  [[nodiscard]] std::string toString() const { return containerId + "/" + ifName; }
};

/// The CNI_ARGS keys ibcni understands (CONVENTIONS.md and what Kubernetes runtimes and Multus
/// send). Unknown keys are an error unless IgnoreUnknown=1|true is present.
struct CniArgs {
  bool ignoreUnknown = false;
  std::vector<net::IpPrefix> ips;  ///< IP=10.1.2.3[/24][,...]
  std::string mac;                 ///< MAC= (legacy Multus)
  std::string guid;                ///< GUID= (the VF's InfiniBand GUID, as given; validated by its user)
  std::string podNamespace;        ///< K8S_POD_NAMESPACE
  std::string podName;             ///< K8S_POD_NAME
  std::string podUid;              ///< K8S_POD_UID
  std::string podInfraContainerId; ///< K8S_POD_INFRA_CONTAINER_ID
  std::map<std::string, std::string> unknown;  ///< kept (and ignored) under IgnoreUnknown
};

/// The spec's rule for container IDs and network names: a letter or digit, then letters, digits,
/// '_', '.' and '-'. (Hand-written: compiling a std::regex costs more than the rest of an IPAM ADD.)
[[nodiscard]] bool isValidIdentifier(std::string_view s);

/// The longest container ID ibcni takes. The spec's identifier rule sets no length; 200 keeps
/// "<containerID>:<ifname>" a valid file name (ibcni's records, ibcni-ipam's store) with room to
/// spare. Kubernetes runtimes send 64 hex digits.
inline constexpr std::size_t kMaxContainerIdLength = 200;

/// The one container-ID rule, for CNI_CONTAINERID and every store key made of it: the spec's
/// identifier rule (isValidIdentifier), at most kMaxContainerIdLength bytes.
[[nodiscard]] bool isValidContainerId(std::string_view s);

/// Parses CNI_ARGS ("K=V;K2=V2"). A pair without '=', a bad IP/MAC value, or an unknown key without
/// IgnoreUnknown=1|true is error 4 naming CNI_ARGS, the key and the value.
[[nodiscard]] Result<CniArgs> parseCniArgs(std::string_view text);

}  // namespace ibcni::cni
