// SPDX-License-Identifier: Apache-2.0
#include "plugin/rdma/rdma_messages.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <linux/netlink.h>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <libmnl/libmnl.h>
#include <rdma/rdma_netlink.h>

namespace ibcni::rdma::wire {

namespace {

// Far more than the longest request (SET: 16 + 8 + 8 bytes).
constexpr std::size_t kRequestBufferSize = 256;

constexpr std::uint16_t nldevType(int cmd) {
  return static_cast<std::uint16_t>(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd));
}

std::string hex(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", v);
  return buf;
}

// The libmnl examples' order: header (type, flags, seq), then the attributes. RDMA netlink has no
// family header. The port id stays 0: the kernel fills in the sender's.
template <class AddAttrs>
std::vector<std::uint8_t> build(int cmd, std::uint16_t flags, std::uint32_t seq, AddAttrs&& addAttrs) {
  std::vector<std::uint8_t> buf(kRequestBufferSize, 0);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = nldevType(cmd);
  nlh->nlmsg_flags = flags;
  nlh->nlmsg_seq = seq;
  std::forward<AddAttrs>(addAttrs)(nlh);
  buf.resize(nlh->nlmsg_len);
  return buf;
}

void noAttrs(nlmsghdr* /*nlh*/) {}

os::SysResult<void> protoFail(std::string why) { return os::sysFail(EPROTO, std::move(why)); }

// A copy of `bytes` when they are not aligned for nlmsghdr (spans into arbitrary test buffers);
// libmnl casts the pointer it is given.
struct Aligned {
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
  explicit Aligned(std::span<const std::uint8_t> bytes) {
    if (reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(nlmsghdr) != 0) {
      copy.assign(bytes.begin(), bytes.end());
      bytes = copy;
    }
    data = bytes;
  }
  std::vector<std::uint8_t> copy;
  std::span<const std::uint8_t> data;
};

// Whether a whole message starts at `nlh` with `len` bytes left. mnl_nlmsg_ok() alone is not
// enough: it compares (int)nlmsg_len with `len`, so a length of 2^31 or more passes as negative and
// the walk (mnl_nlmsg_next) or the attribute parser would run off the buffer.
bool messageFits(const nlmsghdr* nlh, int len) {
  return mnl_nlmsg_ok(nlh, len) && nlh->nlmsg_len <= static_cast<std::uint32_t>(len);
}

// --- attributes --------------------------------------------------------------------------

// The attribute table of one nldev message, filled the libmnl way (examples/rtnl/rtnl-link-dump.c
// data_attr_cb): types this parser does not know, including those of kernels newer than our
// headers, are skipped; the known ones are validated before anyone reads them.
// The table points into `bytes`, the table's own copy of the message: aligned for nlmsghdr, and
// zero-padded to NLMSG_ALIGN(nlmsg_len), since libmnl walks attributes up to the aligned tail and a
// message whose length is not a multiple of 4 would otherwise let an attribute end past the buffer.
// A move keeps the vector's storage, so the pointers stay valid; a copy would not, hence none.
struct NldevAttrs {
  NldevAttrs() = default;
  NldevAttrs(NldevAttrs&&) noexcept = default;
  NldevAttrs& operator=(NldevAttrs&&) noexcept = default;
  NldevAttrs(const NldevAttrs&) = delete;
  NldevAttrs& operator=(const NldevAttrs&) = delete;

