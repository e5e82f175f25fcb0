// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/cni/error.h"

namespace ibcni::rdma {

/// The counters of one port of one RDMA device, raw, as sysfs shows them.
///
/// Units: every value is the kernel's, unconverted. `counters` are the port's PMA counters
/// (IB spec, PortCounters / PortCountersExtended): packets are packets, but port_xmit_data and
/// port_rcv_data count 4-byte words (octets divided by 4), so bytes = value * 4
/// (bytesOfDataCounter). `hwCounters` are driver-specific (mlx5: out_of_buffer, ...; rxe:
/// sent_pkts, rcvd_pkts, ...), each in the unit its driver documents.
struct PortCounters {
  std::string device;
  std::uint32_t port = 1;
  /// The number before ':' in ports/<port>/state ("4: ACTIVE" -> 4); nullopt when the file is
  /// missing or not of that form. 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER.
  std::optional<std::uint32_t> state;
  /// ports/<port>/counters/<name> (port_xmit_data, port_rcv_data, port_xmit_packets,
  /// port_rcv_packets, link_downed, symbol_error, port_rcv_errors, ...). Empty when the device
  /// has no such directory (drivers without a PMA: rxe).
  std::map<std::string, std::uint64_t> counters;
  /// ports/<port>/hw_counters/<name>, without `lifespan` (the kernel's cache time of these
  /// values in milliseconds: a setting, not a counter). Empty when the device has none.
  std::map<std::string, std::uint64_t> hwCounters;
  /// The files that were left out of both maps, as "counters/<name>" or "hw_counters/<name>":
  /// unreadable (a PMA query that failed reads as an error) or not one decimal number. Metrics
  /// should skip them and may log them.
  std::vector<std::string> skipped;
};

/// One port to read: an RDMA device's name (as in /sys/class/infiniband) and its port number.
struct PortRef {
  std::string device;
  std::uint32_t port = 1;
};

/// Where and how the counters are read. The defaults are production's.
struct CounterSource {
  /// The sysfs this process sees: the host's in the node agent (host netns). Read first, in
  /// process: in shared RDMA netns mode every device is here, whatever netns its netdev is in.
  std::string sysfsRoot = "/sys";
  /// Where the netns child reads a device that `sysfsRoot` does not show (exclusive mode, the
  /// device moved into the pod's netns).
  std::string netnsSysfsRoot = "/sys";
  /// Whether the netns child mounts a fresh sysfs on `netnsSysfsRoot` (in a mount namespace of
  /// its own) after joining the netns: a sysfs shows the RDMA devices of the netns that mounted
  /// it. Only tests turn it off, to read a fake tree there.
  bool mountFreshSysfs = true;
  /// How long the netns child may take before it is killed (SIGKILL) and its ports fail.
  std::chrono::milliseconds timeout{5000};
};

/// Bytes of a port_xmit_data or port_rcv_data value, which counts 4-byte words (IB spec
/// PortXmitData / PortRcvData: "divided by 4"). Modulo 2^64, as the counter itself wraps.
[[nodiscard]] constexpr std::uint64_t bytesOfDataCounter(std::uint64_t words) noexcept {
  return words * 4U;
}

/// The counters of `device`/`port` under one sysfs tree, in process (no namespace change):
/// <sysfsRoot>/class/infiniband/<device>/ports/<port>/{state,counters/*,hw_counters/*}.
/// @return kDeviceNotFound naming the device (or the port) when it is not there, kInvalidConfig
///         for a device name that is no sysfs name, kIoFailure when a directory cannot be read.
[[nodiscard]] cni::Result<PortCounters> readPortCountersAt(const std::string& sysfsRoot,
                                                           const std::string& device,
                                                           std::uint32_t port);

/// The counters of `device`/`port` as seen from the network namespace at `netnsPath` (empty:
/// this process's). The device is looked up in `source.sysfsRoot` first (shared RDMA netns
/// mode, or a device that was not moved: no child, no namespace change). Otherwise, with a
/// `netnsPath`, a forked child joins that netns (setns CLONE_NEWNET), unshares its mount
/// namespace, mounts a fresh sysfs (which shows that netns's RDMA devices: exclusive mode) and
/// sends the counters back over a pipe; this process's threads never change namespace.
/// @return readPortCountersAt's errors; kNetnsFailure when `netnsPath` cannot be opened or
///         joined (a pod that is gone); kIoFailure when the child does not answer within
///         `source.timeout` (it is killed) or answers garbage.
[[nodiscard]] cni::Result<PortCounters> readPortCounters(const std::string& netnsPath,
                                                         const std::string& device, std::uint32_t port,
                                                         const CounterSource& source = {});

/// readPortCounters for several ports of one netns: at most one child, for all the ports the
/// host's sysfs does not show. One result per port, in the order of `ports`; a failure of the
/// child (netns gone, timeout) is the result of each port it was to read.
[[nodiscard]] std::vector<cni::Result<PortCounters>> readPortCountersBatch(
    const std::string& netnsPath, const std::vector<PortRef>& ports, const CounterSource& source = {});

}  // namespace ibcni::rdma
