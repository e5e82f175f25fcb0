// SPDX-License-Identifier: Apache-2.0
#include "netlink/libnl_netlink.h"
#include "netlink/libnl_handles.h"

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <map>
#include <optional>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <utility>
#include <vector>

#include <netlink/addr.h>
#include <netlink/attr.h>
#include <netlink/errno.h>
#include <netlink/handlers.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/object.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <netlink/socket.h>

#include "netlink/ipoib_messages.h"
#include "netlink/vf_messages.h"

namespace ibcni::nl {

namespace {

// A dump that the kernel marks NLM_F_DUMP_INTR is retried this many times before giving up.
constexpr int kDumpRetries = 5;
// No rtnetlink request should take long; a reply that never comes must not hang the plugin.
constexpr time_t kReceiveTimeoutSeconds = 30;

// The owning handles of libnl objects are in libnl_handles.h.

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

std::unexpected<os::SysError> libnlFail(int nle, const std::string& op) {
  return os::sysFail(nleToErrno(nle), op + " (libnl: " + nl_geterror(nle) + ")");
}

std::string inNs(const os::Netns& ns) { return " in netns " + ns.path(); }

std::string linkRef(int index) { return "link " + std::to_string(index); }


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

// State of one request/answer exchange, shared with the libnl callbacks below.
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

std::optional<net::IpAddress> ipFromNlAddr(const nl_addr* a) {
  if (a == nullptr) {
    return std::nullopt;
  }
  int family = nl_addr_get_family(a);
  if (family != AF_INET && family != AF_INET6) {
    return std::nullopt;
  }
  net::IpAddress ip;
  ip.family = family;
  const unsigned len = nl_addr_get_len(a);
  if (len == 0) {
    return ip;  // libnl's stand-in for a missing RTA_DST: the default route
  }
  if (len != ip.size()) {
    return std::nullopt;
  }
  std::memcpy(ip.bytes.data(), nl_addr_get_binary_addr(a), len);
  return ip;
}

NlAddrPtr nlAddrFromIp(const net::IpAddress& ip, int prefixLen) {
  NlAddrPtr a(nl_addr_build(ip.family, ip.bytes.data(), ip.size()));
  if (a) {
    nl_addr_set_prefixlen(a.get(), prefixLen);
  }
  return a;
}

std::optional<std::vector<std::uint8_t>> macBytes(const net::HwAddress& mac) {
  auto parsed = net::HwAddress::parse(mac.text);  // canonical "xx:xx:...": 3 chars per octet
  if (!parsed || parsed->length == 0) {
    return std::nullopt;
  }
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < parsed->text.size(); i += 3) {
    out.push_back(
        static_cast<std::uint8_t>(nibble(parsed->text[i]) * 16 + nibble(parsed->text[i + 1])));
  }
  return out;
}

Link linkFrom(rtnl_link* l) {
  Link link;
  link.index = rtnl_link_get_ifindex(l);
  if (const char* name = rtnl_link_get_name(l); name != nullptr) {
    link.name = name;
  }
  if (const char* alias = rtnl_link_get_ifalias(l); alias != nullptr) {
    link.alias = alias;
  }
  link.mtu = rtnl_link_get_mtu(l);
  link.adminUp = (rtnl_link_get_flags(l) & IFF_UP) != 0;
  if (const nl_addr* a = rtnl_link_get_addr(l); a != nullptr && nl_addr_get_len(a) > 0) {
    link.mac = net::HwAddress::fromBytes(
        static_cast<const std::uint8_t*>(nl_addr_get_binary_addr(a)), nl_addr_get_len(a));
  }
  link.arpType = static_cast<std::uint16_t>(rtnl_link_get_arptype(l));
  if (const char* kind = rtnl_link_get_type(l); kind != nullptr) {
    link.kind = kind;
  }
  return link;
}

// The attributes of an RTM_NEWLINK message, indexed by type (IFLA_*). libnl 3.7's link object
// keeps neither IFLA_MAX_MTU nor the VFs' IB GUIDs, so those are read from the message itself.
// @return false when `msg` is not a well-formed RTM_NEWLINK.
bool linkAttributes(nl_msg* msg, std::array<nlattr*, IFLA_MAX + 1>& tb) {
  nlmsghdr* hdr = nlmsg_hdr(msg);
  if (hdr->nlmsg_type != RTM_NEWLINK) {
    return false;
  }
  return nlmsg_parse(hdr, sizeof(ifinfomsg), tb.data(), IFLA_MAX, nullptr) == 0;
}

// The IPoIB settings in IFLA_LINKINFO when its IFLA_INFO_KIND is "ipoib" (libnl has no ipoib
// kind, so its link object keeps none of them). Attributes the kernel left out keep the defaults
// of IpoibInfo; nullopt for other kinds or no IFLA_LINKINFO.
std::optional<IpoibInfo> ipoibFrom(nlattr* linkinfo) {
  if (linkinfo == nullptr) {
    return std::nullopt;
  }
  std::array<nlattr*, IFLA_INFO_MAX + 1> info{};
  if (nla_parse_nested(info.data(), IFLA_INFO_MAX, linkinfo, nullptr) < 0 ||
      info[IFLA_INFO_KIND] == nullptr) {
    return std::nullopt;
  }
  const auto* kind = static_cast<const char*>(nla_data(info[IFLA_INFO_KIND]));
  const int kindLen = nla_len(info[IFLA_INFO_KIND]);
  if (std::string(kind, ::strnlen(kind, static_cast<std::size_t>(kindLen))) != "ipoib") {
    return std::nullopt;
  }
  IpoibInfo out;
  std::array<nlattr*, IFLA_IPOIB_MAX + 1> data{};
  if (info[IFLA_INFO_DATA] == nullptr ||
      nla_parse_nested(data.data(), IFLA_IPOIB_MAX, info[IFLA_INFO_DATA], nullptr) < 0) {
    return out;
  }
  auto u16 = [&data](int type) -> std::optional<std::uint16_t> {
    if (data[static_cast<std::size_t>(type)] == nullptr ||
        nla_len(data[static_cast<std::size_t>(type)]) < 2) {
      return std::nullopt;
    }
    return nla_get_u16(data[static_cast<std::size_t>(type)]);
  };
  out.pkey = u16(IFLA_IPOIB_PKEY).value_or(0);
  out.mode = u16(IFLA_IPOIB_MODE).value_or(IPOIB_MODE_DATAGRAM) == IPOIB_MODE_CONNECTED
                 ? IpoibMode::kConnected
                 : IpoibMode::kDatagram;
  out.umcast = u16(IFLA_IPOIB_UMCAST).value_or(0) != 0;
  return out;
}

// Copies the fixed-size payload of `a` into `out` when it is at least that long.
template <class T>
bool attrStruct(const nlattr* a, T* out) {
  if (a == nullptr || nla_len(a) < static_cast<int>(sizeof(T))) {
    return false;
  }
  std::memcpy(out, nla_data(a), sizeof(T));
  return true;
}

// One IFLA_VF_INFO. The VF number comes from any of its per-VF structs (the kernel puts it in
// each; IFLA_VF_MAC is always there), else from the entry's position in the list.
VfInfo vfFrom(nlattr* info, std::uint32_t position) {
  std::array<nlattr*, IFLA_VF_MAX + 1> t{};
  VfInfo vf;
  vf.vf = position;
  if (nla_parse_nested(t.data(), IFLA_VF_MAX, info, nullptr) < 0) {
    return vf;
  }
  ifla_vf_mac mac{};
  ifla_vf_link_state state{};
  ifla_vf_guid node{};
  ifla_vf_guid port{};
  const bool hasMac = attrStruct(t[IFLA_VF_MAC], &mac);
  const bool hasState = attrStruct(t[IFLA_VF_LINK_STATE], &state);
  const bool hasNode = attrStruct(t[IFLA_VF_IB_NODE_GUID], &node);
  const bool hasPort = attrStruct(t[IFLA_VF_IB_PORT_GUID], &port);
  if (hasMac) {
    vf.vf = mac.vf;
  } else if (hasState) {
    vf.vf = state.vf;
  } else if (hasNode) {
    vf.vf = node.vf;
  }
  if (hasState && state.link_state <= static_cast<std::uint32_t>(VfLinkState::kDisable)) {
    vf.linkState = static_cast<VfLinkState>(state.link_state);
  }
  if (hasNode) {
    vf.nodeGuid = net::Guid{node.guid};
  }
  if (hasPort) {
    vf.portGuid = net::Guid{port.guid};
  }
  return vf;
}

// The VFs in IFLA_VFINFO_LIST (none when the attribute is missing).
std::vector<VfInfo> vfsFrom(nlattr* list) {
  std::vector<VfInfo> out;
  if (list == nullptr) {
    return out;
  }
  nlattr* info = nullptr;
  int rem = 0;
  nla_for_each_nested(info, list, rem) {
    if (nla_type(info) == IFLA_VF_INFO) {
      out.push_back(vfFrom(info, static_cast<std::uint32_t>(out.size())));
    }
  }
  return out;
}

// Fills the parts of a Route shared by all next hops of `r`; nullopt for non-unicast routes
// and families other than IPv4/IPv6.
std::optional<Route> routeBase(rtnl_route* r) {
  if (rtnl_route_get_type(r) != RTN_UNICAST) {
    return std::nullopt;
  }
  const int family = rtnl_route_get_family(r);
  if (family != AF_INET && family != AF_INET6) {
    return std::nullopt;
  }
  const nl_addr* dst = rtnl_route_get_dst(r);
  Route route;
  if (dst == nullptr) {
    route.dst.address.family = family;
  } else {
    auto ip = ipFromNlAddr(dst);
    if (!ip) {
      return std::nullopt;
    }
    route.dst.address = *ip;
    route.dst.prefixLen = static_cast<int>(nl_addr_get_prefixlen(dst));
  }
  route.table = rtnl_route_get_table(r);
  route.scope = rtnl_route_get_scope(r);
  if (std::uint32_t prio = rtnl_route_get_priority(r); prio != 0) {
    route.priority = prio;
  }
  std::uint32_t value = 0;
  if (rtnl_route_get_metric(r, RTAX_MTU, &value) == 0) {
    route.mtu = value;
  }
  if (rtnl_route_get_metric(r, RTAX_ADVMSS, &value) == 0) {
    route.advmss = value;
  }
  return route;
}

/// One NETLINK_ROUTE socket that was created inside a given network namespace.
class RtnlSocket {
 public:
  /// Enters `ns`, creates and binds the socket, and returns to the caller's namespace.
  static os::SysResult<std::unique_ptr<RtnlSocket>> openIn(const os::Netns& ns) {
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

  /// Sends `msg` and reads the answer up to its ACK, error or NLMSG_DONE. Objects of type
  /// `ex.wantType` found in the answer go to `ex.onObject`.
  os::SysResult<void> request(nl_msg* msg, Exchange& ex, const std::string& op) {
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

 private:
  explicit RtnlSocket(NlSockPtr sk) : sk_(std::move(sk)) {}
  NlSockPtr sk_;
};

}  // namespace

struct LibnlNetlink::Impl {
  // Keyed by the namespace file's (st_dev, st_ino): the identity of the namespace itself,
  // whichever path or fd names it.
  std::map<std::pair<dev_t, ino_t>, std::unique_ptr<RtnlSocket>> sockets;

