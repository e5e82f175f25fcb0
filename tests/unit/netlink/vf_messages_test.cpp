// SPDX-License-Identifier: Apache-2.0
// The VF requests of vf_messages.h, byte for byte against iproute2 (label "netns": needs root).
//
// Each case runs `ip link set DEV vf N ...` under strace on a veth in a throwaway namespace,
// takes the RTM_NEWLINK that ip sent from strace's hex dump and compares it with what our
// builder makes for the same link index, VF and values. The kernel refuses VF settings on a
// veth (EOPNOTSUPP); that does not matter, only the request is of interest. An independent
// parser below also checks the structure of our bytes, without libnl or the kernel's structs.
//
// Missing strace or ip is a failure, not a skip: without them the test would prove nothing.

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <optional>
#include <ostream>
#include <sched.h>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>

#include "plugin/netlink/libnl_netlink.h"
#include "plugin/netlink/vf_messages.h"
#include "iproute2_request_test.h"
#include "nl_bytes.h"
#include "support/test_netns.h"

namespace ibcni::testing {
namespace {

using namespace nlbytes;  // NOLINT(google-build-using-namespace): test-local helpers

// ---- an independent, minimal rtnetlink parser (host byte order, as netlink is) ----

// The attribute and struct layouts it assumes, written out rather than taken from libnl.
constexpr std::uint16_t kIflaVfinfoList = 22;
constexpr std::uint16_t kIflaVfInfo = 1;
constexpr std::uint16_t kIflaVfLinkState = 5;
constexpr std::uint16_t kIflaVfIbNodeGuid = 10;
constexpr std::uint16_t kIflaVfIbPortGuid = 11;
constexpr std::uint16_t kNlaFNested = 0x8000;
constexpr std::size_t kGuidPayloadLen = 16;  // u32 vf, 4 bytes padding, u64 guid
constexpr std::size_t kLinkStatePayloadLen = 8;  // u32 vf, u32 link_state
static_assert(kIflaVfinfoList == IFLA_VFINFO_LIST && kIflaVfInfo == IFLA_VF_INFO &&
              kIflaVfLinkState == IFLA_VF_LINK_STATE && kIflaVfIbNodeGuid == IFLA_VF_IB_NODE_GUID &&
              kIflaVfIbPortGuid == IFLA_VF_IB_PORT_GUID);
static_assert(sizeof(ifla_vf_guid) == kGuidPayloadLen && offsetof(ifla_vf_guid, guid) == 8);
static_assert(sizeof(ifla_vf_link_state) == kLinkStatePayloadLen);


// One per-VF setting found in an IFLA_VF_INFO.
struct VfSetting {
  std::uint16_t type = 0;
  std::uint32_t vf = 0;
  std::uint64_t value = 0;    // the GUID or the link state
  std::uint32_t padding = 0;  // the 4 padding bytes of a GUID struct
  bool operator==(const VfSetting&) const = default;
};

void PrintTo(const VfSetting& s, std::ostream* os) {
  *os << "{type " << s.type << ", vf " << s.vf << ", value 0x" << std::hex << s.value
      << ", padding 0x" << s.padding << std::dec << "}";
}

// What a VF request says: header fields and, per IFLA_VF_INFO, its settings.
struct VfRequest : LinkHeader {
  bool nestedFlags = true;  // every nest carries NLA_F_NESTED
  std::vector<std::vector<VfSetting>> entries;
};

// Walks nlmsghdr -> ifinfomsg -> IFLA_VFINFO_LIST -> IFLA_VF_INFO -> settings. Anything else
// in the message (another top-level attribute, an unknown VF attribute, a length that does
// not add up) makes it fail with a description.
std::optional<VfRequest> decode(const Bytes& b, std::string* why) {
  auto fail = [why](const std::string& text) {
    *why = text;
    return std::nullopt;
  };
  VfRequest r;
  if (!readLinkHeader(b, r, why)) {
    return std::nullopt;
  }
  auto top = attrsIn(b, kNlmsgHdrLen + kIfinfomsgLen, b.size());
  if (!top || top->size() != 1 || (*top)[0].type() != kIflaVfinfoList) {
    return fail("expected exactly one top-level attribute, IFLA_VFINFO_LIST");
  }
  const Attr& list = (*top)[0];
  r.nestedFlags = (list.rawType & kNlaFNested) != 0;
  auto infos = attrsIn(b, list.payload(), list.at + list.len);
  if (!infos || infos->empty()) {
    return fail("IFLA_VFINFO_LIST is malformed or empty");
  }
  for (const Attr& info : *infos) {
    if (info.type() != kIflaVfInfo) {
      return fail("IFLA_VFINFO_LIST holds attribute type " + std::to_string(info.type()));
    }
    r.nestedFlags = r.nestedFlags && (info.rawType & kNlaFNested) != 0;
    auto settings = attrsIn(b, info.payload(), info.at + info.len);
    if (!settings || settings->empty()) {
      return fail("IFLA_VF_INFO is malformed or empty");
    }
    std::vector<VfSetting> entry;
    for (const Attr& a : *settings) {
      VfSetting s;
      s.type = a.type();
      s.vf = load<std::uint32_t>(b, a.payload());
      if (a.type() == kIflaVfIbNodeGuid || a.type() == kIflaVfIbPortGuid) {
        if (a.len != 4 + kGuidPayloadLen) {
          return fail("GUID attribute of " + std::to_string(a.len) + " bytes");
        }
        s.padding = load<std::uint32_t>(b, a.payload() + 4);
        s.value = load<std::uint64_t>(b, a.payload() + 8);
      } else if (a.type() == kIflaVfLinkState) {
        if (a.len != 4 + kLinkStatePayloadLen) {
          return fail("IFLA_VF_LINK_STATE of " + std::to_string(a.len) + " bytes");
        }
        s.value = load<std::uint32_t>(b, a.payload() + 4);
      } else {
        return fail("unexpected VF attribute type " + std::to_string(a.type()));
      }
      entry.push_back(s);
    }
    r.entries.push_back(entry);
  }
  return r;
}

// ---- normalisations, each one explained ----


// NLA_F_NESTED on IFLA_VFINFO_LIST and IFLA_VF_INFO: libnl sets it on every nest it opens,
// iproute2 6.1's addattr_nest does not. The kernel takes both: rtnl_setlink parses the message
// with nlmsg_parse_deprecated and do_setlink each IFLA_VF_INFO with
// nla_parse_nested_deprecated (NL_VALIDATE_LIBERAL, which neither requires nor rejects the
// flag), and compares types through nla_type(), which masks it off. The flag is what the
// netlink documentation asks of new code, so ours keeps it; here it is cleared in our bytes
// before comparing (callers check first that it was set, so the rule cannot hide anything).
void clearNestedFlags(Bytes& b) {
  auto top = attrsIn(b, kNlmsgHdrLen + kIfinfomsgLen, b.size());
  ASSERT_TRUE(top.has_value());
  for (const Attr& list : *top) {
    store<std::uint16_t>(b, list.at + 2, list.rawType & ~kNlaFNested);
    auto infos = attrsIn(b, list.payload(), list.at + list.len);
    ASSERT_TRUE(infos.has_value());
    for (const Attr& info : *infos) {
      store<std::uint16_t>(b, info.at + 2, info.rawType & ~kNlaFNested);
    }
  }
}

// The 4 padding bytes of struct ifla_vf_guid in iproute2's request: iproute2 fills the struct
// on its stack without clearing it, so they hold whatever was there (the kernel never reads
// them). Ours are zero, which the callers check on our side with decode().
void clearGuidPadding(Bytes& b) {
  auto top = attrsIn(b, kNlmsgHdrLen + kIfinfomsgLen, b.size());
  ASSERT_TRUE(top.has_value());
  for (const Attr& list : *top) {
    auto infos = attrsIn(b, list.payload(), list.at + list.len);
    ASSERT_TRUE(infos.has_value());
    for (const Attr& info : *infos) {
      auto settings = attrsIn(b, info.payload(), info.at + info.len);
      ASSERT_TRUE(settings.has_value());
      for (const Attr& a : *settings) {
        if (a.type() == kIflaVfIbNodeGuid || a.type() == kIflaVfIbPortGuid) {
          store<std::uint32_t>(b, a.payload() + 4, 0);
        }
      }
    }
  }
}

// ---- running iproute2 under strace ----


// True for an RTM_NEWLINK that carries IFLA_VFINFO_LIST (ip also sends an RTM_GETLINK to look
// the device up, and a bare RTM_NEWLINK probe).
bool isVfRequest(const Bytes& b) {
  if (b.size() < kNlmsgHdrLen + kIfinfomsgLen || load<std::uint16_t>(b, 4) != RTM_NEWLINK) {
    return false;
  }
  auto top = attrsIn(b, kNlmsgHdrLen + kIfinfomsgLen, std::min<std::size_t>(b.size(), load<std::uint32_t>(b, 0)));
  return top && std::any_of(top->begin(), top->end(),
                            [](const Attr& a) { return a.type() == kIflaVfinfoList; });
}

class VfMessagesTest : public Iproute2RequestTest {
 protected:
  VfMessagesTest() : Iproute2RequestTest("vf", kDev, "vfpeer0") {}