  std::vector<std::uint8_t> bytes;
  const nlattr* tb[RDMA_NLDEV_ATTR_MAX] = {};
  int badType = -1;  // set when a known attribute failed validation
};

int nldevAttrCb(const nlattr* attr, void* data) {
  auto* attrs = static_cast<NldevAttrs*>(data);
  if (mnl_attr_type_valid(attr, RDMA_NLDEV_ATTR_MAX - 1) < 0) {
    return MNL_CB_OK;
  }
  const int type = mnl_attr_get_type(attr);
  mnl_attr_data_type want = MNL_TYPE_UNSPEC;
  switch (type) {
    case RDMA_NLDEV_ATTR_DEV_INDEX:
    case RDMA_NLDEV_ATTR_PORT_INDEX:
    case RDMA_NLDEV_ATTR_NDEV_INDEX:
      want = MNL_TYPE_U32;
      break;
    case RDMA_NLDEV_ATTR_DEV_NAME:
    case RDMA_NLDEV_ATTR_NDEV_NAME:
      want = MNL_TYPE_NUL_STRING;
      break;
    case RDMA_NLDEV_SYS_ATTR_NETNS_MODE:
      want = MNL_TYPE_U8;
      break;
    default:
      return MNL_CB_OK;  // known to the kernel, of no interest here
  }
  if (mnl_attr_validate(attr, want) < 0) {
    attrs->badType = type;
    return MNL_CB_ERROR;
  }
  attrs->tb[type] = attr;
  return MNL_CB_OK;
}

// Checks the message's type against `types` and fills the attribute table.
os::SysResult<NldevAttrs> parseNldev(std::span<const std::uint8_t> message,
                                     std::initializer_list<std::uint16_t> types, const char* what) {
  NldevAttrs attrs;
  attrs.bytes.assign(message.begin(), message.end());
  const auto* nlh = reinterpret_cast<const nlmsghdr*>(attrs.bytes.data());
  if (!messageFits(nlh, static_cast<int>(attrs.bytes.size()))) {
    return os::sysFail(EPROTO, std::string("parse ") + what + ": truncated netlink message");
  }
  attrs.bytes.resize(std::max<std::size_t>(attrs.bytes.size(), MNL_ALIGN(nlh->nlmsg_len)));
  nlh = reinterpret_cast<const nlmsghdr*>(attrs.bytes.data());
  bool typeOk = false;
  for (std::uint16_t t : types) {
    typeOk = typeOk || nlh->nlmsg_type == t;
  }
  if (!typeOk) {
    return os::sysFail(EPROTO, std::string("parse ") + what + ": unexpected message type " +
                                   hex(nlh->nlmsg_type));
  }
  if (mnl_attr_parse(nlh, 0, nldevAttrCb, &attrs) < 0) {
    return os::sysFail(EPROTO, std::string("parse ") + what +
                                   (attrs.badType >= 0 ? ": attribute " + std::to_string(attrs.badType) +
                                                             " has a bad length"
                                                       : std::string(": malformed attributes")));
  }
  return attrs;
}

std::string str(const nlattr* attr) { return attr != nullptr ? mnl_attr_get_str(attr) : ""; }

// --- control messages --------------------------------------------------------------------

int extAckAttrCb(const nlattr* attr, void* data) {
  if (mnl_attr_get_type(attr) == NLMSGERR_ATTR_MSG && mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0) {
    *static_cast<std::string*>(data) = mnl_attr_get_str(attr);
  }
  return MNL_CB_OK;  // NLMSGERR_ATTR_OFFS, _POLICY, _MISS_TYPE, ...: not needed
}

// The NLMSGERR_ATTR_MSG of the TLVs at `payload` + `offset`, "" without NLM_F_ACK_TLVS.
std::string extAckMessage(const nlmsghdr* nlh, std::size_t offset) {
  if ((nlh->nlmsg_flags & NLM_F_ACK_TLVS) == 0) {
    return {};
  }
  const std::size_t payloadLen = mnl_nlmsg_get_payload_len(nlh);
  if (offset >= payloadLen) {
    return {};
  }
  std::string msg;
  const auto* payload = static_cast<const std::uint8_t*>(mnl_nlmsg_get_payload(nlh));
  (void)mnl_attr_parse_payload(payload + offset, payloadLen - offset, extAckAttrCb, &msg);
  // Some subsystems end the text with a newline or a period; keep it as the kernel wrote it but
  // without trailing whitespace.
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) {
    msg.pop_back();
  }
  return msg;
}

// NLMSG_ERROR: struct nlmsgerr, then (NLM_F_ACK_TLVS) the extended ACK's attributes after the
// echoed request, which is only its header when NLM_F_CAPPED is set.
os::SysResult<void> readError(const nlmsghdr* nlh, Answer& answer) {
  if (mnl_nlmsg_get_payload_len(nlh) < sizeof(nlmsgerr)) {
    return protoFail("truncated NLMSG_ERROR");
  }
  const auto* err = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(nlh));
  answer.complete = true;
  if (err->error == 0) {
    return {};  // the ACK
  }
  std::size_t offset = sizeof(nlmsgerr);
  if ((nlh->nlmsg_flags & NLM_F_CAPPED) == 0) {
    offset = sizeof(int) + MNL_ALIGN(err->msg.nlmsg_len);
  }
  // Netlink subsystems disagree on the errno's sign (iproute2 lib/mnl_utils.c mnlu_cb_error).
  return os::sysFail(std::abs(err->error), {}, extAckMessage(nlh, offset));
}

