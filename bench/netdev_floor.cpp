// SPDX-License-Identifier: Apache-2.0
// The floor of an sriov-mode ADD and DEL on a plain netdev: the kernel operations ibcni's ADD makes
// for a veth named by `device`, and those of its DEL, over raw rtnetlink sockets, with nothing else
// (no configuration parsing beyond reading stdin, no IPAM, no record, no lock, no lookups beyond
// the ifindex). cni_bench (cni_bench_breakdown.cpp) execs it as it execs the plugins (fresh
// environment, CNI_* variables, stdin) and times it the same way; it writes the same kind of
// timing line as ibcni at logLevel debug (lib/log/timing.h) on stderr:
//   timing: start=<ns> stdin=<us> netns=<us> link=<us> addr=<us> end=<ns>
//
//   netdev_floor DEVICE ADDRESS/PREFIX GATEWAY ROUTE_DST/PREFIX     (CNI_COMMAND ADD or DEL)
//
// ADD, as ibcni does for a veth that is down: open the pod's netns, one rtnetlink socket in the
// host and one in the pod (setns there and back), look the device up, set its alias, rename it to
// a temporary name, move it into the pod, look it up there, rename it to CNI_IFNAME, bring it up,
// add the address and the route via the gateway. DEL: look CNI_IFNAME up in the pod, bring it down,
// rename it to the temporary name, move it to the host, look it up, rename it back to DEVICE,
// clear the alias (the address and route go with the move). Exit status 0, or 1 with the failed
// step on stderr. Statically linked: the process start is the floor too.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

std::int64_t nowNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct Laps {
  std::int64_t start = 0;
  std::int64_t last = 0;
  char text[256] = {};
  int used = 0;
  void lap(const char* name) {
    const std::int64_t now = nowNs();
    used += std::snprintf(text + used, sizeof text - static_cast<std::size_t>(used), " %s=%.1f", name,
                          static_cast<double>(now - last) / 1000.0);
    last = now;
  }
};

[[noreturn]] void die(const char* what, int err) {
  std::fprintf(stderr, "netdev_floor: %s: %s\n", what, std::strerror(err));
  std::exit(1);
}

struct Request {
  nlmsghdr hdr;
  union {
    ifinfomsg link;
    ifaddrmsg addr;
    rtmsg route;
  };
  char attrs[512];
};

void attr(Request& r, unsigned short type, const void* data, std::size_t len) {
  auto* a = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(&r) + NLMSG_ALIGN(r.hdr.nlmsg_len));
  a->rta_type = type;
  a->rta_len = static_cast<unsigned short>(RTA_LENGTH(len));
  std::memcpy(RTA_DATA(a), data, len);
  r.hdr.nlmsg_len = NLMSG_ALIGN(r.hdr.nlmsg_len) + RTA_ALIGN(a->rta_len);
}

void attrString(Request& r, unsigned short type, const char* s) { attr(r, type, s, std::strlen(s) + 1); }

unsigned seq = 0;

// Sends `r` and reads the answer: the ACK (returns 0 or fails), or for RTM_GETLINK the link
// (returns its ifindex).
int talk(int fd, Request& r, const char* what) {
  r.hdr.nlmsg_seq = ++seq;
  if (::send(fd, &r, r.hdr.nlmsg_len, 0) < 0) {
    die(what, errno);
  }
  alignas(nlmsghdr) char buf[8192];
  ssize_t got = ::recv(fd, buf, sizeof buf, 0);
  if (got < 0) {
    die(what, errno);
  }
  auto n = static_cast<unsigned>(got);
  for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
    if (h->nlmsg_type == NLMSG_ERROR) {
      const int err = -static_cast<nlmsgerr*>(NLMSG_DATA(h))->error;
      if (err != 0) {
        die(what, err);
      }
      return 0;
    }
    if (h->nlmsg_type == RTM_NEWLINK) {
      return static_cast<ifinfomsg*>(NLMSG_DATA(h))->ifi_index;
    }
  }
  die(what, EPROTO);
}

Request linkRequest(unsigned short type, int index) {
  Request r{};
  r.hdr.nlmsg_len = NLMSG_LENGTH(sizeof(ifinfomsg));
  r.hdr.nlmsg_type = type;
  r.hdr.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
  r.link.ifi_family = AF_UNSPEC;
  r.link.ifi_index = index;
  return r;
}

int linkByName(int fd, const char* name) {
  Request r = linkRequest(RTM_GETLINK, 0);
  r.hdr.nlmsg_flags = NLM_F_REQUEST;
  attrString(r, IFLA_IFNAME, name);
  return talk(fd, r, "look up link");
}

void rename(int fd, int index, const char* name) {
  Request r = linkRequest(RTM_NEWLINK, index);
  attrString(r, IFLA_IFNAME, name);
  talk(fd, r, "rename link");
}

void setAlias(int fd, int index, const char* alias) {
  Request r = linkRequest(RTM_NEWLINK, index);
  attr(r, IFLA_IFALIAS, alias, std::strlen(alias));
  talk(fd, r, "set alias");
}

void move(int fd, int index, int nsFd) {
  Request r = linkRequest(RTM_NEWLINK, index);
  const std::uint32_t ns = static_cast<std::uint32_t>(nsFd);
  attr(r, IFLA_NET_NS_FD, &ns, sizeof ns);
  talk(fd, r, "move link");
}

