// SPDX-License-Identifier: Apache-2.0
// The RDMA netlink reply parsers of plugin/rdma (libmnl): one datagram as the kernel would send it
// on the NETLINK_RDMA socket, walked by wire::readDatagram as MnlRdmaNetlink walks each recv();
// every data message it keeps goes through the nldev parsers (SYS_GET, device dump, port dump),
// and so does the datagram itself.

#include <linux/netlink.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "fuzz_util.h"
#include "plugin/rdma/rdma_messages.h"

namespace {

using ibcni::fuzz::require;
namespace wire = ibcni::rdma::wire;

void parseAll(std::span<const std::uint8_t> message) {
  (void)wire::parseSysGet(message);
  if (auto d = wire::parseDevice(message); d) {
    require(d->name.size() < message.size(), "a device name longer than its message");
  }
  if (auto p = wire::parsePort(message); p) {
    require(p->deviceName.size() < message.size() && p->netdevName.size() < message.size(),
            "a name longer than its message");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> datagram(data, size);
  // The sequence number and port id the replies must carry: the first header's, so that the
  // walk gets past the checks (and with 0 / another value, so that it fails them).
  std::uint32_t seq = 0;
  std::uint32_t portid = 0;
  if (size >= sizeof(nlmsghdr)) {
    nlmsghdr first{};
    std::memcpy(&first, data, sizeof first);
    seq = first.nlmsg_seq;
    portid = first.nlmsg_pid;
  }
  for (std::uint32_t pid : {portid, std::uint32_t{0}, portid + 1}) {
    wire::Answer answer;
    auto r = wire::readDatagram(datagram, seq, pid, answer);
    std::size_t total = 0;
    for (const auto& m : answer.messages) {
      require(m.size() >= sizeof(nlmsghdr), "kept a message shorter than its header");
      total += m.size();
      parseAll(m);
    }
    require(total <= size, "kept more bytes than the datagram holds");
    if (!r) {
      require(r.error().err != 0, "an error without an errno");
    }
  }
  parseAll(datagram);
  return 0;
}