  os::SysResult<RtnlSocket*> socketFor(const os::Netns& ns) {
    if (ns.fd() < 0) {
      return os::sysFail(EBADF, "open rtnetlink socket" + inNs(ns) + ": the handle has no fd");
    }
    struct stat st {};
    if (::fstat(ns.fd(), &st) != 0) {
      return os::sysFail(errno, "stat netns " + ns.path());
    }
    auto key = std::make_pair(st.st_dev, st.st_ino);
    if (auto it = sockets.find(key); it != sockets.end()) {
      return it->second.get();
    }
    auto sock = RtnlSocket::openIn(ns);
    if (!sock) {
      return std::unexpected(sock.error());
    }
    RtnlSocket* raw = sock->get();
    sockets.emplace(key, std::move(*sock));
    return raw;
  }

  /// Runs one request that expects no data back.
  os::SysResult<void> simple(const os::Netns& ns, nl_msg* msg, const std::string& op) {
    auto sock = socketFor(ns);
    if (!sock) {
      return std::unexpected(sock.error());
    }
    Exchange ex;
    return (*sock)->request(msg, ex, op);
  }

  /// Runs a dump, retrying when the kernel says it was interrupted. `build` makes a fresh
  /// request; `reset` forgets what an interrupted attempt collected.
  os::SysResult<void> dump(const os::Netns& ns, const std::function<NlMsgPtr()>& build,
                           const char* wantType, const std::function<void(nl_object*)>& collect,
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

  /// RTM_NEWLINK on an existing link: applies what is set in `changes` to link `index`.
  os::SysResult<void> changeLink(const os::Netns& ns, int index, rtnl_link* changes,
                                 const std::string& op,
                                 const std::function<int(nl_msg*)>& extra = {}) {
    if (index <= 0) {
      // Without an index the kernel would pick the link by IFLA_IFNAME (the *new* name).
      return os::sysFail(ENODEV, op + ": no such link index");
    }
    RtnlLinkPtr orig(rtnl_link_alloc());
    if (!orig) {
      return os::sysFail(ENOMEM, op);
    }
    rtnl_link_set_ifindex(orig.get(), index);
    nl_msg* raw = nullptr;
    int rc = rtnl_link_build_change_request(orig.get(), changes, 0, &raw);
    NlMsgPtr msg(raw);
    if (rc < 0) {
      return libnlFail(rc, op);
    }
    if (extra) {
      if (rc = extra(msg.get()); rc < 0) {
        return libnlFail(rc, op);
      }
    }
    return simple(ns, msg.get(), op);
  }

  /// RTM_GETLINK by index or name, with RTEXT_FILTER_VF so that a PF lists its VFs.
  /// `attrs`, when given, also sees the raw attributes of the answer.
  os::SysResult<Link> getLink(const os::Netns& ns, int index, const std::string& name,
                              const std::string& op,
                              const std::function<void(std::array<nlattr*, IFLA_MAX + 1>&)>&
                                  attrs = {}) {
    auto sock = socketFor(ns);
    if (!sock) {
      return std::unexpected(sock.error());
    }
    nl_msg* raw = nullptr;
    int rc = rtnl_link_build_get_request(index, name.empty() ? nullptr : name.c_str(), &raw);
    NlMsgPtr msg(raw);
    if (rc < 0) {
      return libnlFail(rc, op);
    }
    // libnl 3.7 asks for the VFs itself (IFLA_EXT_MASK = RTEXT_FILTER_VF); older ones do not.
    if (nlmsg_find_attr(nlmsg_hdr(msg.get()), sizeof(ifinfomsg), IFLA_EXT_MASK) == nullptr) {
      if (rc = nla_put_u32(msg.get(), IFLA_EXT_MASK, RTEXT_FILTER_VF); rc < 0) {
        return libnlFail(rc, op);
      }
    }
    std::optional<Link> found;
    std::uint32_t maxMtu = 0;
    std::uint32_t iflink = 0;
    std::optional<IpoibInfo> ipoib;
    Exchange ex;
    ex.wantType = "route/link";
    // onMessage runs on each message before libnl turns it into the object onObject gets.
    ex.onMessage = [&maxMtu, &iflink, &ipoib, &attrs](nl_msg* m) {
      std::array<nlattr*, IFLA_MAX + 1> tb{};
      if (!linkAttributes(m, tb)) {
        return;
      }
      maxMtu = tb[IFLA_MAX_MTU] != nullptr && nla_len(tb[IFLA_MAX_MTU]) >= 4
                   ? nla_get_u32(tb[IFLA_MAX_MTU])
                   : 0;
      iflink = tb[IFLA_LINK] != nullptr && nla_len(tb[IFLA_LINK]) >= 4 ? nla_get_u32(tb[IFLA_LINK])
                                                                       : 0;
      ipoib = ipoibFrom(tb[IFLA_LINKINFO]);
      if (attrs) {
        attrs(tb);
      }
    };
    ex.onObject = [&found, &maxMtu, &iflink, &ipoib](nl_object* obj) {
      found = linkFrom(reinterpret_cast<rtnl_link*>(obj));
      found->maxMtu = maxMtu;
      // The kernel sends IFLA_LINK whenever it differs from the link's own index.
      const int parent = static_cast<int>(iflink);
      found->parentIndex = parent > 0 && parent != found->index ? parent : 0;
      found->ipoib = ipoib;
    };
    auto res = (*sock)->request(msg.get(), ex, op);
    if (!res) {
      return std::unexpected(res.error());
    }
    if (!found) {
      return os::sysFail(ENODEV, op + ": no link in the kernel's answer");
    }
    return *found;
  }

  /// Sends a request built by vf_messages.h as it is (the socket fills in seq and port id).
  os::SysResult<void> sendBuilt(const os::Netns& ns, int index, std::vector<std::uint8_t> bytes,
                                const std::string& op) {
    if (index <= 0) {
      return os::sysFail(ENODEV, op + ": no such link index");
    }
    return sendBytes(ns, std::move(bytes), op);
  }

  /// Sends a request built elsewhere (libmnl) on `ns`'s libnl socket, which fills in seq and port
  /// id and reads the ACK or the error with its ext-ack text.
  os::SysResult<void> sendBytes(const os::Netns& ns, std::vector<std::uint8_t> bytes,
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

  os::SysResult<void> addressRequest(const os::Netns& ns, int index, const net::IpPrefix& prefix,
                                     bool add, const std::string& op) {
    if (index <= 0) {
      return os::sysFail(ENODEV, op + ": no such link index");
    }
    if (!prefix.address.valid()) {
      return os::sysFail(EINVAL, op + ": no address");
    }
    RtnlAddrPtr addr(rtnl_addr_alloc());
    NlAddrPtr local = nlAddrFromIp(prefix.address, prefix.prefixLen);
    if (!addr || !local) {
      return os::sysFail(ENOMEM, op);
    }
    rtnl_addr_set_ifindex(addr.get(), index);
    rtnl_addr_set_family(addr.get(), prefix.address.family);
    if (int rc = rtnl_addr_set_local(addr.get(), local.get()); rc < 0) {
      return libnlFail(rc, op);
    }
    rtnl_addr_set_prefixlen(addr.get(), prefix.prefixLen);
    nl_msg* raw = nullptr;
    int rc = 0;
    if (add) {
      if (!prefix.address.isV4()) {
        // Skip duplicate address detection: the address must be usable as soon as ADD returns.
        rtnl_addr_set_flags(addr.get(), IFA_F_NODAD);
      }
      rc = rtnl_addr_build_add_request(addr.get(), NLM_F_EXCL, &raw);
    } else {
      rc = rtnl_addr_build_delete_request(addr.get(), 0, &raw);
    }
    NlMsgPtr msg(raw);
    if (rc < 0) {
      return libnlFail(rc, op);
    }
    return simple(ns, msg.get(), op);
  }

  os::SysResult<void> routeRequest(const os::Netns& ns, const Route& route, bool add,
                                   const std::string& op) {
    const int family = route.dst.address.family;
    if (family != AF_INET && family != AF_INET6) {
      return os::sysFail(EINVAL, op + ": no destination");
    }
    if (route.gw && route.gw->family != family) {
      return os::sysFail(EINVAL, op + ": gateway and destination families differ");
    }
    if (route.scope && *route.scope > 255) {
      return os::sysFail(EINVAL, op + ": scope out of range");
    }
    RtnlRoutePtr r(rtnl_route_alloc());
    NlAddrPtr dst = nlAddrFromIp(route.dst.address, route.dst.prefixLen);
    if (!r || !dst) {
      return os::sysFail(ENOMEM, op);
    }
    if (int rc = rtnl_route_set_family(r.get(), static_cast<std::uint8_t>(family)); rc < 0) {
      return libnlFail(rc, op);
    }
    if (int rc = rtnl_route_set_dst(r.get(), dst.get()); rc < 0) {
      return libnlFail(rc, op);
    }
    rtnl_route_set_table(r.get(), route.table.value_or(0) == 0 ? RT_TABLE_MAIN : *route.table);
    if (route.priority) {
      rtnl_route_set_priority(r.get(), *route.priority);
    }
    if (route.scope) {
      rtnl_route_set_scope(r.get(), static_cast<std::uint8_t>(*route.scope));
    } else if (!add) {
      rtnl_route_set_scope(r.get(), RT_SCOPE_NOWHERE);  // wildcard, as `ip route del` sends
    }
    if (!add) {
      rtnl_route_set_protocol(r.get(), RTPROT_UNSPEC);  // match routes of any origin
    }
    if (route.mtu) {
      if (int rc = rtnl_route_set_metric(r.get(), RTAX_MTU, *route.mtu); rc < 0) {
        return libnlFail(rc, op);
      }
    }
    if (route.advmss) {
      if (int rc = rtnl_route_set_metric(r.get(), RTAX_ADVMSS, *route.advmss); rc < 0) {
        return libnlFail(rc, op);
      }
    }
    if (route.ifIndex != 0 || route.gw) {
      RtnlNexthopPtr nh(rtnl_route_nh_alloc());
      if (!nh) {
        return os::sysFail(ENOMEM, op);
      }
      if (route.ifIndex != 0) {
        rtnl_route_nh_set_ifindex(nh.get(), route.ifIndex);
      }
      if (route.gw) {
        NlAddrPtr gw = nlAddrFromIp(*route.gw, static_cast<int>(route.gw->size() * 8));
        if (!gw) {
          return os::sysFail(ENOMEM, op);
        }
        rtnl_route_nh_set_gateway(nh.get(), gw.get());  // takes its own reference
      }
      rtnl_route_add_nexthop(r.get(), nh.release());  // the route owns it from here
    }
    nl_msg* raw = nullptr;
    // NLM_F_CREATE (libnl adds it) without NLM_F_EXCL, as the reference plugins (RouteAddEcmp):
    // a route to a destination another interface already routes (the same network attached twice)
    // is added beside it; only the very same route is EEXIST.
    int rc = add ? rtnl_route_build_add_request(r.get(), 0, &raw)
                 : rtnl_route_build_del_request(r.get(), 0, &raw);
    NlMsgPtr msg(raw);
    if (rc < 0) {
      return libnlFail(rc, op);
    }
    return simple(ns, msg.get(), op);
  }
};

LibnlNetlink::LibnlNetlink() : impl_(std::make_unique<Impl>()) {}
LibnlNetlink::~LibnlNetlink() = default;
LibnlNetlink::LibnlNetlink(LibnlNetlink&&) noexcept = default;
LibnlNetlink& LibnlNetlink::operator=(LibnlNetlink&&) noexcept = default;

void LibnlNetlink::closeSockets() noexcept {
  if (impl_) {
    impl_->sockets.clear();
  }
}

os::SysResult<Link> LibnlNetlink::linkByName(const os::Netns& ns, const std::string& name) {
  const std::string op = "get link \"" + name + "\"" + inNs(ns);
  if (!net::isValidIfName(name)) {
    return os::sysFail(ENODEV, op + ": not a valid interface name");
  }
  return impl_->getLink(ns, 0, name, op);
}

os::SysResult<Link> LibnlNetlink::linkByIndex(const os::Netns& ns, int index) {
  const std::string op = "get " + linkRef(index) + inNs(ns);
  if (index <= 0) {
    return os::sysFail(ENODEV, op + ": no such link index");
  }
  return impl_->getLink(ns, index, {}, op);
}

os::SysResult<void> LibnlNetlink::setLinkUp(const os::Netns& ns, int index, bool up) {
  const std::string op = "set " + linkRef(index) + (up ? " up" : " down") + inNs(ns);
  RtnlLinkPtr changes(rtnl_link_alloc());
  if (!changes) {
    return os::sysFail(ENOMEM, op);
  }
  if (up) {
    rtnl_link_set_flags(changes.get(), IFF_UP);
  } else {
    rtnl_link_unset_flags(changes.get(), IFF_UP);
  }
  return impl_->changeLink(ns, index, changes.get(), op);
}

os::SysResult<void> LibnlNetlink::renameLink(const os::Netns& ns, int index,
                                             const std::string& newName) {
  const std::string op = "rename " + linkRef(index) + " to \"" + newName + "\"" + inNs(ns);
  if (!net::isValidIfName(newName)) {
    // libnl would cut a long name to 15 bytes and rename to that.
    return os::sysFail(EINVAL, op + ": not a valid interface name");
  }
  RtnlLinkPtr changes(rtnl_link_alloc());
  if (!changes) {
    return os::sysFail(ENOMEM, op);
  }
  rtnl_link_set_name(changes.get(), newName.c_str());
  return impl_->changeLink(ns, index, changes.get(), op);
}

os::SysResult<void> LibnlNetlink::setMtu(const os::Netns& ns, int index, std::uint32_t mtu) {
  const std::string op = "set mtu " + std::to_string(mtu) + " on " + linkRef(index) + inNs(ns);
  RtnlLinkPtr changes(rtnl_link_alloc());
  if (!changes) {
    return os::sysFail(ENOMEM, op);
  }
  rtnl_link_set_mtu(changes.get(), mtu);
  return impl_->changeLink(ns, index, changes.get(), op);
}

os::SysResult<void> LibnlNetlink::setAlias(const os::Netns& ns, int index,
                                           const std::string& alias) {
  const std::string op = (alias.empty() ? "clear alias of " : "set alias \"" + alias + "\" on ") +
                         linkRef(index) + inNs(ns);
  RtnlLinkPtr changes(rtnl_link_alloc());
  if (!changes) {
    return os::sysFail(ENOMEM, op);
  }
  // IFLA_IFALIAS goes without a terminating NUL, as iproute2 sends it: the kernel clears the
  // alias only for a zero-length attribute, and libnl's NUL would count against the 255 bytes
  // the policy allows.
  return impl_->changeLink(ns, index, changes.get(), op, [&alias](nl_msg* msg) {
    return nla_put(msg, IFLA_IFALIAS, static_cast<int>(alias.size()), alias.data());
  });
}

os::SysResult<void> LibnlNetlink::setHwAddress(const os::Netns& ns, int index,
                                               const net::HwAddress& mac) {
  const std::string op = "set address " + mac.text + " on " + linkRef(index) + inNs(ns);
  auto bytes = macBytes(mac);
  if (!bytes) {
    return os::sysFail(EINVAL, op + ": not a hardware address");
  }
  RtnlLinkPtr changes(rtnl_link_alloc());
  NlAddrPtr addr(nl_addr_build(AF_LLC, bytes->data(), bytes->size()));
  if (!changes || !addr) {
    return os::sysFail(ENOMEM, op);
  }
  rtnl_link_set_addr(changes.get(), addr.get());  // takes its own reference
  return impl_->changeLink(ns, index, changes.get(), op);
}

os::SysResult<void> LibnlNetlink::moveLink(const os::Netns& from, int index, const os::Netns& to) {
  const std::string op =
      "move " + linkRef(index) + " from netns " + from.path() + " to netns " + to.path();
  if (to.fd() < 0) {
    return os::sysFail(EBADF, op + ": the target handle has no fd");
  }
  RtnlLinkPtr changes(rtnl_link_alloc());
  if (!changes) {
    return os::sysFail(ENOMEM, op);
  }
  rtnl_link_set_ns_fd(changes.get(), to.fd());
  return impl_->changeLink(from, index, changes.get(), op);
}

os::SysResult<std::vector<Address>> LibnlNetlink::listAddresses(const os::Netns& ns, int index) {
  const std::string op = "list addresses of " + linkRef(index) + inNs(ns);
  if (auto link = linkByIndex(ns, index); !link) {
    return os::sysFail(link.error().err, op, link.error().extAck);
  }
  std::vector<Address> out;
  auto build = [] {
    NlMsgPtr msg(nlmsg_alloc_simple(RTM_GETADDR, NLM_F_DUMP));
    ifaddrmsg hdr{};
    hdr.ifa_family = AF_UNSPEC;
    if (msg && nlmsg_append(msg.get(), &hdr, sizeof hdr, NLMSG_ALIGNTO) < 0) {
      msg.reset();
    }
    return msg;
  };
  auto collect = [&out, index](nl_object* obj) {
    auto* a = reinterpret_cast<rtnl_addr*>(obj);
    if (rtnl_addr_get_ifindex(a) != index) {
      return;
    }
    auto ip = ipFromNlAddr(rtnl_addr_get_local(a));
    if (!ip) {
      return;
    }
    out.push_back(Address{index, net::IpPrefix{*ip, rtnl_addr_get_prefixlen(a)}});
  };
  auto res = impl_->dump(
      ns, build, "route/addr", collect, [&out] { out.clear(); }, op);
  if (!res) {
    return std::unexpected(res.error());
  }
  return out;
}

os::SysResult<void> LibnlNetlink::addAddress(const os::Netns& ns, int index,
                                             const net::IpPrefix& prefix) {
  return impl_->addressRequest(
      ns, index, prefix, true,
      "add address " + prefix.toString() + " to " + linkRef(index) + inNs(ns));
}

os::SysResult<void> LibnlNetlink::deleteAddress(const os::Netns& ns, int index,
                                                const net::IpPrefix& prefix) {
  return impl_->addressRequest(
      ns, index, prefix, false,
      "delete address " + prefix.toString() + " from " + linkRef(index) + inNs(ns));
}

os::SysResult<std::vector<Route>> LibnlNetlink::listRoutes(const os::Netns& ns, int index) {
  const std::string op =
      "list routes" + (index == 0 ? std::string() : " of " + linkRef(index)) + inNs(ns);
  if (index != 0) {
    if (auto link = linkByIndex(ns, index); !link) {
      return os::sysFail(link.error().err, op, link.error().extAck);
    }
  }
  std::vector<Route> out;
  auto build = [] {
    NlMsgPtr msg(nlmsg_alloc_simple(RTM_GETROUTE, NLM_F_DUMP));
    rtmsg hdr{};
    hdr.rtm_family = AF_UNSPEC;
    if (msg && nlmsg_append(msg.get(), &hdr, sizeof hdr, NLMSG_ALIGNTO) < 0) {
      msg.reset();
    }
    return msg;
  };
  auto collect = [&out, index](nl_object* obj) {
    auto* r = reinterpret_cast<rtnl_route*>(obj);
    auto base = routeBase(r);
    if (!base) {
      return;
    }
    const int hops = rtnl_route_get_nnexthops(r);
    if (hops == 0 && index == 0) {
      out.push_back(*base);  // e.g. a route that refers to a nexthop object (RTA_NH_ID)
    }
    for (int i = 0; i < hops; ++i) {
      rtnl_nexthop* nh = rtnl_route_nexthop_n(r, i);
      Route route = *base;
      route.ifIndex = rtnl_route_nh_get_ifindex(nh);
      if (index != 0 && route.ifIndex != index) {
        continue;
      }
      if (auto gw = ipFromNlAddr(rtnl_route_nh_get_gateway(nh)); gw && gw->valid()) {
        route.gw = *gw;
      }
      out.push_back(std::move(route));
    }
  };
  auto res = impl_->dump(
      ns, build, "route/route", collect, [&out] { out.clear(); }, op);
  if (!res) {
    return std::unexpected(res.error());
  }
  return out;
}

os::SysResult<VfInfo> LibnlNetlink::vfInfo(const os::Netns& ns, int pfIndex, std::uint32_t vf) {
  const std::string op = "get vf " + std::to_string(vf) + " of " + linkRef(pfIndex) + inNs(ns);
  if (pfIndex <= 0) {
    return os::sysFail(ENODEV, op + ": no such link index");
  }
  std::vector<VfInfo> vfs;
  auto link = impl_->getLink(ns, pfIndex, {}, op, [&vfs](std::array<nlattr*, IFLA_MAX + 1>& tb) {
    vfs = vfsFrom(tb[IFLA_VFINFO_LIST]);
  });
  if (!link) {
    return std::unexpected(link.error());
  }
  for (const auto& v : vfs) {
    if (v.vf == vf) {
      return v;
    }
  }
  return os::sysFail(ENOENT, op + (vfs.empty() ? ": the link reports no VFs"
                                               : ": the link reports " +
                                                     std::to_string(vfs.size()) + " VFs"));
}

os::SysResult<void> LibnlNetlink::setVfGuids(const os::Netns& ns, int pfIndex, std::uint32_t vf,
                                             const net::Guid& nodeGuid,
                                             const net::Guid& portGuid) {
  const std::string op = "set node GUID " + nodeGuid.toString() + " and port GUID " +
                         portGuid.toString() + " of vf " + std::to_string(vf) + " on " +
                         linkRef(pfIndex) + inNs(ns);
  return impl_->sendBuilt(ns, pfIndex, buildSetVfGuids(pfIndex, vf, nodeGuid, portGuid), op);
}

os::SysResult<void> LibnlNetlink::setVfLinkState(const os::Netns& ns, int pfIndex,
                                                 std::uint32_t vf, VfLinkState state) {
  const char* name = state == VfLinkState::kAuto     ? "auto"
                     : state == VfLinkState::kEnable ? "enable"
                                                     : "disable";
  const std::string op = "set state " + std::string(name) + " of vf " + std::to_string(vf) +
                         " on " + linkRef(pfIndex) + inNs(ns);
  return impl_->sendBuilt(ns, pfIndex, buildSetVfLinkState(pfIndex, vf, state), op);
}

os::SysResult<void> LibnlNetlink::addIpoibChild(const os::Netns& ns, const IpoibChildSpec& spec) {
  const std::string op = "add ipoib child \"" + spec.name + "\" of " + linkRef(spec.parentIndex) +
                         " pkey " + std::to_string(spec.pkey) + " mode " +
                         (spec.mode == IpoibMode::kConnected ? "connected" : "datagram") +
                         " umcast " + (spec.umcast ? "1" : "0") + inNs(ns);
  if (!net::isValidIfName(spec.name)) {
    return os::sysFail(EINVAL, op + ": not a valid interface name");
  }
  // libmnl built the request (ipoib_messages.cpp); libnl only carries it on this namespace's
  // socket, which fills in seq and port id and reads the ACK or the error with its ext-ack text.
  return impl_->sendBytes(ns, buildAddIpoibChild(spec), op);
}

os::SysResult<void> LibnlNetlink::sendRequestForTest(const os::Netns& ns,
                                                     std::vector<std::uint8_t> request,
                                                     const std::string& op) {
  return impl_->sendBytes(ns, std::move(request), op);
}

os::SysResult<void> LibnlNetlink::deleteLink(const os::Netns& ns, int index) {
  const std::string op = "delete " + linkRef(index) + inNs(ns);
  if (index <= 0) {
    // Without an index or a name the kernel would answer EINVAL.
    return os::sysFail(ENODEV, op + ": no such link index");
  }
  RtnlLinkPtr link(rtnl_link_alloc());
  if (!link) {
    return os::sysFail(ENOMEM, op);
  }
  rtnl_link_set_ifindex(link.get(), index);
  nl_msg* raw = nullptr;
  const int rc = rtnl_link_build_delete_request(link.get(), &raw);
  NlMsgPtr msg(raw);
  if (rc < 0) {
    return libnlFail(rc, op);
  }
  return impl_->simple(ns, msg.get(), op);
}

os::SysResult<void> LibnlNetlink::addRoute(const os::Netns& ns, const Route& route) {
  return impl_->routeRequest(ns, route, true, "add route " + describe(route) + inNs(ns));
}

os::SysResult<void> LibnlNetlink::deleteRoute(const os::Netns& ns, const Route& route) {
  return impl_->routeRequest(ns, route, false, "delete route " + describe(route) + inNs(ns));
}

}  // namespace ibcni::nl