void setUp(int fd, int index, bool up) {
  Request r = linkRequest(RTM_NEWLINK, index);
  r.link.ifi_change = IFF_UP;
  r.link.ifi_flags = up ? IFF_UP : 0;
  talk(fd, r, "set link state");
}

void addAddress(int fd, int index, in_addr a, unsigned char prefix) {
  Request r{};
  r.hdr.nlmsg_len = NLMSG_LENGTH(sizeof(ifaddrmsg));
  r.hdr.nlmsg_type = RTM_NEWADDR;
  r.hdr.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
  r.addr.ifa_family = AF_INET;
  r.addr.ifa_prefixlen = prefix;
  r.addr.ifa_index = static_cast<unsigned>(index);
  attr(r, IFA_LOCAL, &a, sizeof a);
  attr(r, IFA_ADDRESS, &a, sizeof a);
  talk(fd, r, "add address");
}

void addRoute(int fd, int index, in_addr dst, unsigned char prefix, in_addr gw) {
  Request r{};
  r.hdr.nlmsg_len = NLMSG_LENGTH(sizeof(rtmsg));
  r.hdr.nlmsg_type = RTM_NEWROUTE;
  r.hdr.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
  r.route.rtm_family = AF_INET;
  r.route.rtm_dst_len = prefix;
  r.route.rtm_table = RT_TABLE_MAIN;
  r.route.rtm_protocol = RTPROT_BOOT;
  r.route.rtm_scope = RT_SCOPE_UNIVERSE;
  r.route.rtm_type = RTN_UNICAST;
  const auto oif = static_cast<std::uint32_t>(index);
  attr(r, RTA_DST, &dst, sizeof dst);
  attr(r, RTA_GATEWAY, &gw, sizeof gw);
  attr(r, RTA_OIF, &oif, sizeof oif);
  talk(fd, r, "add route");
}

int rtnl() {
  const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) {
    die("socket", errno);
  }
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    die("bind", errno);
  }
  return fd;
}

// An rtnetlink socket created inside `nsFd`, as ibcni makes one per namespace.
int rtnlIn(int nsFd, int hostFd) {
  if (::setns(nsFd, CLONE_NEWNET) != 0) {
    die("setns pod", errno);
  }
  const int fd = rtnl();
  if (::setns(hostFd, CLONE_NEWNET) != 0) {
    die("setns host", errno);
  }
  return fd;
}

in_addr parsePrefix(const char* text, unsigned char& prefix) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s", text);
  char* slash = std::strchr(buf, '/');
  prefix = 32;
  if (slash != nullptr) {
    *slash = '\0';
    prefix = static_cast<unsigned char>(std::atoi(slash + 1));
  }
  in_addr a{};
  if (::inet_pton(AF_INET, buf, &a) != 1) {
    die("address", EINVAL);
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  Laps laps;
  laps.start = laps.last = nowNs();
  if (argc != 5) {
    std::fprintf(stderr, "usage: netdev_floor DEVICE ADDRESS/PREFIX GATEWAY ROUTE_DST/PREFIX\n");
    return 2;
  }
  const char* command = std::getenv("CNI_COMMAND");
  const char* netns = std::getenv("CNI_NETNS");
  const char* ifName = std::getenv("CNI_IFNAME");
  if (command == nullptr || netns == nullptr || ifName == nullptr) {
    std::fprintf(stderr, "netdev_floor: CNI_COMMAND, CNI_NETNS and CNI_IFNAME are needed\n");
    return 2;
  }
  const bool add = std::strcmp(command, "ADD") == 0;
  char input[65536];
  while (::read(0, input, sizeof input) > 0) {
  }
  laps.lap("stdin");

  const char* device = argv[1];
  const char* tmpName = "flr0tmp";
  const int podNs = ::open(netns, O_RDONLY | O_CLOEXEC);
  const int hostNs = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (podNs < 0 || hostNs < 0) {
    die("open netns", errno);
  }
  const int host = rtnl();
  const int pod = rtnlIn(podNs, hostNs);
  laps.lap("netns");

  if (add) {
    unsigned char prefix = 0;
    unsigned char routePrefix = 0;
    const in_addr address = parsePrefix(argv[2], prefix);
    const in_addr gateway = parsePrefix(argv[3], routePrefix);
    const in_addr dst = parsePrefix(argv[4], routePrefix);
    const int index = linkByName(host, device);
    setAlias(host, index, "bench-floor");
    rename(host, index, tmpName);
    move(host, index, podNs);
    const int inPod = linkByName(pod, tmpName);
    rename(pod, inPod, ifName);
    setUp(pod, inPod, true);
    laps.lap("link");
    addAddress(pod, inPod, address, prefix);
    addRoute(pod, inPod, dst, routePrefix, gateway);
    laps.lap("addr");
    std::printf("{\"cniVersion\":\"1.0.0\",\"ips\":[{\"address\":\"%s\"}]}\n", argv[2]);
  } else {
    const int inPod = linkByName(pod, ifName);
    setUp(pod, inPod, false);
    rename(pod, inPod, tmpName);
    move(pod, inPod, hostNs);
    const int index = linkByName(host, tmpName);
    rename(host, index, device);
    setAlias(host, index, "");
    laps.lap("link");
  }
  std::fflush(stdout);
  std::fprintf(stderr, "timing: start=%lld%s end=%lld\n", static_cast<long long>(laps.start), laps.text,
               static_cast<long long>(laps.last));
  return 0;
}
