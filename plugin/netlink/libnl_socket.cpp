// SPDX-License-Identifier: Apache-2.0
#include "plugin/netlink/libnl_socket.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <linux/netlink.h>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <utility>

#include <netlink/errno.h>
#include <netlink/handlers.h>
#include <netlink/msg.h>
#include <netlink/socket.h>

namespace ibcni::nl {

namespace {

// A dump that the kernel marks NLM_F_DUMP_INTR is retried this many times before giving up.
constexpr int kDumpRetries = 5;
// No rtnetlink request should take long; a reply that never comes must not hang the plugin.
constexpr time_t kReceiveTimeoutSeconds = 30;

// libnl folds kernel errnos into NLE_* codes. Kernel errors never go through here (the error
// callback keeps the kernel's errno); this covers failures inside libnl itself.
int nleToErrno(int nle) {
  switch (std::abs(nle)) {
    case NLE_SUCCESS:
      return 0;
    case NLE_INTR:
      return EINTR;
    case NLE_BAD_SOCK:
      return EBADF;
    case NLE_AGAIN:
    case NLE_DUMP_INTR:
      return EAGAIN;
    case NLE_NOMEM:
      return ENOMEM;
    case NLE_EXIST:
      return EEXIST;
    case NLE_INVAL:
    case NLE_MISSING_ATTR:
    case NLE_AF_MISMATCH:
    case NLE_OBJ_MISMATCH:
    case NLE_IMMUTABLE:
    case NLE_ATTRSIZE:
      return EINVAL;
    case NLE_RANGE:
      return ERANGE;
    case NLE_MSGSIZE:
    case NLE_MSG_TRUNC:
      return EMSGSIZE;
    case NLE_OPNOTSUPP:
    case NLE_SRCRT_NOSUPPORT:
    case NLE_MSGTYPE_NOSUPPORT:
      return EOPNOTSUPP;
    case NLE_AF_NOSUPPORT:
      return EAFNOSUPPORT;
    case NLE_OBJ_NOTFOUND:
    case NLE_NOCACHE:
    case NLE_PKTLOC_FILE:
      return ENOENT;
    case NLE_NOATTR:
      return ENODATA;
    case NLE_SEQ_MISMATCH:
    case NLE_MSG_TOOSHORT:
    case NLE_PARSE_ERR:
      return EPROTO;
    case NLE_MSG_OVERFLOW:
      return ENOBUFS;
    case NLE_NOADDR:
      return EADDRNOTAVAIL;
    case NLE_BUSY:
      return EBUSY;
    case NLE_PROTO_MISMATCH:
      return EPROTONOSUPPORT;
    case NLE_NOACCESS:
      return EACCES;
    case NLE_PERM:
      return EPERM;
    case NLE_NODEV:
      return ENODEV;
    default:
      return EIO;
  }
}

// The text of NLMSGERR_ATTR_MSG in an NLMSG_ERROR or NLMSG_DONE message, or "" when the kernel
// sent none. The TLVs follow `fixedLen` bytes of payload (see Documentation/userspace-api/
// netlink/intro.rst, "Extended ACK"); they are present only when NLM_F_ACK_TLVS is set.
std::string extAckMessage(const nlmsghdr* hdr, std::size_t fixedLen) {
  if ((hdr->nlmsg_flags & NLM_F_ACK_TLVS) == 0 || hdr->nlmsg_len < NLMSG_HDRLEN) {
    return {};
  }
  const auto* payload = reinterpret_cast<const unsigned char*>(hdr) + NLMSG_HDRLEN;
  const std::size_t payloadLen = hdr->nlmsg_len - NLMSG_HDRLEN;
  std::size_t off = NLMSG_ALIGN(fixedLen);
  while (off + NLA_HDRLEN <= payloadLen) {
    nlattr attr{};
    std::memcpy(&attr, payload + off, sizeof attr);
    if (attr.nla_len < NLA_HDRLEN || off + attr.nla_len > payloadLen) {
      break;
    }
    if ((attr.nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG) {
      std::string text(reinterpret_cast<const char*>(payload + off + NLA_HDRLEN),
                       attr.nla_len - NLA_HDRLEN);
      while (!text.empty() && text.back() == '\0') {
        text.pop_back();
      }
      return text;
    }
    off += NLA_ALIGN(attr.nla_len);
  }
  return {};
}

// Answers to an earlier request that was abandoned (after a timeout) may still be queued on a
// cached socket; they are dropped instead of being taken as the answer to this one.
int onSeqCheck(nl_msg* msg, void* arg) {
  const auto* ex = static_cast<Exchange*>(arg);
  return nlmsg_hdr(msg)->nlmsg_seq == ex->seq ? NL_OK : NL_SKIP;
}

void onParsed(nl_object* obj, void* arg) {
  auto* ex = static_cast<Exchange*>(arg);
  if (ex->onObject && ex->wantType != nullptr &&
      std::strcmp(nl_object_get_type(obj), ex->wantType) == 0) {
    ex->onObject(obj);
  }
}

int onValid(nl_msg* msg, void* arg) {
  auto* ex = static_cast<Exchange*>(arg);
  if (ex->onMessage) {
    ex->onMessage(msg);
  }
  if (!ex->onObject) {
    return NL_OK;
  }
  int rc = nl_msg_parse(msg, &onParsed, ex);
  if (rc < 0 && ex->parseErr == 0) {
    ex->parseErr = rc;
  }
  // Keep reading to the end of the answer either way, so the socket stays in step.
  return NL_OK;
}

int onDumpIntr(nl_msg* /*msg*/, void* arg) {
  static_cast<Exchange*>(arg)->interrupted = true;
  return NL_OK;
}

int onAck(nl_msg* /*msg*/, void* arg) {
  static_cast<Exchange*>(arg)->done = true;
  return NL_STOP;
}

// NLMSG_DONE ends a dump. Its payload is an int: 0, or a negative errno when the dump failed
// part-way, then followed by ext-ack TLVs.
int onFinish(nl_msg* msg, void* arg) {
  auto* ex = static_cast<Exchange*>(arg);
  const nlmsghdr* hdr = nlmsg_hdr(msg);
  if (hdr->nlmsg_len >= NLMSG_HDRLEN + sizeof(int)) {
    int status = 0;
    std::memcpy(&status, reinterpret_cast<const unsigned char*>(hdr) + NLMSG_HDRLEN, sizeof status);
    if (status < 0) {
      ex->err = -status;
      ex->extAck = extAckMessage(hdr, sizeof(int));
    }
  }
  ex->done = true;
  return NL_STOP;
}

int onError(sockaddr_nl* /*nla*/, nlmsgerr* e, void* arg) {
  auto* ex = static_cast<Exchange*>(arg);
  // libnl hands over nlmsg_data(hdr); step back to the header for its flags and length.
  const auto* hdr =
      reinterpret_cast<const nlmsghdr*>(reinterpret_cast<const unsigned char*>(e) - NLMSG_HDRLEN);
  // Netlink subsystems are not consistent about the sign (iproute2 lib/mnl_utils.c).
  ex->err = std::abs(e->error);
  std::size_t fixed = sizeof(nlmsgerr);
  if ((hdr->nlmsg_flags & NLM_F_CAPPED) == 0 && e->msg.nlmsg_len >= NLMSG_HDRLEN) {
    fixed += e->msg.nlmsg_len - NLMSG_HDRLEN;  // the whole request was echoed back
  }
  ex->extAck = extAckMessage(hdr, fixed);
  ex->done = true;
  return NL_STOP;
}

}  // namespace

std::unexpected<os::SysError> libnlFail(int nle, const std::string& op) {
  return os::sysFail(nleToErrno(nle), op + " (libnl: " + nl_geterror(nle) + ")");
}

std::string inNs(const os::Netns& ns) { return " in netns " + ns.path(); }

std::string linkRef(int index) { return "link " + std::to_string(index); }

os::SysResult<std::unique_ptr<RtnlSocket>> RtnlSocket::openIn(const os::Netns& ns) {
  const std::string op = "open rtnetlink socket" + inNs(ns);
  NlSockPtr sk(nl_socket_alloc());
  if (!sk) {
    return os::sysFail(ENOMEM, op);
  }
  {
    // A netlink socket belongs to the namespace it was created in, whatever thread uses it
    // later, so the guard is held only around nl_connect (socket + bind).
    auto guard = os::NetnsGuard::enter(ns);
    if (!guard) {
      return std::unexpected(guard.error());
    }
    if (int rc = nl_connect(sk.get(), NETLINK_ROUTE); rc < 0) {
      return libnlFail(rc, op);
    }
  }
  const int fd = nl_socket_get_fd(sk.get());
  // libnl 3.7 passes SOCK_CLOEXEC to socket(); make sure of it for older builds.
  const int fdFlags = ::fcntl(fd, F_GETFD);
  if (fdFlags < 0 ||
      ((fdFlags & FD_CLOEXEC) == 0 && ::fcntl(fd, F_SETFD, fdFlags | FD_CLOEXEC) < 0)) {
    return os::sysFail(errno, op + ": set FD_CLOEXEC");
  }
  const int one = 1;
  // Extended ACK brings the kernel's error strings; CAP_ACK keeps error replies short. Both
  // exist since Linux 4.12 / 4.3; on older kernels we simply get no text.
  (void)::setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
  (void)::setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);
  const timeval timeout{kReceiveTimeoutSeconds, 0};
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) != 0) {
    return os::sysFail(errno, op + ": set SO_RCVTIMEO");
  }
  // Peek at each datagram's size first so that large link dumps are never truncated.
  nl_socket_enable_msg_peek(sk.get());
  return std::unique_ptr<RtnlSocket>(new RtnlSocket(std::move(sk)));
}

