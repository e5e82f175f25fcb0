// SPDX-License-Identifier: Apache-2.0
// The rtnetlink machinery under LibnlNetlink: one NETLINK_ROUTE socket per network namespace,
// request/answer exchanges read through libnl's callbacks, dumps retried on NLM_F_DUMP_INTR, and
// libnl's and the kernel's errors (with the extended-ACK text) turned into os::SysError.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/object.h>

#include "ibcni/os/netns.h"
#include "ibcni/os/sys_error.h"
#include "plugin/netlink/libnl_handles.h"

namespace ibcni::nl {

/// A failure inside libnl itself: its NLE_* code `nle` as an errno, libnl's text added to `op`.
std::unexpected<os::SysError> libnlFail(int nle, const std::string& op);

/// A dump request of `type` with its family header `hdr` (ifaddrmsg, rtmsg, fib_rule_hdr); null when
/// out of memory.
template <class Header>
NlMsgPtr dumpRequest(int type, Header hdr) {
  NlMsgPtr msg(nlmsg_alloc_simple(type, NLM_F_DUMP));
  if (msg && nlmsg_append(msg.get(), &hdr, sizeof hdr, NLMSG_ALIGNTO) < 0) {
    msg.reset();
  }
  return msg;
}

/// " in netns PATH": how an operation's description names its namespace.
std::string inNs(const os::Netns& ns);
/// "link INDEX": how an operation's description names its link.
std::string linkRef(int index);

// State of one request/answer exchange, shared with the libnl callbacks in libnl_socket.cpp.
struct Exchange {
  std::uint32_t seq = 0;
  bool done = false;         // ACK, error or NLMSG_DONE seen
  bool interrupted = false;  // a dump part carried NLM_F_DUMP_INTR
  int err = 0;               // positive errno reported by the kernel
  std::string extAck;
  int parseErr = 0;  // first libnl parse failure (an NLE_* code)
  const char* wantType = nullptr;
  std::function<void(nl_object*)> onObject;
  // Sees each message of the answer before libnl parses it into objects (for what libnl's
  // objects leave out).
  std::function<void(nl_msg*)> onMessage;
};

/// One NETLINK_ROUTE socket that was created inside a given network namespace.
class RtnlSocket {
 public:
  /// Enters `ns`, creates and binds the socket, and returns to the caller's namespace.
  static os::SysResult<std::unique_ptr<RtnlSocket>> openIn(const os::Netns& ns);

  /// Sends `msg` and reads the answer up to its ACK, error or NLMSG_DONE. Objects of type
  /// `ex.wantType` found in the answer go to `ex.onObject`.
  os::SysResult<void> request(nl_msg* msg, Exchange& ex, const std::string& op);

 private:
  explicit RtnlSocket(NlSockPtr sk) : sk_(std::move(sk)) {}
  NlSockPtr sk_;
};

/// The sockets of one LibnlNetlink: one per network namespace, opened on first use and kept
/// until closeAll().
class RtnlSockets {
 public:
  /// The socket of `ns`, opened on first use.
  os::SysResult<RtnlSocket*> socketFor(const os::Netns& ns);

  /// Runs one request that expects no data back.
  os::SysResult<void> simple(const os::Netns& ns, nl_msg* msg, const std::string& op);

  /// Runs a dump, retrying when the kernel says it was interrupted. `build` makes a fresh
  /// request; `reset` forgets what an interrupted attempt collected.
  os::SysResult<void> dump(const os::Netns& ns, const std::function<NlMsgPtr()>& build,
                           const char* wantType, const std::function<void(nl_object*)>& collect,
                           const std::function<void()>& reset, const std::string& op);

  /// Sends a request built elsewhere (libmnl) on `ns`'s libnl socket, which fills in seq and port
  /// id and reads the ACK or the error with its ext-ack text.
  os::SysResult<void> sendBytes(const os::Netns& ns, std::vector<std::uint8_t> bytes,
                                const std::string& op);

  /// Closes every socket, releasing the namespaces they kept alive.
  void closeAll() noexcept { sockets_.clear(); }

 private:
  // Keyed by the namespace file's (st_dev, st_ino): the identity of the namespace itself,
  // whichever path or fd names it.
  std::map<std::pair<dev_t, ino_t>, std::unique_ptr<RtnlSocket>> sockets_;
};

}  // namespace ibcni::nl
