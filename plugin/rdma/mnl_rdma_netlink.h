// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <vector>

#include "ibcni/rdma/rdma_netlink.h"

namespace ibcni::rdma {

/// rdma::RdmaNetlink over libmnl (the only implementation that talks to the kernel). Messages are
/// built and parsed by rdma_messages.h; this class owns the sockets.
///
/// Every call opens its own NETLINK_RDMA socket inside the namespace it acts in (the calling
/// thread enters it with os::NetnsGuard only for socket() and bind()) and closes it before
/// returning: the plugin asks RDMA netlink a handful of times per invocation, and a socket that
/// is not kept holds no namespace alive. Sockets are close-on-exec, have NETLINK_EXT_ACK and
/// NETLINK_CAP_ACK set and a 30 s receive timeout.
///
/// Choices beyond the interface comments:
///  * ports() is a device dump (RDMA_NLDEV_CMD_GET) followed by one RDMA_NLDEV_CMD_PORT_GET dump
///    per device: the kernel refuses a port dump without RDMA_NLDEV_ATTR_DEV_INDEX (EINVAL).
///    A dump marked NLM_F_DUMP_INTR, or a device that vanished between the two dumps (its port
///    dump fails with EINVAL or ENODEV), restarts the listing, up to 5 times; then EAGAIN, or
///    the last error.
///  * Without RDMA netlink in the kernel (socket() fails with EPROTONOSUPPORT, ib_core not
///    loaded), netnsMode() and moveDevice() return that error and ports() an empty list.
///  * moveDevice() passes `to`'s fd as RDMA_NLDEV_NET_NS_FD; a handle without fd is EBADF. The
///    kernel answers EINVAL for a device index that `from` does not see; moveDevice() then checks
///    with a device dump and returns ENODEV when the index is not listed. The kernel's EOPNOTSUPP (shared mode, or a driver such as rxe that cannot move) comes with no
///    extended ACK, so the error's op says what it means.
class MnlRdmaNetlink final : public RdmaNetlink {
 public:
  MnlRdmaNetlink() = default;

  [[nodiscard]] os::SysResult<NetnsMode> netnsMode(const os::Netns& ns) override;
  [[nodiscard]] os::SysResult<std::vector<Port>> ports(const os::Netns& ns) override;
  [[nodiscard]] os::SysResult<void> moveDevice(const os::Netns& from, std::uint32_t deviceIndex,
                                               const os::Netns& to) override;

 private:
  std::uint32_t nextSeq();
  std::uint32_t seq_ = 0;  // 0: not started (the first request takes the time, as iproute2 does)
};

}  // namespace ibcni::rdma