os::SysResult<void> RtnlSocket::request(nl_msg* msg, Exchange& ex, const std::string& op) {
  nl_complete_msg(sk_.get(), msg);  // port id, sequence number, NLM_F_REQUEST | NLM_F_ACK
  ex.seq = nlmsg_hdr(msg)->nlmsg_seq;
  if (int rc = nl_send(sk_.get(), msg); rc < 0) {
    return libnlFail(rc, op);
  }
  NlCbPtr cb(nl_cb_alloc(NL_CB_DEFAULT));
  if (!cb) {
    return os::sysFail(ENOMEM, op);
  }
  nl_cb_set(cb.get(), NL_CB_SEQ_CHECK, NL_CB_CUSTOM, &onSeqCheck, &ex);
  nl_cb_set(cb.get(), NL_CB_VALID, NL_CB_CUSTOM, &onValid, &ex);
  nl_cb_set(cb.get(), NL_CB_DUMP_INTR, NL_CB_CUSTOM, &onDumpIntr, &ex);
  nl_cb_set(cb.get(), NL_CB_ACK, NL_CB_CUSTOM, &onAck, &ex);
  nl_cb_set(cb.get(), NL_CB_FINISH, NL_CB_CUSTOM, &onFinish, &ex);
  nl_cb_err(cb.get(), NL_CB_CUSTOM, &onError, &ex);
  // nl_recvmsgs returns after each datagram that is not part of a multipart answer (a
  // single RTM_NEWLINK reply comes before its ACK), so read until the exchange is complete.
  while (!ex.done) {
    int rc = nl_recvmsgs_report(sk_.get(), cb.get());
    if (ex.done) {
      break;
    }
    if (rc < 0) {
      return libnlFail(rc, op);
    }
    if (rc == 0) {
      return os::sysFail(EIO, op + ": rtnetlink socket returned no data");
    }
  }
  if (ex.err != 0) {
    return os::sysFail(ex.err, op, ex.extAck);
  }
  if (ex.parseErr != 0) {
    return libnlFail(ex.parseErr, op + ": cannot parse the kernel's answer");
  }
  return {};
}

