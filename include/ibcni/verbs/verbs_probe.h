// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/net/pkey.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::verbs {

/// IBV_LINK_LAYER_*.
enum class LinkLayer { kUnspecified, kInfiniband, kEthernet };

/// One entry of a port's GID table (ibv_query_gid_ex / sysfs gid_attrs).
struct Gid {
  std::uint32_t index = 0;
  std::array<std::uint8_t, 16> raw{};
  std::string type;  ///< "IB/RoCE v1" or "RoCE v2" (the kernel's gid_attrs/types text); empty when unknown
  bool operator==(const Gid&) const = default;
};

/// What libibverbs says about one port of one device, as seen from one network namespace.
struct PortFacts {
  std::string device;          ///< ibv_get_device_name
  std::uint32_t port = 1;
  int state = 0;               ///< enum ibv_port_state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER
  int physState = 0;           ///< ibv_port_attr.phys_state: 5 = LinkUp, 3 = Disabled, 2 = Polling
  LinkLayer linkLayer = LinkLayer::kUnspecified;
  std::uint16_t lid = 0;
  std::uint16_t smLid = 0;
  std::uint64_t nodeGuid = 0;  ///< ibv_get_device_guid, host byte order
  std::uint64_t portGuid = 0;  ///< interface id of GID 0 (InfiniBand), host byte order
  std::vector<net::Pkey> pkeys;      ///< ibv_query_pkey over the table, empty slots left out
  std::vector<Gid> gids;             ///< non-zero GIDs
  bool operator==(const PortFacts&) const = default;
};

/// What to look at: a device and port, from inside a network namespace.
struct ProbeRequest {
  std::string netnsPath;       ///< the pod's netns (the child process joins it)
  std::string device;          ///< RDMA device name; empty: the only device visible there
  std::uint32_t port = 1;
  bool qpProbe = false;        ///< also allocate a PD and CQ and bring a UD QP to RTS
  std::chrono::milliseconds timeout{2000};
};

/// What the probe saw.
struct ProbeResult {
  bool available = true;             ///< false: libibverbs.so.1 could not be loaded
  std::string unavailableReason;     ///< dlerror() text when !available
  std::vector<std::string> devices;  ///< every device ibv_get_device_list returned in the namespace
  bool opened = false;               ///< ibv_open_device of the requested device succeeded
  std::string openError;             ///< strerror when it did not (device missing: empty, opened false)
  std::optional<PortFacts> port;     ///< set when the device opened and the port was queried
  std::optional<bool> qpProbeOk;     ///< set when qpProbe was asked
  std::string qpProbeError;          ///< the failing step and errno, when !*qpProbeOk
};

/// Runs libibverbs (opened with dlopen in a forked child that joins the pod's network namespace,
/// so that the host's rdma-core and providers are used and the pod's view is what is seen).
class VerbsProbe {
 public:
  virtual ~VerbsProbe() = default;
  /// @return the facts; ETIMEDOUT when the child did not answer within `timeout` (it is killed);
  ///         the errno of fork/setns/pipe otherwise.
  [[nodiscard]] virtual os::SysResult<ProbeResult> probe(const ProbeRequest& request) = 0;
};

}  // namespace ibcni::verbs
