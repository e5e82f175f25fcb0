// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ibcni/os/netns.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::rdma {

/// The RDMA subsystem's network namespace mode (RDMA_NLDEV_SYS_ATTR_NETNS_MODE).
enum class NetnsMode {
  kShared,     ///< every RDMA device is visible from every netns (the default)
  kExclusive,  ///< an RDMA device belongs to one netns and can be moved (`rdma system set netns exclusive`)
};

/// One port of an RDMA device, as RDMA netlink reports it (RDMA_NLDEV_CMD_PORT_GET).
struct Port {
  std::uint32_t deviceIndex = 0;  ///< RDMA_NLDEV_ATTR_DEV_INDEX (global, not per netns)
  std::string deviceName;         ///< RDMA_NLDEV_ATTR_DEV_NAME, e.g. "mlx5_3", "rxe0"
  std::uint32_t port = 0;         ///< RDMA_NLDEV_ATTR_PORT_INDEX, from 1
  /// RDMA_NLDEV_ATTR_NDEV_INDEX / _NAME: the port's netdev. The kernel reports it only when that
  /// netdev is in the namespace that asks, so 0 and "" otherwise (and for ports without netdev).
  int netdevIndex = 0;
  std::string netdevName;
  bool operator==(const Port&) const = default;
};

/// RDMA netlink (NETLINK_RDMA, the nldev client), as iproute2's `rdma` tool speaks it. Every call
/// names the namespace it acts in; the socket is opened inside it.
class RdmaNetlink {
 public:
  virtual ~RdmaNetlink() = default;

  /// RDMA_NLDEV_CMD_SYS_GET. The mode is node-wide; the host netns is the one to ask.
  /// @return EPROTONOSUPPORT when the kernel has no RDMA netlink (ib_core is not loaded).
  [[nodiscard]] virtual os::SysResult<NetnsMode> netnsMode(const os::Netns& ns) = 0;

  /// Every port of every RDMA device visible from `ns` (an RDMA_NLDEV_CMD_PORT_GET dump), in the
  /// kernel's order. Empty when there are none (or ib_core is not loaded).
  [[nodiscard]] virtual os::SysResult<std::vector<Port>> ports(const os::Netns& ns) = 0;

  /// Moves RDMA device `deviceIndex`, visible from `from`, into `to` (RDMA_NLDEV_CMD_SET with
  /// RDMA_NLDEV_NET_NS_FD, as `rdma dev set DEV netns NS` sends). Needs exclusive mode.
  /// @return the kernel's errno and extended ACK: EOPNOTSUPP for drivers that cannot move (rxe),
  ///         ENODEV when `from` does not see the device.
  [[nodiscard]] virtual os::SysResult<void> moveDevice(const os::Netns& from, std::uint32_t deviceIndex,
                                                       const os::Netns& to) = 0;
};

}  // namespace ibcni::rdma