// NLMSG_DONE carries an int: 0, or the negative errno of a dump that failed part way, with the
// extended ACK's attributes right after it.
os::SysResult<void> readDone(const nlmsghdr* nlh, Answer& answer) {
  answer.complete = true;
  if (mnl_nlmsg_get_payload_len(nlh) < sizeof(int)) {
    return {};
  }
  int error = 0;
  std::memcpy(&error, mnl_nlmsg_get_payload(nlh), sizeof error);
  if (error == 0) {
    return {};
  }
  return os::sysFail(std::abs(error), {}, extAckMessage(nlh, sizeof(int)));
}

}  // namespace

std::vector<std::uint8_t> buildSysGet(std::uint32_t seq) {
  // nlmsghdr(SYS_GET, REQUEST|ACK)
  return build(RDMA_NLDEV_CMD_SYS_GET, NLM_F_REQUEST | NLM_F_ACK, seq, noAttrs);
}

std::vector<std::uint8_t> buildDevDump(std::uint32_t seq) {
  // nlmsghdr(GET, REQUEST|ACK|DUMP)
  return build(RDMA_NLDEV_CMD_GET, NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP, seq, noAttrs);
}

std::vector<std::uint8_t> buildPortDump(std::uint32_t seq, std::uint32_t devIndex) {
  // nlmsghdr(PORT_GET, REQUEST|ACK|DUMP) | DEV_INDEX
  return build(RDMA_NLDEV_CMD_PORT_GET, NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP, seq,
               [devIndex](nlmsghdr* nlh) { mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_DEV_INDEX, devIndex); });
}

std::vector<std::uint8_t> buildSetNetns(std::uint32_t seq, std::uint32_t devIndex, std::uint32_t nsFd) {
  // nlmsghdr(SET, REQUEST|ACK) | DEV_INDEX | NET_NS_FD, in rdma/dev.c dev_set_netns's order
  return build(RDMA_NLDEV_CMD_SET, NLM_F_REQUEST | NLM_F_ACK, seq, [devIndex, nsFd](nlmsghdr* nlh) {
    mnl_attr_put_u32(nlh, RDMA_NLDEV_ATTR_DEV_INDEX, devIndex);
    mnl_attr_put_u32(nlh, RDMA_NLDEV_NET_NS_FD, nsFd);
  });
}

os::SysResult<void> readDatagram(std::span<const std::uint8_t> datagram, std::uint32_t seq,
                                 std::uint32_t portid, Answer& answer) {
  Aligned in(datagram);
  const auto* nlh = reinterpret_cast<const nlmsghdr*>(in.data.data());
  int len = static_cast<int>(in.data.size());
  while (messageFits(nlh, len)) {
    // The same checks as mnl_cb_run, with errors that say which.
    if (!mnl_nlmsg_portid_ok(nlh, portid)) {
      return protoFail("netlink reply for port id " + std::to_string(nlh->nlmsg_pid) + ", ours is " +
                       std::to_string(portid));
    }
    if (!mnl_nlmsg_seq_ok(nlh, seq)) {
      return protoFail("netlink reply with sequence number " + std::to_string(nlh->nlmsg_seq) +
                       ", expected " + std::to_string(seq));
    }
    // The kernel marks every message of a dump that ran while the objects changed; the rest of
    // the dump still comes and is read to its end, then the caller asks again.
    if ((nlh->nlmsg_flags & NLM_F_DUMP_INTR) != 0) {
      answer.interrupted = true;
    }
    switch (nlh->nlmsg_type) {
      case NLMSG_NOOP:
        break;
      case NLMSG_ERROR:
        return readError(nlh, answer);
      case NLMSG_DONE:
        return readDone(nlh, answer);
      case NLMSG_OVERRUN:
        return protoFail("netlink overrun");
      default:
        // Data. Requests always ask for an ACK, so a doit reply is ended by it as a dump is by
        // NLMSG_DONE. Unknown control types (< NLMSG_MIN_TYPE) are skipped, as mnl_cb_run does.
        if (nlh->nlmsg_type >= NLMSG_MIN_TYPE) {
          const auto* first = reinterpret_cast<const std::uint8_t*>(nlh);
          answer.messages.emplace_back(first, first + nlh->nlmsg_len);
        }
        break;
    }
    nlh = mnl_nlmsg_next(nlh, &len);
  }
  if (len != 0) {
    return protoFail("truncated netlink message (" + std::to_string(len) + " bytes left)");
  }
  return {};
}