  // The VF request that `ip link set kDev <args>` sends inside the test namespace.
  Bytes iproute2Request(const std::vector<std::string>& args) {
    std::vector<std::string> ipArgs{"link", "set", kDev};
    ipArgs.insert(ipArgs.end(), args.begin(), args.end());
    return iproute2RequestOf(ipArgs, isVfRequest, "VF request");
  }

  static constexpr const char* kDev = "vfpf0";
};


// Our request decoded, its headers checked (RTM_NEWLINK, REQUEST | ACK, the device `ifindex`); a
// failure naming why, and nullopt, when it does not decode.
std::optional<VfRequest> decodedOurs(const Bytes& ours, int ifindex) {
  std::string why;
  auto r = decode(ours, &why);
  EXPECT_TRUE(r.has_value()) << why << "\n" << hex(ours);
  if (r) {
    expectNewLinkHeader(*r, NLM_F_REQUEST | NLM_F_ACK, ifindex);
  }
  return r;
}

// Our bytes after the normalisations, checking first that ours need them.
Bytes normalisedOurs(Bytes ours) {
  std::string why;
  auto r = decode(ours, &why);
  EXPECT_TRUE(r.has_value()) << why;
  if (r) {
    EXPECT_TRUE(r->nestedFlags) << "libnl no longer sets NLA_F_NESTED: drop that normalisation";
    for (const auto& entry : r->entries) {
      for (const auto& s : entry) {
        EXPECT_EQ(s.padding, 0u) << "our GUID padding must be zero";
      }
    }
  }
  clearSeqAndPid(ours);
  clearNestedFlags(ours);
  return ours;
}

Bytes normalisedTheirs(Bytes theirs) {
  clearSeqAndPid(theirs);
  clearGuidPadding(theirs);
  return theirs;
}

struct GuidCase {
  std::uint32_t vf;
  const char* node;
  const char* port;
};

TEST_F(VfMessagesTest, SetVfGuidsIsWhatIproute2SendsOneGuidAtATime) {
  for (const GuidCase& c : {GuidCase{3, "00:11:22:33:44:55:66:77", "88:99:aa:bb:cc:dd:ee:ff"},
                            GuidCase{0, "02:c9:03:00:21:6e:70:01", "02:c9:03:00:21:6e:78:01"}}) {
    SCOPED_TRACE("vf " + std::to_string(c.vf) + " node " + c.node + " port " + c.port);
    const net::Guid node = *net::Guid::parse(c.node);
    const net::Guid port = *net::Guid::parse(c.port);
    const Bytes ours = nl::buildSetVfGuids(index_, c.vf, node, port);
    ASSERT_FALSE(ours.empty());

    // Independent look at ours: one IFLA_VFINFO_LIST, two IFLA_VF_INFO, node then port.
    const auto r = decodedOurs(ours, index_);
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(r->entries.size(), 2u);
    EXPECT_EQ(r->entries[0], (std::vector<VfSetting>{{kIflaVfIbNodeGuid, c.vf, node.value, 0}}));
    EXPECT_EQ(r->entries[1], (std::vector<VfSetting>{{kIflaVfIbPortGuid, c.vf, port.value, 0}}));

    // iproute2 sends each GUID alone with `vf N node_guid G` / `vf N port_guid G`. Ours must be
    // the first of those requests with the second one's IFLA_VF_INFO appended to its list.
    const std::string vf = std::to_string(c.vf);
    Bytes nodeOnly = normalisedTheirs(iproute2Request({"vf", vf, "node_guid", c.node}));
    Bytes portOnly = normalisedTheirs(iproute2Request({"vf", vf, "port_guid", c.port}));
    ASSERT_FALSE(nodeOnly.empty() || portOnly.empty());
    auto portTop = attrsIn(portOnly, kNlmsgHdrLen + kIfinfomsgLen, portOnly.size());
    ASSERT_TRUE(portTop && portTop->size() == 1);
    const Attr& portList = (*portTop)[0];
    Bytes expected = nodeOnly;
    expected.insert(expected.end(), portOnly.begin() + static_cast<long>(portList.payload()),
                    portOnly.begin() + static_cast<long>(portList.at + portList.len));
    const std::size_t added = portList.len - 4;
    store<std::uint32_t>(expected, 0, static_cast<std::uint32_t>(expected.size()));
    const std::size_t listAt = kNlmsgHdrLen + kIfinfomsgLen;
    store<std::uint16_t>(expected, listAt,
                         static_cast<std::uint16_t>(load<std::uint16_t>(expected, listAt) + added));
    const Bytes mine = normalisedOurs(ours);
    EXPECT_EQ(mine, expected) << "ours:\n" << hex(mine) << "\niproute2 (spliced):\n" << hex(expected);

    // With both GUIDs in one command, iproute2 puts them into a single IFLA_VF_INFO, of which
    // the kernel's do_setvfinfo() applies only the node GUID (it returns after it). Same
    // settings as ours, but one entry instead of two: that difference is deliberate.
    Bytes both = iproute2Request({"vf", vf, "node_guid", c.node, "port_guid", c.port});
    ASSERT_FALSE(both.empty());
    std::string why;
    auto theirs = decode(normalisedTheirs(both), &why);
    ASSERT_TRUE(theirs.has_value()) << why;
    ASSERT_EQ(theirs->entries.size(), 1u);
    EXPECT_EQ(theirs->entries[0],
              (std::vector<VfSetting>{{kIflaVfIbNodeGuid, c.vf, node.value, 0},
                                      {kIflaVfIbPortGuid, c.vf, port.value, 0}}));
  }
}

TEST_F(VfMessagesTest, SetVfLinkStateIsWhatIproute2Sends) {
  struct StateCase {
    nl::VfLinkState state;
    const char* word;
    std::uint32_t value;
  };
  for (std::uint32_t vf : {3u, 0u}) {
    for (const StateCase& c : {StateCase{nl::VfLinkState::kAuto, "auto", 0},
                               StateCase{nl::VfLinkState::kEnable, "enable", 1},
                               StateCase{nl::VfLinkState::kDisable, "disable", 2}}) {
      SCOPED_TRACE("vf " + std::to_string(vf) + " state " + c.word);
      const Bytes ours = nl::buildSetVfLinkState(index_, vf, c.state);
      ASSERT_FALSE(ours.empty());

      const auto r = decodedOurs(ours, index_);
      ASSERT_TRUE(r.has_value());
      ASSERT_EQ(r->entries.size(), 1u);
      EXPECT_EQ(r->entries[0], (std::vector<VfSetting>{{kIflaVfLinkState, vf, c.value, 0}}));

      const Bytes theirs =
          normalisedTheirs(iproute2Request({"vf", std::to_string(vf), "state", c.word}));
      ASSERT_FALSE(theirs.empty());
      const Bytes mine = normalisedOurs(ours);
      EXPECT_EQ(mine, theirs) << "ours:\n" << hex(mine) << "\niproute2:\n" << hex(theirs);
    }
  }
}

// The parser must not accept what it should not: a truncated list and a stray attribute.
TEST(VfMessagesDecode, RejectsMalformedRequests) {
  const Bytes good = nl::buildSetVfLinkState(5, 1, nl::VfLinkState::kEnable);
  std::string why;
  ASSERT_TRUE(decode(good, &why).has_value()) << why;
  Bytes truncated(good.begin(), good.end() - 4);
  store<std::uint32_t>(truncated, 0, static_cast<std::uint32_t>(truncated.size()));
  EXPECT_FALSE(decode(truncated, &why).has_value());
  Bytes extra = good;
  for (std::uint8_t b : {8, 0, 4, 0, 0xdc, 5, 0, 0}) {  // IFLA_MTU 1500
    extra.push_back(b);
  }
  store<std::uint32_t>(extra, 0, static_cast<std::uint32_t>(extra.size()));
  EXPECT_FALSE(decode(extra, &why).has_value());
}

}  // namespace
}  // namespace ibcni::testing
