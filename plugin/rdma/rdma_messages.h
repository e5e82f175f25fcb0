// SPDX-License-Identifier: Apache-2.0
#pragma once

// RDMA netlink (NETLINK_RDMA, nldev client) messages as bytes: the builders and parsers behind
// MnlRdmaNetlink, kept free of sockets so that tests can compare them with what iproute2's
// `rdma` tool sends and feed them the kernel's captured answers (tests/unit/rdma/testdata).

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ibcni/os/sys_error.h"
#include "ibcni/rdma/rdma_netlink.h"

namespace ibcni::rdma::wire {

/// `rdma system show`: nlmsghdr(RDMA_NLDEV_CMD_SYS_GET, NLM_F_REQUEST|NLM_F_ACK), no attributes.
[[nodiscard]] std::vector<std::uint8_t> buildSysGet(std::uint32_t seq);

/// Every RDMA device visible from the socket's netns, as the first message of every `rdma`
/// command: nlmsghdr(RDMA_NLDEV_CMD_GET, NLM_F_REQUEST|NLM_F_ACK|NLM_F_DUMP), no attributes.
[[nodiscard]] std::vector<std::uint8_t> buildDevDump(std::uint32_t seq);

/// Every port of one device: nlmsghdr(RDMA_NLDEV_CMD_PORT_GET, NLM_F_REQUEST|NLM_F_ACK|
/// NLM_F_DUMP) | u32 DEV_INDEX. The kernel refuses a port dump without DEV_INDEX (EINVAL), so
/// listing every port takes a device dump first.
[[nodiscard]] std::vector<std::uint8_t> buildPortDump(std::uint32_t seq, std::uint32_t devIndex);

/// `rdma dev set DEV netns NS`: nlmsghdr(RDMA_NLDEV_CMD_SET, NLM_F_REQUEST|NLM_F_ACK) |
/// u32 DEV_INDEX | u32 RDMA_NLDEV_NET_NS_FD. `nsFd` is an fd of the target netns, open in the
/// sending process.
[[nodiscard]] std::vector<std::uint8_t> buildSetNetns(std::uint32_t seq, std::uint32_t devIndex,
                                                      std::uint32_t nsFd);

/// One RDMA device from the RDMA_NLDEV_CMD_GET dump.
struct Device {
  std::uint32_t index = 0;  ///< RDMA_NLDEV_ATTR_DEV_INDEX (rxe0 may well be 0)
  std::string name;         ///< RDMA_NLDEV_ATTR_DEV_NAME
  bool operator==(const Device&) const = default;
};

/// The kernel's answer to one request, as far as the datagrams fed to readDatagram() go.
struct Answer {
  bool complete = false;     ///< its end was seen: the ACK, NLMSG_DONE or an NLMSG_ERROR
  bool interrupted = false;  ///< a message had NLM_F_DUMP_INTR: the dump is inconsistent
  /// The data messages (type >= NLMSG_MIN_TYPE), each with its nlmsghdr, in order.
  std::vector<std::vector<std::uint8_t>> messages;
};

/// Walks one datagram received for request `seq` and adds its messages to `answer`.
/// @param portid the socket's port id, which the kernel copies into its replies; 0 skips the check
/// @return EPROTO (op saying why) for a truncated message or one of another request; for an
///         NLMSG_ERROR with a non-zero error, the kernel's positive errno and the extended ACK's
///         NLMSGERR_ATTR_MSG in extAck (op is empty: the caller knows what it asked). `answer`
///         is then complete.
[[nodiscard]] os::SysResult<void> readDatagram(std::span<const std::uint8_t> datagram,
                                               std::uint32_t seq, std::uint32_t portid,
                                               Answer& answer);

/// RDMA_NLDEV_SYS_ATTR_NETNS_MODE of a SYS_GET reply: 1 is shared, 0 exclusive (iproute2's
/// rdma/sys.c names them in that order: {"exclusive", "shared"}).
/// @return EPROTO when the message is not a SYS_GET reply, lacks the attribute or has another
///         value.
[[nodiscard]] os::SysResult<NetnsMode> parseSysGet(std::span<const std::uint8_t> message);

/// DEV_INDEX and DEV_NAME of one message of the device dump. @return EPROTO when either is missing.
[[nodiscard]] os::SysResult<Device> parseDevice(std::span<const std::uint8_t> message);

/// One port from a PORT_GET reply: DEV_INDEX, DEV_NAME and PORT_INDEX are required (EPROTO
/// otherwise), NDEV_INDEX and NDEV_NAME are filled when the kernel sent them (it does only when
/// the netdev is in the socket's netns).
[[nodiscard]] os::SysResult<Port> parsePort(std::span<const std::uint8_t> message);

}  // namespace ibcni::rdma::wire