os::SysResult<RtnlSocket*> RtnlSockets::socketFor(const os::Netns& ns) {
  if (ns.fd() < 0) {
    return os::sysFail(EBADF, "open rtnetlink socket" + inNs(ns) + ": the handle has no fd");
  }
  struct stat st {};
  if (::fstat(ns.fd(), &st) != 0) {
    return os::sysFail(errno, "stat netns " + ns.path());
  }
  auto key = std::make_pair(st.st_dev, st.st_ino);
  if (auto it = sockets_.find(key); it != sockets_.end()) {
    return it->second.get();
  }
  auto sock = RtnlSocket::openIn(ns);
  if (!sock) {
    return std::unexpected(sock.error());
  }
  RtnlSocket* raw = sock->get();
  sockets_.emplace(key, std::move(*sock));
  return raw;
}

os::SysResult<void> RtnlSockets::simple(const os::Netns& ns, nl_msg* msg, const std::string& op) {
  auto sock = socketFor(ns);
  if (!sock) {
    return std::unexpected(sock.error());
  }
  Exchange ex;
  return (*sock)->request(msg, ex, op);
}

os::SysResult<void> RtnlSockets::dump(const os::Netns& ns, const std::function<NlMsgPtr()>& build,
                                      const char* wantType,
                                      const std::function<void(nl_object*)>& collect,
                                      const std::function<void()>& reset, const std::string& op) {
  auto sock = socketFor(ns);
  if (!sock) {
    return std::unexpected(sock.error());
  }
  for (int attempt = 0;; ++attempt) {
    NlMsgPtr msg = build();
    if (!msg) {
      return os::sysFail(ENOMEM, op);
    }
    reset();
    Exchange ex;
    ex.wantType = wantType;
    ex.onObject = collect;
    auto res = (*sock)->request(msg.get(), ex, op);
    if (!res || !ex.interrupted) {
      return res;
    }
    if (attempt == kDumpRetries) {
      return os::sysFail(EAGAIN, op + ": dump interrupted by concurrent changes " +
                                     std::to_string(kDumpRetries + 1) + " times");
    }
  }
}

os::SysResult<void> RtnlSockets::sendBytes(const os::Netns& ns, std::vector<std::uint8_t> bytes,
                                           const std::string& op) {
  if (bytes.size() < NLMSG_HDRLEN) {
    return os::sysFail(ENOMEM, op + ": cannot build the request");
  }
  NlMsgPtr msg(nlmsg_convert(reinterpret_cast<nlmsghdr*>(bytes.data())));
  if (!msg) {
    return os::sysFail(ENOMEM, op);
  }
  return simple(ns, msg.get(), op);
}

}  // namespace ibcni::nl
