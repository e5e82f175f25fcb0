// SPDX-License-Identifier: Apache-2.0
#include "plugin/rdma/mnl_rdma_netlink.h"

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <linux/netlink.h>
#include <memory>
#include <span>
#include <string>
#include <sys/socket.h>
#include <sys/time.h>
#include <utility>
#include <vector>

#include <libmnl/libmnl.h>

#include "plugin/rdma/rdma_messages.h"

namespace ibcni::rdma {

namespace {

// A listing that keeps being interrupted (NLM_F_DUMP_INTR, devices coming and going) is tried
// this many times before giving up.
constexpr int kDumpAttempts = 5;
// No RDMA netlink request should take long; a reply that never comes must not hang the plugin.
constexpr time_t kReceiveTimeoutSeconds = 30;
// Each reply datagram of an nldev dump holds a few hundred bytes per object; the kernel never
// sends more than 32 KiB in one.
constexpr std::size_t kReceiveBufferSize = 32768;

struct MnlSocketDeleter {
  void operator()(mnl_socket* p) const noexcept { (void)mnl_socket_close(p); }
};
using MnlSocketPtr = std::unique_ptr<mnl_socket, MnlSocketDeleter>;

std::string inNs(const os::Netns& ns) { return " in netns " + ns.path(); }

std::unexpected<os::SysError> withOp(os::SysError err, std::string op) {
  err.op = err.op.empty() ? std::move(op) : op + ": " + err.op;
  return std::unexpected(std::move(err));
}

/// One NETLINK_RDMA socket that was created inside a given network namespace.
class RdmaSocket {
 public:
  /// Enters `ns`, creates and binds the socket, and returns to the caller's namespace.
  static os::SysResult<RdmaSocket> openIn(const os::Netns& ns) {
    const std::string op = "open RDMA netlink socket" + inNs(ns);
    MnlSocketPtr sk;
    {
      // A netlink socket belongs to the namespace it was created in, whatever thread uses it
      // later, so the guard is held only around socket() and bind().
      auto guard = os::NetnsGuard::enter(ns);
      if (!guard) {
        return std::unexpected(guard.error());
      }
      sk.reset(mnl_socket_open2(NETLINK_RDMA, SOCK_CLOEXEC));
      if (!sk) {
        // EPROTONOSUPPORT: the kernel has no RDMA netlink (ib_core is not loaded).
        return os::sysFail(errno, op);
      }
      if (mnl_socket_bind(sk.get(), 0, MNL_SOCKET_AUTOPID) < 0) {
        return os::sysFail(errno, op + ": bind");
      }
    }
    const int one = 1;
    // Extended ACK brings the kernel's error strings; CAP_ACK keeps error replies short (both
    // as iproute2's lib/mnl_utils.c mnlu_socket_open sets them). Older kernels give no text.
    (void)mnl_socket_setsockopt(sk.get(), NETLINK_EXT_ACK, const_cast<int*>(&one), sizeof one);
    (void)mnl_socket_setsockopt(sk.get(), NETLINK_CAP_ACK, const_cast<int*>(&one), sizeof one);
    const timeval timeout{kReceiveTimeoutSeconds, 0};
    if (::setsockopt(mnl_socket_get_fd(sk.get()), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) != 0) {
      return os::sysFail(errno, op + ": set SO_RCVTIMEO");
    }
    return RdmaSocket(std::move(sk));
  }

  /// Sends `request` (whose sequence number is `seq`) and reads the answer to its end.
  /// @return the kernel's errno and extended ACK, or the socket's errno; op is left to the caller.
  os::SysResult<wire::Answer> request(std::span<const std::uint8_t> request, std::uint32_t seq) {
    if (mnl_socket_sendto(sk_.get(), request.data(), request.size()) < 0) {
      return os::sysFail(errno, "send");
    }
    const std::uint32_t portid = mnl_socket_get_portid(sk_.get());
    std::vector<std::uint8_t> buf(kReceiveBufferSize);
    wire::Answer answer;
    while (!answer.complete) {
      const ssize_t n = mnl_socket_recvfrom(sk_.get(), buf.data(), buf.size());
      if (n < 0) {
        if (errno == EINTR) {
          continue;
        }
        // EAGAIN after SO_RCVTIMEO: the kernel never answered.
        return os::sysFail(errno == EAGAIN ? ETIMEDOUT : errno, "receive");
      }
      if (auto rc = wire::readDatagram(std::span(buf.data(), static_cast<std::size_t>(n)), seq, portid, answer);
          !rc) {
        return std::unexpected(rc.error());
      }
    }
    return answer;
  }