os::SysResult<NetnsMode> parseSysGet(std::span<const std::uint8_t> message) {
  auto attrs = parseNldev(message, {nldevType(RDMA_NLDEV_CMD_SYS_GET)}, "RDMA_NLDEV_CMD_SYS_GET reply");
  if (!attrs) {
    return std::unexpected(attrs.error());
  }
  const nlattr* mode = attrs->tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE];
  if (mode == nullptr) {
    return os::sysFail(EPROTO, "parse RDMA_NLDEV_CMD_SYS_GET reply: no RDMA_NLDEV_SYS_ATTR_NETNS_MODE");
  }
  switch (mnl_attr_get_u8(mode)) {
    case 0:
      return NetnsMode::kExclusive;
    case 1:
      return NetnsMode::kShared;
    default:
      return os::sysFail(EPROTO, "parse RDMA_NLDEV_CMD_SYS_GET reply: unknown netns mode " +
                                     std::to_string(mnl_attr_get_u8(mode)));
  }
}

os::SysResult<Device> parseDevice(std::span<const std::uint8_t> message) {
  auto attrs = parseNldev(message, {nldevType(RDMA_NLDEV_CMD_GET)}, "RDMA_NLDEV_CMD_GET reply");
  if (!attrs) {
    return std::unexpected(attrs.error());
  }
  if (attrs->tb[RDMA_NLDEV_ATTR_DEV_INDEX] == nullptr || attrs->tb[RDMA_NLDEV_ATTR_DEV_NAME] == nullptr) {
    return os::sysFail(EPROTO, "parse RDMA_NLDEV_CMD_GET reply: no DEV_INDEX or DEV_NAME");
  }
  return Device{mnl_attr_get_u32(attrs->tb[RDMA_NLDEV_ATTR_DEV_INDEX]),
                str(attrs->tb[RDMA_NLDEV_ATTR_DEV_NAME])};
}

os::SysResult<Port> parsePort(std::span<const std::uint8_t> message) {
  // A dump answers with RDMA_NLDEV_CMD_PORT_GET messages; the kernel's PORT_GET doit (what
  // `rdma link show` asks) answers with RDMA_NLDEV_CMD_GET (tests/unit/rdma/testdata/link_show.hex).
  auto attrs = parseNldev(message, {nldevType(RDMA_NLDEV_CMD_PORT_GET), nldevType(RDMA_NLDEV_CMD_GET)},
                          "RDMA_NLDEV_CMD_PORT_GET reply");
  if (!attrs) {
    return std::unexpected(attrs.error());
  }
  const auto& tb = attrs->tb;
  if (tb[RDMA_NLDEV_ATTR_DEV_INDEX] == nullptr || tb[RDMA_NLDEV_ATTR_DEV_NAME] == nullptr ||
      tb[RDMA_NLDEV_ATTR_PORT_INDEX] == nullptr) {
    return os::sysFail(EPROTO, "parse RDMA_NLDEV_CMD_PORT_GET reply: no DEV_INDEX, DEV_NAME or PORT_INDEX");
  }
  Port port;
  port.deviceIndex = mnl_attr_get_u32(tb[RDMA_NLDEV_ATTR_DEV_INDEX]);
  port.deviceName = str(tb[RDMA_NLDEV_ATTR_DEV_NAME]);
  port.port = mnl_attr_get_u32(tb[RDMA_NLDEV_ATTR_PORT_INDEX]);
  if (tb[RDMA_NLDEV_ATTR_NDEV_INDEX] != nullptr) {
    port.netdevIndex = static_cast<int>(mnl_attr_get_u32(tb[RDMA_NLDEV_ATTR_NDEV_INDEX]));
  }
  port.netdevName = str(tb[RDMA_NLDEV_ATTR_NDEV_NAME]);
  return port;
}

}  // namespace ibcni::rdma::wire