 private:
  explicit RdmaSocket(MnlSocketPtr sk) : sk_(std::move(sk)) {}
  MnlSocketPtr sk_;
};

/// True when the device dump on `sk` lists `deviceIndex`; also true when the dump fails, so that
/// the caller keeps the kernel's original error.
bool visible(RdmaSocket& sk, std::uint32_t deviceIndex, std::uint32_t seq) {
  auto answer = sk.request(wire::buildDevDump(seq), seq);
  if (!answer) {
    return true;
  }
  return std::any_of(answer->messages.begin(), answer->messages.end(), [deviceIndex](const auto& m) {
    auto dev = wire::parseDevice(m);
    return !dev || dev->index == deviceIndex;
  });
}

}  // namespace

std::uint32_t MnlRdmaNetlink::nextSeq() {
  // Start from the time, like iproute2's rd_prepare_msg, so that two processes' requests are
  // unlikely to look alike in a trace.
  if (seq_ == 0) {
    seq_ = static_cast<std::uint32_t>(std::time(nullptr));
  }
  return ++seq_;
}

os::SysResult<NetnsMode> MnlRdmaNetlink::netnsMode(const os::Netns& ns) {
  const std::string op = "read the RDMA netns mode (RDMA_NLDEV_CMD_SYS_GET)" + inNs(ns);
  auto sk = RdmaSocket::openIn(ns);
  if (!sk) {
    return std::unexpected(sk.error());
  }
  const std::uint32_t seq = nextSeq();
  auto answer = sk->request(wire::buildSysGet(seq), seq);
  if (!answer) {
    return withOp(answer.error(), op);
  }
  if (answer->messages.empty()) {
    return os::sysFail(EPROTO, op + ": the kernel sent no reply before its ACK");
  }
  auto mode = wire::parseSysGet(answer->messages.front());
  if (!mode) {
    return withOp(mode.error(), op);
  }
  return *mode;
}

os::SysResult<std::vector<Port>> MnlRdmaNetlink::ports(const os::Netns& ns) {
  const std::string op = "list RDMA ports" + inNs(ns);
  auto sk = RdmaSocket::openIn(ns);
  if (!sk) {
    if (sk.error().err == EPROTONOSUPPORT) {
      return std::vector<Port>{};  // no RDMA netlink, so no RDMA device either
    }
    return std::unexpected(sk.error());
  }
  os::SysError last{EAGAIN, op + ": the dump was interrupted " + std::to_string(kDumpAttempts) +
                                " times (NLM_F_DUMP_INTR)", {}};
  for (int attempt = 0; attempt < kDumpAttempts; ++attempt) {
    std::uint32_t seq = nextSeq();
    auto devAnswer = sk->request(wire::buildDevDump(seq), seq);
    if (!devAnswer) {
      return withOp(devAnswer.error(), op + " (RDMA_NLDEV_CMD_GET dump)");
    }
    if (devAnswer->interrupted) {
      continue;
    }
    std::vector<Port> out;
    bool restart = false;
    for (const auto& message : devAnswer->messages) {
      auto dev = wire::parseDevice(message);
      if (!dev) {
        return withOp(dev.error(), op);
      }
      seq = nextSeq();
      auto portAnswer = sk->request(wire::buildPortDump(seq, dev->index), seq);
      const std::string portOp = op + " (RDMA_NLDEV_CMD_PORT_GET dump of " + dev->name + ", index " +
                                 std::to_string(dev->index) + ")";
      if (!portAnswer) {
        // The kernel answers EINVAL for a device index it does not know (nldev_port_get_dumpit):
        // the device went away after the device dump. Start again.
        if (portAnswer.error().err == EINVAL || portAnswer.error().err == ENODEV) {
          last = withOp(portAnswer.error(), portOp).error();
          restart = true;
          break;
        }
        return withOp(portAnswer.error(), portOp);
      }
      if (portAnswer->interrupted) {
        restart = true;
        break;
      }
      for (const auto& portMessage : portAnswer->messages) {
        auto port = wire::parsePort(portMessage);
        if (!port) {
          return withOp(port.error(), portOp);
        }
        out.push_back(std::move(*port));
      }
    }
    if (!restart) {
      return out;
    }
  }
  return std::unexpected(std::move(last));
}

os::SysResult<void> MnlRdmaNetlink::moveDevice(const os::Netns& from, std::uint32_t deviceIndex,
                                               const os::Netns& to) {
  std::string op = "move RDMA device index " + std::to_string(deviceIndex) + " from netns " + from.path() +
                   " into netns " + to.path() + " (RDMA_NLDEV_CMD_SET)";
  if (to.fd() < 0) {
    return os::sysFail(EBADF, op + ": the target netns handle has no fd");
  }
  auto sk = RdmaSocket::openIn(from);
  if (!sk) {
    return std::unexpected(sk.error());
  }
  const std::uint32_t seq = nextSeq();
  auto answer = sk->request(wire::buildSetNetns(seq, deviceIndex, static_cast<std::uint32_t>(to.fd())), seq);
  if (!answer) {
    // nldev_set_doit answers EINVAL, not ENODEV, for a device index the socket's netns does not
    // see (ib_device_get_by_index fails), and EINVAL for a malformed request too: tell them apart.
    if (answer.error().err == EINVAL && answer.error().extAck.empty() && !visible(*sk, deviceIndex, nextSeq())) {
      return os::sysFail(ENODEV, op + ": no RDMA device with that index is visible there");
    }
    if (answer.error().err == EOPNOTSUPP && answer.error().extAck.empty()) {
      // ib_device_set_netns_put refuses without a message in both cases.
      op += " (the kernel moves RDMA devices only in exclusive netns mode, and only those whose "
            "driver can disassociate user contexts, e.g. mlx5 but not rxe)";
    }
    return withOp(answer.error(), op);
  }
  return {};
}

}  // namespace ibcni::rdma
