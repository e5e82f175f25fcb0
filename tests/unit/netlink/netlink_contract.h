// SPDX-License-Identifier: Apache-2.0
// Longer than 600 lines on purpose: the one contract LibnlNetlink and FakeNetlink must both meet, so that
// the two stay the same; split, the cases could drift apart.
#pragma once

// The nl::Netlink contract: one set of type-parameterized cases that every implementation must
// pass. netlink_real_test.cpp instantiates it for LibnlNetlink on real namespaces (label netns),
// netlink_fake_test.cpp for FakeNetlink (label unit), so the fake stays true to the kernel.
//
// A Backend provides:
//   os::SysResult<void> setUp();                 // EPERM/EACCES: the case is skipped
//   nl::Netlink& netlink();
//   const os::Netns& ns(int i);                  // i = 0, 1, 2: fresh namespaces, only "lo"
//   os::SysResult<void> addVeth(const os::Netns& a, const std::string& nameA,
//                               const os::Netns& b, const std::string& nameB);
//   bool renameUpAllowed();                      // Linux >= 6.2 renames up links

#include <algorithm>
#include <cerrno>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ibcni/net/ip.h"
#include "ibcni/netlink/netlink.h"
#include "ibcni/os/netns.h"
#include "ibcni/os/sys_error.h"
#include "support/test_netns.h"

namespace ibcni::testing::contract {

inline net::IpPrefix pfx(const char* text) { return *net::IpPrefix::parse(text); }
inline net::IpAddress ip(const char* text) { return *net::IpAddress::parse(text); }

/// Builds an nl::Route step by step: route("10.2.0.0/16").via("10.1.0.1").dev(3).metric(5).
/// (GCC 12 warns about designated initializers that leave fields out.)
class RouteSpec {
 public:
  explicit RouteSpec(const char* dst) { r_.dst = pfx(dst); }
  RouteSpec& via(const char* gw) {
    r_.gw = ip(gw);
    return *this;
  }
  RouteSpec& dev(int index) {
    r_.ifIndex = index;
    return *this;
  }
  RouteSpec& table(std::uint32_t t) {
    r_.table = t;
    return *this;
  }
  RouteSpec& metric(std::uint32_t p) {
    r_.priority = p;
    return *this;
  }
  RouteSpec& scope(std::uint32_t s) {
    r_.scope = s;
    return *this;
  }
  RouteSpec& mtu(std::uint32_t m) {
    r_.mtu = m;
    return *this;
  }
  RouteSpec& advmss(std::uint32_t m) {
    r_.advmss = m;
    return *this;
  }
  operator nl::Route() const { return r_; }  // NOLINT(google-explicit-constructor)

 private:
  nl::Route r_;
};

inline RouteSpec route(const char* dst) { return RouteSpec(dst); }

/// Every field, unset ones as "-", so that a mismatch shows the whole route.
inline std::string routeText(const nl::Route& r) {
  auto opt = [](const std::optional<std::uint32_t>& v) {
    return v ? std::to_string(*v) : std::string("-");
  };
  return r.dst.toString() + " via " + (r.gw ? r.gw->toString() : "-") + " dev " +
         std::to_string(r.ifIndex) + " table " + opt(r.table) + " metric " + opt(r.priority) +
         " scope " + opt(r.scope) + " mtu " + opt(r.mtu) + " advmss " + opt(r.advmss);
}

inline std::vector<std::string> routeTexts(const std::vector<nl::Route>& routes) {
  std::vector<std::string> out;
  for (const auto& r : routes) {
    out.push_back(routeText(r));
  }
  return out;
}

inline std::vector<std::string> addressTexts(const std::vector<nl::Address>& addrs) {
  std::vector<std::string> out;
  for (const auto& a : addrs) {
    out.push_back(std::to_string(a.ifIndex) + " " + a.prefix.toString());
  }
  return out;
}

/// A route as listRoutes reports it.
inline nl::Route listed(const char* dst, std::optional<const char*> gw, int dev,
                        std::uint32_t table, std::optional<std::uint32_t> priority,
                        std::uint32_t scope, std::optional<std::uint32_t> mtu = std::nullopt,
                        std::optional<std::uint32_t> advmss = std::nullopt) {
  nl::Route r;
  r.dst = pfx(dst);
  if (gw) {
    r.gw = ip(*gw);
  }
  r.ifIndex = dev;
  r.table = table;
  r.priority = priority;
  r.scope = scope;
  r.mtu = mtu;
  r.advmss = advmss;
  return r;
}

constexpr std::uint32_t kMain = 254;
constexpr std::uint32_t kUniverse = 0;
constexpr std::uint32_t kLink = 253;

}  // namespace ibcni::testing::contract

/// Asserts that a SysResult holds a value, printing the error otherwise.
#define IBCNI_ASSERT_OK(expr)                                                            \
  do {                                                                                   \
    const auto& ibcniRes_ = (expr);                                                      \
    ASSERT_TRUE(ibcniRes_.has_value()) << #expr << ": " << ibcniRes_.error().describe(); \
  } while (0)

#define IBCNI_EXPECT_OK(expr)                                                            \
  do {                                                                                   \
    const auto& ibcniRes_ = (expr);                                                      \
    EXPECT_TRUE(ibcniRes_.has_value()) << #expr << ": " << ibcniRes_.error().describe(); \
  } while (0)

/// Expects a SysResult to hold an error with errno `errnum` (compared by name: "EEXIST").
#define IBCNI_EXPECT_ERRNO(expr, errnum)                                                       \
  do {                                                                                         \
    const auto& ibcniRes_ = (expr);                                                            \
    if (ibcniRes_.has_value()) {                                                               \
      ADD_FAILURE() << #expr << " succeeded, expected " << ::ibcni::os::errnoName(errnum);     \
    } else {                                                                                   \
      EXPECT_EQ(::ibcni::os::errnoName(ibcniRes_.error().err), ::ibcni::os::errnoName(errnum)) \
          << ibcniRes_.error().describe();                                                     \
    }                                                                                          \
  } while (0)

namespace ibcni::testing {

template <class Backend>
class NetlinkContract : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ready = backend_.setUp();
    if (!ready) {
      if (isPermissionError(ready.error())) {
        GTEST_SKIP() << "network namespaces are not available to this process (needs root): "
                     << ready.error().describe();
      }
      FAIL() << ready.error().describe();
    }
  }

  nl::Netlink& nl() { return backend_.netlink(); }
  const os::Netns& ns(int i) { return backend_.ns(i); }

  /// Creates a veth pair, `name` (random when empty) in `a` and its peer in `b`, and returns the
  /// link in `a`; index 0 (and a recorded failure) when that did not work.
  nl::Link veth(const os::Netns& a, const os::Netns& b, std::string name = {},
                std::string* peerName = nullptr) {
    if (name.empty()) {
      name = randomIfName("ct");
    }
    const std::string peer = randomIfName("cp");
    if (peerName != nullptr) {
      *peerName = peer;
    }
    auto made = backend_.addVeth(a, name, b, peer);
    if (!made) {
      ADD_FAILURE() << made.error().describe();
      return {};
    }
    auto link = nl().linkByName(a, name);
    if (!link) {
      ADD_FAILURE() << link.error().describe();
      return {};
    }
    return *link;
  }

  /// A veth end in ns(0) (peer in ns(1)), set up, with `v4` and `v6` assigned.
  nl::Link upLink(const char* v4 = "10.1.0.2/24", const char* v6 = "fd00:1::2/64") {
    nl::Link link = veth(ns(0), ns(1));
    if (link.index == 0) {
      return link;
    }
    auto up = nl().setLinkUp(ns(0), link.index, true);
    if (!up) {
      ADD_FAILURE() << up.error().describe();
    }
    for (const char* a : {v4, v6}) {
      if (a == nullptr) {
        continue;
      }
      if (auto added = nl().addAddress(ns(0), link.index, contract::pfx(a)); !added) {
        ADD_FAILURE() << added.error().describe();
      }
    }
    return link;
  }

  std::vector<std::string> routesOf(const os::Netns& where, int index) {
    auto routes = nl().listRoutes(where, index);
    if (!routes) {
      ADD_FAILURE() << routes.error().describe();
      return {};
    }
    return contract::routeTexts(*routes);
  }

  std::vector<std::string> addressesOf(const os::Netns& where, int index) {
    auto addrs = nl().listAddresses(where, index);
    if (!addrs) {
      ADD_FAILURE() << addrs.error().describe();
      return {};
    }
    return contract::addressTexts(*addrs);
  }

  Backend backend_;
};

TYPED_TEST_SUITE_P(NetlinkContract);

using contract::ip;
using contract::kLink;
using contract::kMain;
using contract::kUniverse;
using contract::listed;
using contract::pfx;
using contract::route;
using contract::routeText;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

// ---- links ----

TYPED_TEST_P(NetlinkContract, LinkByNameAndByIndexReturnTheLink) {
  nl::Link link = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(link.index, 0);
  EXPECT_EQ(link.kind, "veth");
  EXPECT_EQ(link.arpType, 1);  // ARPHRD_ETHER
  EXPECT_EQ(link.mtu, 1500u);
  EXPECT_FALSE(link.adminUp);
  EXPECT_EQ(link.mac.length, 6u);
  EXPECT_EQ(link.alias, "");

  auto byIndex = this->nl().linkByIndex(this->ns(0), link.index);
  IBCNI_ASSERT_OK(byIndex);
  EXPECT_EQ(byIndex->name, link.name);
  EXPECT_EQ(byIndex->mac, link.mac);
}

TYPED_TEST_P(NetlinkContract, MissingLinkIsEnodev) {
  IBCNI_EXPECT_ERRNO(this->nl().linkByName(this->ns(0), randomIfName("no")), ENODEV);
  IBCNI_EXPECT_ERRNO(this->nl().linkByName(this->ns(0), ""), ENODEV);
  IBCNI_EXPECT_ERRNO(this->nl().linkByName(this->ns(0), "name-longer-than-15"), ENODEV);
  IBCNI_EXPECT_ERRNO(this->nl().linkByIndex(this->ns(0), 9999), ENODEV);
  IBCNI_EXPECT_ERRNO(this->nl().linkByIndex(this->ns(0), 0), ENODEV);
  IBCNI_EXPECT_ERRNO(this->nl().setLinkUp(this->ns(0), 9999, true), ENODEV);
  IBCNI_EXPECT_ERRNO(this->nl().renameLink(this->ns(0), 9999, "x"), ENODEV);
  IBCNI_EXPECT_ERRNO(this->nl().setMtu(this->ns(0), 9999, 1400), ENODEV);
  IBCNI_EXPECT_ERRNO(this->nl().setAlias(this->ns(0), 9999, "a"), ENODEV);
  IBCNI_EXPECT_ERRNO(
      this->nl().setHwAddress(this->ns(0), 9999, *net::HwAddress::parse("02:00:00:00:00:01")),
      ENODEV);
  IBCNI_EXPECT_ERRNO(this->nl().moveLink(this->ns(0), 9999, this->ns(1)), ENODEV);
}

TYPED_TEST_P(NetlinkContract, ErrorsNameTheOperationAndNamespace) {
  auto missing = this->nl().setMtu(this->ns(0), 9999, 1400);
  ASSERT_FALSE(missing.has_value());
  EXPECT_THAT(missing.error().op, HasSubstr("9999"));
  EXPECT_THAT(missing.error().op, HasSubstr(this->ns(0).path()));
}

TYPED_TEST_P(NetlinkContract, FreshNamespaceHasOnlyDownLoopback) {
  auto lo = this->nl().linkByName(this->ns(2), "lo");
  IBCNI_ASSERT_OK(lo);
  EXPECT_EQ(lo->index, 1);
  EXPECT_EQ(lo->arpType, 772);  // ARPHRD_LOOPBACK
  EXPECT_FALSE(lo->adminUp);
  EXPECT_EQ(lo->mtu, 65536u);
  EXPECT_EQ(lo->kind, "");
  IBCNI_EXPECT_ERRNO(this->nl().linkByIndex(this->ns(2), 2), ENODEV);
  EXPECT_THAT(this->addressesOf(this->ns(2), 1), IsEmpty());
  EXPECT_THAT(this->routesOf(this->ns(2), 0), IsEmpty());
}

TYPED_TEST_P(NetlinkContract, SetLinkUpAndDown) {
  nl::Link link = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(link.index, 0);
  IBCNI_ASSERT_OK(this->nl().setLinkUp(this->ns(0), link.index, true));
  auto up = this->nl().linkByIndex(this->ns(0), link.index);
  IBCNI_ASSERT_OK(up);
  EXPECT_TRUE(up->adminUp);
  IBCNI_EXPECT_OK(this->nl().setLinkUp(this->ns(0), link.index, true));  // already up: no-op
  IBCNI_ASSERT_OK(this->nl().setLinkUp(this->ns(0), link.index, false));
  auto down = this->nl().linkByIndex(this->ns(0), link.index);
  IBCNI_ASSERT_OK(down);
  EXPECT_FALSE(down->adminUp);
}

TYPED_TEST_P(NetlinkContract, RenameDownLink) {
  nl::Link link = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(link.index, 0);
  const std::string newName = randomIfName("rn");
  IBCNI_ASSERT_OK(this->nl().renameLink(this->ns(0), link.index, newName));
  auto renamed = this->nl().linkByName(this->ns(0), newName);
  IBCNI_ASSERT_OK(renamed);
  EXPECT_EQ(renamed->index, link.index);
  IBCNI_EXPECT_ERRNO(this->nl().linkByName(this->ns(0), link.name), ENODEV);
  IBCNI_EXPECT_OK(this->nl().renameLink(this->ns(0), link.index, newName));  // same name: no-op
}

TYPED_TEST_P(NetlinkContract, RenameToTakenNameIsEexist) {
  std::string peer;
  nl::Link link = this->veth(this->ns(0), this->ns(0), {}, &peer);  // both ends in ns(0)
  ASSERT_GT(link.index, 0);
  IBCNI_EXPECT_ERRNO(this->nl().renameLink(this->ns(0), link.index, peer), EEXIST);
  IBCNI_EXPECT_ERRNO(this->nl().renameLink(this->ns(0), link.index, "lo"), EEXIST);
  auto same = this->nl().linkByIndex(this->ns(0), link.index);
  IBCNI_ASSERT_OK(same);
  EXPECT_EQ(same->name, link.name);
}

TYPED_TEST_P(NetlinkContract, RenameUpLinkFollowsTheKernelVersion) {
  nl::Link link = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(link.index, 0);
  IBCNI_ASSERT_OK(this->nl().setLinkUp(this->ns(0), link.index, true));
  const std::string newName = randomIfName("up");
  auto renamed = this->nl().renameLink(this->ns(0), link.index, newName);
  auto now = this->nl().linkByIndex(this->ns(0), link.index);
  IBCNI_ASSERT_OK(now);
  if (this->backend_.renameUpAllowed()) {
    // Linux 6.2 (commit bd039b5ea2a9, "Allow live renaming when an interface is up").
    IBCNI_EXPECT_OK(renamed);
    EXPECT_EQ(now->name, newName);
    EXPECT_TRUE(now->adminUp);
  } else {
    IBCNI_EXPECT_ERRNO(renamed, EBUSY);
    EXPECT_EQ(now->name, link.name);
  }
}

TYPED_TEST_P(NetlinkContract, RenameRejectsInvalidNames) {
  nl::Link link = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(link.index, 0);
  IBCNI_EXPECT_ERRNO(this->nl().renameLink(this->ns(0), link.index, "name-longer-than-15"), EINVAL);
  IBCNI_EXPECT_ERRNO(this->nl().renameLink(this->ns(0), link.index, ""), EINVAL);
  IBCNI_EXPECT_ERRNO(this->nl().renameLink(this->ns(0), link.index, "a/b"), EINVAL);
  auto same = this->nl().linkByIndex(this->ns(0), link.index);
  IBCNI_ASSERT_OK(same);
  EXPECT_EQ(same->name, link.name);
}

TYPED_TEST_P(NetlinkContract, SetMtuWithinAndOutsideTheDeviceRange) {
  nl::Link link = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(link.index, 0);
  IBCNI_ASSERT_OK(this->nl().setMtu(this->ns(0), link.index, 9000));
  EXPECT_EQ(this->nl().linkByIndex(this->ns(0), link.index)->mtu, 9000u);

  // veth accepts 68..65535; the kernel explains the refusal in its extended ACK.
  for (std::uint32_t bad : {67u, 65536u, 0x80000000u}) {
    auto res = this->nl().setMtu(this->ns(0), link.index, bad);
    ASSERT_FALSE(res.has_value()) << bad;
    EXPECT_EQ(os::errnoName(res.error().err), "EINVAL") << res.error().describe();
    EXPECT_THAT(res.error().extAck, HasSubstr("mtu")) << bad;
  }
  EXPECT_EQ(this->nl().linkByIndex(this->ns(0), link.index)->mtu, 9000u);
}

TYPED_TEST_P(NetlinkContract, SetAndClearAlias) {
  nl::Link link = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(link.index, 0);
  IBCNI_ASSERT_OK(this->nl().setAlias(this->ns(0), link.index, "ibcni:orig=ib0"));
  EXPECT_EQ(this->nl().linkByIndex(this->ns(0), link.index)->alias, "ibcni:orig=ib0");
  IBCNI_ASSERT_OK(this->nl().setAlias(this->ns(0), link.index, ""));
  EXPECT_EQ(this->nl().linkByIndex(this->ns(0), link.index)->alias, "");

  const std::string longest(255, 'a');
  IBCNI_ASSERT_OK(this->nl().setAlias(this->ns(0), link.index, longest));
  EXPECT_EQ(this->nl().linkByIndex(this->ns(0), link.index)->alias, longest);
  IBCNI_EXPECT_ERRNO(this->nl().setAlias(this->ns(0), link.index, std::string(256, 'a')), ERANGE);
  EXPECT_EQ(this->nl().linkByIndex(this->ns(0), link.index)->alias, longest);
}

TYPED_TEST_P(NetlinkContract, SetHwAddress) {
  nl::Link link = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(link.index, 0);
  auto mac = *net::HwAddress::parse("02:11:22:33:44:55");
  IBCNI_ASSERT_OK(this->nl().setHwAddress(this->ns(0), link.index, mac));
  EXPECT_EQ(this->nl().linkByIndex(this->ns(0), link.index)->mac, mac);

  // veth changes its address while up (IFF_LIVE_ADDR_CHANGE).
  IBCNI_ASSERT_OK(this->nl().setLinkUp(this->ns(0), link.index, true));
  auto mac2 = *net::HwAddress::parse("02:11:22:33:44:66");
  IBCNI_ASSERT_OK(this->nl().setHwAddress(this->ns(0), link.index, mac2));
  EXPECT_EQ(this->nl().linkByIndex(this->ns(0), link.index)->mac, mac2);

  IBCNI_EXPECT_ERRNO(
      this->nl().setHwAddress(this->ns(0), link.index, *net::HwAddress::parse("03:11:22:33:44:55")),
      EADDRNOTAVAIL);  // multicast
  IBCNI_EXPECT_ERRNO(
      this->nl().setHwAddress(this->ns(0), link.index, *net::HwAddress::parse("00:00:00:00:00:00")),
      EADDRNOTAVAIL);
  IBCNI_EXPECT_ERRNO(
      this->nl().setHwAddress(this->ns(0), link.index, *net::HwAddress::parse("02:11:22")),
      EINVAL);  // shorter than the device's 6 bytes
  EXPECT_EQ(this->nl().linkByIndex(this->ns(0), link.index)->mac, mac2);
}

// ---- moving links between namespaces ----

TYPED_TEST_P(NetlinkContract, MoveLinkKeepsNameIndexMtuAndAlias) {
  nl::Link link = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(link.index, 0);
  IBCNI_ASSERT_OK(this->nl().setMtu(this->ns(0), link.index, 2000));
  IBCNI_ASSERT_OK(this->nl().setAlias(this->ns(0), link.index, "kept"));
  IBCNI_ASSERT_OK(this->nl().moveLink(this->ns(0), link.index, this->ns(2)));

  IBCNI_EXPECT_ERRNO(this->nl().linkByName(this->ns(0), link.name), ENODEV);
  auto moved = this->nl().linkByName(this->ns(2), link.name);
  IBCNI_ASSERT_OK(moved);
  EXPECT_EQ(moved->index, link.index);  // free in the target, so kept
  EXPECT_EQ(moved->mtu, 2000u);
  EXPECT_EQ(moved->alias, "kept");
  EXPECT_EQ(moved->mac, link.mac);
  EXPECT_FALSE(moved->adminUp);
}

TYPED_TEST_P(NetlinkContract, MoveLinkGetsANewIndexWhenItsIndexIsTaken) {
  nl::Link link = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(link.index, 0);
  ASSERT_EQ(link.index, 2);
  nl::Link other = this->veth(this->ns(2), this->ns(2));  // indexes 2 and 3 in ns(2)
  ASSERT_GT(other.index, 0);
  IBCNI_ASSERT_OK(this->nl().moveLink(this->ns(0), link.index, this->ns(2)));
  auto moved = this->nl().linkByName(this->ns(2), link.name);
  IBCNI_ASSERT_OK(moved);
  EXPECT_EQ(moved->index, 4);  // the next index of ns(2)
}

TYPED_TEST_P(NetlinkContract, MoveLinkWhoseNameIsTakenInTheTargetIsEexist) {
  nl::Link link = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(link.index, 0);
  nl::Link clash = this->veth(this->ns(2), this->ns(1), link.name);
  ASSERT_GT(clash.index, 0);
  auto res = this->nl().moveLink(this->ns(0), link.index, this->ns(2));
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(os::errnoName(res.error().err), "EEXIST") << res.error().describe();
  EXPECT_THAT(res.error().extAck, HasSubstr("same name"));
  auto still = this->nl().linkByName(this->ns(0), link.name);
  IBCNI_ASSERT_OK(still);
  EXPECT_EQ(still->index, link.index);
}

TYPED_TEST_P(NetlinkContract, MoveLinkDropsAddressesAndRoutesAndSetsItDown) {
  nl::Link link = this->upLink();
  ASSERT_GT(link.index, 0);
  nl::Route viaGw = route("10.2.0.0/16").via("10.1.0.1").dev(link.index);
  IBCNI_ASSERT_OK(this->nl().addRoute(this->ns(0), viaGw));
  ASSERT_THAT(this->routesOf(this->ns(0), link.index), Not(IsEmpty()));

  IBCNI_ASSERT_OK(this->nl().moveLink(this->ns(0), link.index, this->ns(2)));
  EXPECT_THAT(this->routesOf(this->ns(0), 0), IsEmpty());
  auto moved = this->nl().linkByName(this->ns(2), link.name);
  IBCNI_ASSERT_OK(moved);
  EXPECT_FALSE(moved->adminUp);
  EXPECT_THAT(this->addressesOf(this->ns(2), moved->index), IsEmpty());
  EXPECT_THAT(this->routesOf(this->ns(2), 0), IsEmpty());
}

TYPED_TEST_P(NetlinkContract, MoveLinkIntoItsOwnNamespaceChangesNothing) {
  nl::Link link = this->upLink();
  ASSERT_GT(link.index, 0);
  const auto before = this->addressesOf(this->ns(0), link.index);
  IBCNI_ASSERT_OK(this->nl().moveLink(this->ns(0), link.index, this->ns(0)));
  auto same = this->nl().linkByIndex(this->ns(0), link.index);
  IBCNI_ASSERT_OK(same);
  EXPECT_TRUE(same->adminUp);
  EXPECT_EQ(this->addressesOf(this->ns(0), link.index), before);
}

TYPED_TEST_P(NetlinkContract, LoopbackCannotMove) {
  auto res = this->nl().moveLink(this->ns(0), 1, this->ns(1));
  ASSERT_FALSE(res.has_value());
  EXPECT_EQ(os::errnoName(res.error().err), "EINVAL") << res.error().describe();
  EXPECT_THAT(res.error().extAck, Not(IsEmpty()));
}

// ---- addresses ----

TYPED_TEST_P(NetlinkContract, AddListAndDeleteAddresses) {
  nl::Link link = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(link.index, 0);
  const std::string idx = std::to_string(link.index);
  IBCNI_ASSERT_OK(this->nl().addAddress(this->ns(0), link.index, pfx("10.1.0.2/24")));
  IBCNI_ASSERT_OK(this->nl().addAddress(this->ns(0), link.index, pfx("fd00:1::2/64")));
  EXPECT_THAT(this->addressesOf(this->ns(0), link.index),
              UnorderedElementsAre(idx + " 10.1.0.2/24", idx + " fd00:1::2/64"));

  for (const char* dup : {"10.1.0.2/24", "fd00:1::2/64", "fd00:1::2/56"}) {
    auto res = this->nl().addAddress(this->ns(0), link.index, pfx(dup));
    ASSERT_FALSE(res.has_value()) << dup;
    EXPECT_EQ(os::errnoName(res.error().err), "EEXIST") << res.error().describe();
    EXPECT_THAT(res.error().extAck, HasSubstr("already assigned"));
  }

  IBCNI_ASSERT_OK(this->nl().deleteAddress(this->ns(0), link.index, pfx("10.1.0.2/24")));
  EXPECT_THAT(this->addressesOf(this->ns(0), link.index),
              UnorderedElementsAre(idx + " fd00:1::2/64"));
  IBCNI_EXPECT_ERRNO(this->nl().deleteAddress(this->ns(0), link.index, pfx("10.1.0.2/24")),
                     EADDRNOTAVAIL);
  IBCNI_EXPECT_ERRNO(this->nl().deleteAddress(this->ns(0), link.index, pfx("fd00:1::2/60")),
                     EADDRNOTAVAIL);  // the prefix length must match
  IBCNI_ASSERT_OK(this->nl().deleteAddress(this->ns(0), link.index, pfx("fd00:1::2/64")));
  EXPECT_THAT(this->addressesOf(this->ns(0), link.index), IsEmpty());
}

TYPED_TEST_P(NetlinkContract, AddressesOfMissingLinkAreEnodev) {
  for (const char* a : {"10.1.0.2/24", "fd00::2/64"}) {
    auto res = this->nl().addAddress(this->ns(0), 9999, pfx(a));
    ASSERT_FALSE(res.has_value());
    EXPECT_EQ(os::errnoName(res.error().err), "ENODEV") << res.error().describe();
    EXPECT_THAT(res.error().extAck, HasSubstr(a[0] == '1' ? "ipv4" : "ipv6"));
  }
  IBCNI_EXPECT_ERRNO(this->nl().listAddresses(this->ns(0), 9999), ENODEV);
  IBCNI_EXPECT_ERRNO(this->nl().addAddress(this->ns(0), 9999, pfx("10.1.0.2/24")), ENODEV);
  IBCNI_EXPECT_ERRNO(this->nl().addAddress(this->ns(0), 9999, pfx("fd00::2/64")), ENODEV);
  IBCNI_EXPECT_ERRNO(this->nl().deleteAddress(this->ns(0), 9999, pfx("10.1.0.2/24")), ENODEV);
  IBCNI_EXPECT_ERRNO(this->nl().deleteAddress(this->ns(0), 9999, pfx("fd00::2/64")), ENODEV);
}

TYPED_TEST_P(NetlinkContract, SameIpv4AddressWithAnotherPrefixLengthIsASecondAddress) {
  nl::Link link = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(link.index, 0);
  IBCNI_ASSERT_OK(this->nl().addAddress(this->ns(0), link.index, pfx("10.1.0.2/24")));
  IBCNI_ASSERT_OK(this->nl().addAddress(this->ns(0), link.index, pfx("10.1.0.2/16")));
  EXPECT_EQ(this->addressesOf(this->ns(0), link.index).size(), 2u);
}

TYPED_TEST_P(NetlinkContract, DeletingAnIpv4PrimaryDeletesItsSecondaries) {
  nl::Link link = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(link.index, 0);
  const std::string idx = std::to_string(link.index);
  for (const char* a : {"10.1.0.1/24", "10.1.0.2/24", "10.7.0.1/24"}) {
    IBCNI_ASSERT_OK(this->nl().addAddress(this->ns(0), link.index, pfx(a)));
  }
  IBCNI_ASSERT_OK(this->nl().deleteAddress(this->ns(0), link.index, pfx("10.1.0.1/24")));
  EXPECT_THAT(this->addressesOf(this->ns(0), link.index),
              UnorderedElementsAre(idx + " 10.7.0.1/24"));
}

TYPED_TEST_P(NetlinkContract, Ipv6AddressesGoWhenTheLinkGoesDown) {
  nl::Link link = this->upLink();
  ASSERT_GT(link.index, 0);
  IBCNI_ASSERT_OK(this->nl().setLinkUp(this->ns(0), link.index, false));
  EXPECT_THAT(this->addressesOf(this->ns(0), link.index),
              UnorderedElementsAre(std::to_string(link.index) + " 10.1.0.2/24"));
}

TYPED_TEST_P(NetlinkContract, MtuBelow1280DisablesIpv6) {
  nl::Link link = this->upLink();
  ASSERT_GT(link.index, 0);
  IBCNI_ASSERT_OK(this->nl().setMtu(this->ns(0), link.index, 1200));
  EXPECT_THAT(this->addressesOf(this->ns(0), link.index),
              UnorderedElementsAre(std::to_string(link.index) + " 10.1.0.2/24"));
  IBCNI_EXPECT_ERRNO(this->nl().addAddress(this->ns(0), link.index, pfx("fd00:9::1/64")), EINVAL);
  IBCNI_EXPECT_ERRNO(this->nl().deleteAddress(this->ns(0), link.index, pfx("fd00:1::2/64")),
                     ENXIO);  // "IPv6 is disabled on this device"
  IBCNI_EXPECT_ERRNO(this->nl().addRoute(this->ns(0), route("fd00:9::/64").dev(link.index)),
                     ENODEV);
  IBCNI_EXPECT_OK(this->nl().addAddress(this->ns(0), link.index, pfx("10.9.0.1/24")));
  // IPv6 works again once the MTU is back.
  IBCNI_ASSERT_OK(this->nl().setMtu(this->ns(0), link.index, 1500));
  IBCNI_EXPECT_OK(this->nl().addAddress(this->ns(0), link.index, pfx("fd00:9::1/64")));
}

TYPED_TEST_P(NetlinkContract, LoopbackUpGetsLoopbackAddressesButNoUnicastRoutes) {
  IBCNI_ASSERT_OK(this->nl().setLinkUp(this->ns(0), 1, true));
  EXPECT_THAT(this->addressesOf(this->ns(0), 1),
              UnorderedElementsAre("1 127.0.0.1/8", "1 ::1/128"));
  EXPECT_THAT(this->routesOf(this->ns(0), 0), IsEmpty());
  IBCNI_ASSERT_OK(this->nl().setLinkUp(this->ns(0), 1, false));
  EXPECT_THAT(this->addressesOf(this->ns(0), 1), UnorderedElementsAre("1 127.0.0.1/8"));
}

// ---- policy routing rules ----

TYPED_TEST_P(NetlinkContract, RulesAreAddedListedAndDeletedPerNamespace) {
  auto rules = [this](const os::Netns& where) {
    std::vector<std::string> out;
    auto listed = this->nl().listRules(where);
    if (!listed) {
      ADD_FAILURE() << listed.error().describe();
      return out;
    }
    for (const auto& r : *listed) {
      out.push_back(nl::describe(r));
    }
    return out;
  };
  EXPECT_THAT(rules(this->ns(0)), IsEmpty()) << "the kernel's own rules select no source";
  const nl::Rule a{pfx("10.1.0.5/32"), 101, 1001};
  const nl::Rule b{pfx("10.1.0.6/32"), 102, 1000};
  const nl::Rule v6{pfx("fd00:1::5/128"), 101, 1001};
  for (const auto& r : {a, b, v6}) {
    IBCNI_ASSERT_OK(this->nl().addRule(this->ns(0), r));
  }
  EXPECT_THAT(rules(this->ns(0)),
              UnorderedElementsAre("from 10.1.0.5/32 lookup 101 pref 1001", "from 10.1.0.6/32 lookup 102 pref 1000",
                                   "from fd00:1::5/128 lookup 101 pref 1001"));
  EXPECT_THAT(rules(this->ns(1)), IsEmpty());
  IBCNI_EXPECT_ERRNO(this->nl().addRule(this->ns(0), a), EEXIST);
  IBCNI_ASSERT_OK(this->nl().deleteRule(this->ns(0), a));
  IBCNI_EXPECT_ERRNO(this->nl().deleteRule(this->ns(0), a), ENOENT);
  IBCNI_EXPECT_ERRNO(this->nl().deleteRule(this->ns(1), b), ENOENT);
  EXPECT_THAT(rules(this->ns(0)),
              UnorderedElementsAre("from 10.1.0.6/32 lookup 102 pref 1000", "from fd00:1::5/128 lookup 101 pref 1001"));
  IBCNI_EXPECT_ERRNO(this->nl().addRule(this->ns(0), nl::Rule{pfx("10.1.0.7/32"), 0, 1000}), EINVAL);
}

// ---- routes ----

TYPED_TEST_P(NetlinkContract, PrefixRoutesFollowAddressesOnUpLinks) {
  nl::Link link = this->upLink();
  ASSERT_GT(link.index, 0);
  const int dev = link.index;
  EXPECT_THAT(this->routesOf(this->ns(0), dev),
              UnorderedElementsAre(
                  routeText(listed("10.1.0.0/24", std::nullopt, dev, kMain, std::nullopt, kLink)),
                  routeText(listed("fd00:1::/64", std::nullopt, dev, kMain, 256, kUniverse))));

  IBCNI_ASSERT_OK(this->nl().addAddress(this->ns(0), dev, pfx("10.9.9.9/32")));  // no route
  IBCNI_ASSERT_OK(this->nl().addAddress(this->ns(0), dev, pfx("fd00:5::1/128")));
  EXPECT_THAT(this->routesOf(this->ns(0), dev),
              UnorderedElementsAre(
                  routeText(listed("10.1.0.0/24", std::nullopt, dev, kMain, std::nullopt, kLink)),
                  routeText(listed("fd00:1::/64", std::nullopt, dev, kMain, 256, kUniverse)),
                  routeText(listed("fd00:5::1/128", std::nullopt, dev, kMain, 256, kUniverse))));

  IBCNI_ASSERT_OK(this->nl().deleteAddress(this->ns(0), dev, pfx("10.1.0.2/24")));
  IBCNI_ASSERT_OK(this->nl().deleteAddress(this->ns(0), dev, pfx("fd00:1::2/64")));
  EXPECT_THAT(this->routesOf(this->ns(0), dev),
              UnorderedElementsAre(
                  routeText(listed("fd00:5::1/128", std::nullopt, dev, kMain, 256, kUniverse))));
}

TYPED_TEST_P(NetlinkContract, AddressesOnADownLinkGetRoutesWhenItComesUp) {
  nl::Link link = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(link.index, 0);
  const int dev = link.index;
  IBCNI_ASSERT_OK(this->nl().addAddress(this->ns(0), dev, pfx("10.1.0.2/24")));
  IBCNI_ASSERT_OK(this->nl().addAddress(this->ns(0), dev, pfx("fd00:1::2/64")));
  EXPECT_THAT(this->routesOf(this->ns(0), dev), IsEmpty());
  IBCNI_ASSERT_OK(this->nl().setLinkUp(this->ns(0), dev, true));
  EXPECT_THAT(this->routesOf(this->ns(0), dev),
              UnorderedElementsAre(
                  routeText(listed("10.1.0.0/24", std::nullopt, dev, kMain, std::nullopt, kLink)),
                  routeText(listed("fd00:1::/64", std::nullopt, dev, kMain, 256, kUniverse))));
}

TYPED_TEST_P(NetlinkContract, AddListAndDeleteRoutes) {
  nl::Link link = this->upLink();
  ASSERT_GT(link.index, 0);
  const int dev = link.index;
  struct Case {
    nl::Route add;
    nl::Route shown;
  };
  const std::vector<Case> cases = {
      {route("10.2.0.0/16").via("10.1.0.1").dev(dev),
       listed("10.2.0.0/16", "10.1.0.1", dev, kMain, std::nullopt, kUniverse)},
      {route("10.3.0.0/16").via("10.1.0.1").dev(dev).table(100),
       listed("10.3.0.0/16", "10.1.0.1", dev, 100, std::nullopt, kUniverse)},
      {route("10.4.0.0/16").dev(dev).metric(50),
       listed("10.4.0.0/16", std::nullopt, dev, kMain, 50, kLink)},
      {route("10.5.0.0/16").via("10.1.0.1").dev(dev).mtu(1400).advmss(1360),
       listed("10.5.0.0/16", "10.1.0.1", dev, kMain, std::nullopt, kUniverse, 1400, 1360)},
      {route("0.0.0.0/0").via("10.1.0.1"),  // device found from the gateway
       listed("0.0.0.0/0", "10.1.0.1", dev, kMain, std::nullopt, kUniverse)},
      {route("10.6.0.0/16").dev(dev).table(0).scope(0),
       listed("10.6.0.0/16", std::nullopt, dev, kMain, std::nullopt, kUniverse)},
      {route("fd00:2::/64").via("fd00:1::1").dev(dev),
       listed("fd00:2::/64", "fd00:1::1", dev, kMain, 1024, kUniverse)},
      {route("fd00:3::/64").dev(dev).mtu(1300).metric(10).table(100),
       listed("fd00:3::/64", std::nullopt, dev, 100, 10, kUniverse, 1300)},
      {route("::/0").via("fe80::1").dev(dev),
       listed("::/0", "fe80::1", dev, kMain, 1024, kUniverse)},
  };
  for (const auto& c : cases) {
    IBCNI_ASSERT_OK(this->nl().addRoute(this->ns(0), c.add));
    EXPECT_THAT(this->routesOf(this->ns(0), dev), Contains(routeText(c.shown)));
  }
  for (const auto& c : cases) {
    IBCNI_ASSERT_OK(this->nl().deleteRoute(this->ns(0), c.add));
    EXPECT_THAT(this->routesOf(this->ns(0), dev), Not(Contains(routeText(c.shown))));
  }
  // Only the prefix routes of the two addresses are left.
  EXPECT_EQ(this->routesOf(this->ns(0), 0).size(), 2u);
}

TYPED_TEST_P(NetlinkContract, RoutesListedCanBeDeletedAsListed) {
  nl::Link link = this->upLink();
  ASSERT_GT(link.index, 0);
  IBCNI_ASSERT_OK(this->nl().addRoute(
      this->ns(0),
      route("10.2.0.0/16").via("10.1.0.1").dev(link.index).mtu(1400).metric(7).table(100)));
  auto routes = this->nl().listRoutes(this->ns(0), link.index);
  IBCNI_ASSERT_OK(routes);
  for (const auto& r : *routes) {
    IBCNI_EXPECT_OK(this->nl().deleteRoute(this->ns(0), r));
  }
  EXPECT_THAT(this->routesOf(this->ns(0), 0), IsEmpty());
}

TYPED_TEST_P(NetlinkContract, DuplicateRouteIsEexist) {
  nl::Link link = this->upLink();
  ASSERT_GT(link.index, 0);
  const int dev = link.index;
  nl::Route r = route("10.2.0.0/16").via("10.1.0.1").dev(dev);
  IBCNI_ASSERT_OK(this->nl().addRoute(this->ns(0), r));
  IBCNI_EXPECT_ERRNO(this->nl().addRoute(this->ns(0), r), EEXIST);
  // Another gateway for the same table, destination and priority is another route (no
  // NLM_F_EXCL, as the reference plugins add routes): it is added beside the first.
  IBCNI_EXPECT_OK(this->nl().addRoute(this->ns(0), route("10.2.0.0/16").via("10.1.0.9").dev(dev)));
  IBCNI_EXPECT_OK(
      this->nl().addRoute(this->ns(0), route("10.2.0.0/16").via("10.1.0.9").dev(dev).metric(5)));
  IBCNI_EXPECT_OK(
      this->nl().addRoute(this->ns(0), route("10.2.0.0/16").via("10.1.0.1").dev(dev).table(100)));
  nl::Route v6 = route("fd00:2::/64").dev(dev);
  IBCNI_ASSERT_OK(this->nl().addRoute(this->ns(0), v6));
  IBCNI_EXPECT_ERRNO(this->nl().addRoute(this->ns(0), v6), EEXIST);
  IBCNI_EXPECT_ERRNO(this->nl().addRoute(this->ns(0), route("fd00:2::/64").dev(dev).metric(1024)),
                     EEXIST);
}

// One network attached twice in a pod: each interface gets the network's routes, through itself.
TYPED_TEST_P(NetlinkContract, TheSameRouteThroughTwoLinks) {
  nl::Link a = this->upLink();
  nl::Link b = this->upLink("10.1.1.2/24", "fd00:11::2/64");
  ASSERT_GT(a.index, 0);
  ASSERT_GT(b.index, 0);
  for (int dev : {a.index, b.index}) {
    IBCNI_EXPECT_OK(this->nl().addRoute(this->ns(0), route("10.3.0.0/16").dev(dev)));
    IBCNI_EXPECT_OK(this->nl().addRoute(this->ns(0), route("fd00:3::/64").dev(dev)));
  }
  IBCNI_EXPECT_OK(this->nl().addRoute(this->ns(0), route("0.0.0.0/0").via("10.1.0.1").dev(a.index)));
  IBCNI_EXPECT_OK(this->nl().addRoute(this->ns(0), route("0.0.0.0/0").via("10.1.1.1").dev(b.index)));
  IBCNI_EXPECT_OK(this->nl().addRoute(this->ns(0), route("::/0").via("fd00:1::1").dev(a.index)));
  IBCNI_EXPECT_OK(this->nl().addRoute(this->ns(0), route("::/0").via("fd00:11::1").dev(b.index)));
  auto has = [this](int dev, const char* dst) {
    auto texts = this->routesOf(this->ns(0), dev);
    return std::any_of(texts.begin(), texts.end(), [&](const std::string& t) { return t.starts_with(dst); });
  };
  for (int dev : {a.index, b.index}) {
    EXPECT_TRUE(has(dev, "10.3.0.0/16 ")) << dev;
    EXPECT_TRUE(has(dev, "fd00:3::/64 ")) << dev;
    EXPECT_TRUE(has(dev, "0.0.0.0/0 ")) << dev;
    EXPECT_TRUE(has(dev, "::/0 ")) << dev;
  }
  // Taking one link's routes away leaves the other's.
  IBCNI_EXPECT_OK(this->nl().deleteRoute(this->ns(0), route("10.3.0.0/16").dev(a.index)));
  IBCNI_EXPECT_OK(this->nl().deleteRoute(this->ns(0), route("::/0").via("fd00:1::1").dev(a.index)));
  EXPECT_FALSE(has(a.index, "10.3.0.0/16 "));
  EXPECT_FALSE(has(a.index, "::/0 "));
  EXPECT_TRUE(has(b.index, "10.3.0.0/16 "));
  EXPECT_TRUE(has(b.index, "::/0 "));
}

TYPED_TEST_P(NetlinkContract, DeleteRouteMatchesLikeIpRouteDel) {
  nl::Link link = this->upLink();
  ASSERT_GT(link.index, 0);
  const int dev = link.index;
  nl::Route r = route("10.2.0.0/16").via("10.1.0.1").dev(dev).mtu(1400).metric(7);
  IBCNI_ASSERT_OK(this->nl().addRoute(this->ns(0), r));
  IBCNI_EXPECT_ERRNO(this->nl().deleteRoute(this->ns(0), route("10.2.0.0/16").dev(dev).metric(8)),
                     ESRCH);
  IBCNI_EXPECT_ERRNO(this->nl().deleteRoute(this->ns(0), route("10.2.0.0/16").via("10.1.0.9")),
                     ESRCH);
  IBCNI_EXPECT_ERRNO(this->nl().deleteRoute(this->ns(0), route("10.2.0.0/16").mtu(1300)), ESRCH);
  auto noTable = this->nl().deleteRoute(this->ns(0), route("10.2.0.0/16").table(100));
  ASSERT_FALSE(noTable.has_value());
  EXPECT_EQ(os::errnoName(noTable.error().err), "ESRCH");
  EXPECT_THAT(noTable.error().extAck, HasSubstr("table"));  // table 100 was never used
  IBCNI_EXPECT_ERRNO(this->nl().deleteRoute(this->ns(0), route("10.2.0.0/16").dev(9999)), ESRCH);
  IBCNI_EXPECT_ERRNO(this->nl().deleteRoute(this->ns(0), route("10.8.0.0/16")), ESRCH);
  IBCNI_EXPECT_ERRNO(this->nl().deleteRoute(this->ns(0), route("fd00:8::/64")), ESRCH);
  // Only the destination given: unset fields are wildcards.
  IBCNI_ASSERT_OK(this->nl().deleteRoute(this->ns(0), route("10.2.0.0/16")));
  EXPECT_THAT(this->routesOf(this->ns(0), dev), Not(Contains(HasSubstr("10.2.0.0/16"))));
}

TYPED_TEST_P(NetlinkContract, RouteErrors) {
  nl::Link link = this->upLink();
  ASSERT_GT(link.index, 0);
  const int dev = link.index;
  nl::Link down = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(down.index, 0);

  for (const char* dst : {"10.2.0.0/16", "fd00:2::/64"}) {
    auto res = this->nl().addRoute(this->ns(0), route(dst).dev(down.index));
    ASSERT_FALSE(res.has_value()) << dst;
    EXPECT_EQ(os::errnoName(res.error().err), "ENETDOWN") << res.error().describe();
    EXPECT_THAT(res.error().extAck, HasSubstr("not up"));
  }
  auto unreachable =
      this->nl().addRoute(this->ns(0), route("10.2.0.0/16").via("10.9.0.1").dev(dev));
  ASSERT_FALSE(unreachable.has_value());
  EXPECT_EQ(os::errnoName(unreachable.error().err), "ENETUNREACH");
  EXPECT_THAT(unreachable.error().extAck, HasSubstr("gateway"));
  IBCNI_EXPECT_ERRNO(
      this->nl().addRoute(this->ns(0), route("fd00:2::/64").via("fd00:9::1").dev(dev)),
      EHOSTUNREACH);
  // A gateway reachable only through another device.
  IBCNI_EXPECT_ERRNO(
      this->nl().addRoute(this->ns(0), route("10.2.0.0/16").via("10.1.0.1").dev(down.index)),
      ENETUNREACH);
  IBCNI_EXPECT_ERRNO(this->nl().addRoute(this->ns(0), route("10.2.0.0/16").dev(9999)), ENODEV);
  IBCNI_EXPECT_ERRNO(this->nl().addRoute(this->ns(0), route("10.2.0.0/16")), ENODEV);
  IBCNI_EXPECT_ERRNO(this->nl().addRoute(this->ns(0), route("fd00:2::/64")), ENODEV);
  IBCNI_EXPECT_ERRNO(this->nl().addRoute(this->ns(0), route("10.2.0.1/16").dev(dev)),
                     EINVAL);  // host bits set
  IBCNI_EXPECT_ERRNO(
      this->nl().addRoute(this->ns(0), route("10.2.0.0/16").via("fd00:1::1").dev(dev)),
      EINVAL);  // mixed families
}

TYPED_TEST_P(NetlinkContract, Ipv6RouteHostBitsAreMasked) {
  nl::Link link = this->upLink();
  ASSERT_GT(link.index, 0);
  IBCNI_ASSERT_OK(this->nl().addRoute(this->ns(0), route("fd00:2::1/64").dev(link.index)));
  EXPECT_THAT(
      this->routesOf(this->ns(0), link.index),
      Contains(routeText(listed("fd00:2::/64", std::nullopt, link.index, kMain, 1024, kUniverse))));
}

TYPED_TEST_P(NetlinkContract, DeletingTheLastIpv4AddressFlushesIpv4Routes) {
  nl::Link link = this->upLink();
  ASSERT_GT(link.index, 0);
  const int dev = link.index;
  IBCNI_ASSERT_OK(this->nl().addRoute(this->ns(0), route("10.2.0.0/16").via("10.1.0.1").dev(dev)));
  IBCNI_ASSERT_OK(this->nl().addRoute(this->ns(0), route("10.3.0.0/16").dev(dev)));
  IBCNI_ASSERT_OK(this->nl().addRoute(this->ns(0), route("fd00:2::/64").dev(dev)));
  IBCNI_ASSERT_OK(this->nl().deleteAddress(this->ns(0), dev, pfx("10.1.0.2/24")));
  // fib_disable_ip: with no IPv4 address left, every IPv4 route through the link goes.
  EXPECT_THAT(this->routesOf(this->ns(0), dev),
              UnorderedElementsAre(
                  routeText(listed("fd00:1::/64", std::nullopt, dev, kMain, 256, kUniverse)),
                  routeText(listed("fd00:2::/64", std::nullopt, dev, kMain, 1024, kUniverse))));
}

TYPED_TEST_P(NetlinkContract, Ipv6RouteMtuFollowsTheDevice) {
  nl::Link link = this->upLink();
  ASSERT_GT(link.index, 0);
  const int dev = link.index;
  IBCNI_ASSERT_OK(this->nl().addRoute(this->ns(0), route("fd00:2::/64").dev(dev).mtu(1400)));
  IBCNI_ASSERT_OK(this->nl().addRoute(this->ns(0), route("10.2.0.0/16").dev(dev).mtu(1400)));
  IBCNI_ASSERT_OK(this->nl().setMtu(this->ns(0), dev, 1300));
  // rt6_mtu_change lowers the IPv6 route's MTU to the device's; IPv4 keeps its metric.
  EXPECT_THAT(
      this->routesOf(this->ns(0), dev),
      Contains(routeText(listed("fd00:2::/64", std::nullopt, dev, kMain, 1024, kUniverse, 1300))));
  EXPECT_THAT(this->routesOf(this->ns(0), dev),
              Contains(routeText(
                  listed("10.2.0.0/16", std::nullopt, dev, kMain, std::nullopt, kLink, 1400))));
  IBCNI_ASSERT_OK(this->nl().setMtu(this->ns(0), dev, 1500));  // and raises it with the device
  EXPECT_THAT(
      this->routesOf(this->ns(0), dev),
      Contains(routeText(listed("fd00:2::/64", std::nullopt, dev, kMain, 1024, kUniverse, 1500))));
}

TYPED_TEST_P(NetlinkContract, RoutesGoWhenTheLinkGoesDown) {
  nl::Link link = this->upLink();
  ASSERT_GT(link.index, 0);
  const int dev = link.index;
  IBCNI_ASSERT_OK(this->nl().addRoute(this->ns(0), route("10.2.0.0/16").via("10.1.0.1").dev(dev)));
  IBCNI_ASSERT_OK(this->nl().addRoute(this->ns(0), route("fd00:2::/64").dev(dev)));
  IBCNI_ASSERT_OK(this->nl().setLinkUp(this->ns(0), dev, false));
  EXPECT_THAT(this->routesOf(this->ns(0), 0), IsEmpty());
  IBCNI_ASSERT_OK(this->nl().setLinkUp(this->ns(0), dev, true));
  // The IPv4 prefix route comes back; static routes and the IPv6 address do not.
  EXPECT_THAT(this->routesOf(this->ns(0), 0),
              UnorderedElementsAre(
                  routeText(listed("10.1.0.0/24", std::nullopt, dev, kMain, std::nullopt, kLink))));
}

TYPED_TEST_P(NetlinkContract, ListRoutesFiltersByLink) {
  nl::Link a = this->upLink("10.1.0.2/24", nullptr);
  ASSERT_GT(a.index, 0);
  nl::Link b = this->veth(this->ns(0), this->ns(1));
  ASSERT_GT(b.index, 0);
  IBCNI_ASSERT_OK(this->nl().setLinkUp(this->ns(0), b.index, true));
  IBCNI_ASSERT_OK(this->nl().addAddress(this->ns(0), b.index, pfx("10.2.0.2/24")));
  EXPECT_THAT(this->routesOf(this->ns(0), a.index),
              UnorderedElementsAre(routeText(
                  listed("10.1.0.0/24", std::nullopt, a.index, kMain, std::nullopt, kLink))));
  EXPECT_THAT(this->routesOf(this->ns(0), b.index),
              UnorderedElementsAre(routeText(
                  listed("10.2.0.0/24", std::nullopt, b.index, kMain, std::nullopt, kLink))));
  EXPECT_EQ(this->routesOf(this->ns(0), 0).size(), 2u);
  IBCNI_EXPECT_ERRNO(this->nl().listRoutes(this->ns(0), 9999), ENODEV);
}

TYPED_TEST_P(NetlinkContract, CallerStaysInItsNamespace) {
  auto before = os::Netns::current();
  IBCNI_ASSERT_OK(before);
  nl::Link link = this->upLink();
  ASSERT_GT(link.index, 0);
  IBCNI_ASSERT_OK(this->nl().moveLink(this->ns(0), link.index, this->ns(2)));
  IBCNI_EXPECT_ERRNO(this->nl().linkByIndex(this->ns(1), 9999), ENODEV);
  auto after = os::Netns::current();
  IBCNI_ASSERT_OK(after);
  EXPECT_TRUE(before->sameAs(*after));
}

REGISTER_TYPED_TEST_SUITE_P(
    NetlinkContract, LinkByNameAndByIndexReturnTheLink, MissingLinkIsEnodev,
    ErrorsNameTheOperationAndNamespace, FreshNamespaceHasOnlyDownLoopback, SetLinkUpAndDown,
    RenameDownLink, RenameToTakenNameIsEexist, RenameUpLinkFollowsTheKernelVersion,
    RenameRejectsInvalidNames, SetMtuWithinAndOutsideTheDeviceRange, SetAndClearAlias, SetHwAddress,
    MoveLinkKeepsNameIndexMtuAndAlias, MoveLinkGetsANewIndexWhenItsIndexIsTaken,
    MoveLinkWhoseNameIsTakenInTheTargetIsEexist, MoveLinkDropsAddressesAndRoutesAndSetsItDown,
    MoveLinkIntoItsOwnNamespaceChangesNothing, LoopbackCannotMove, AddListAndDeleteAddresses,
    AddressesOfMissingLinkAreEnodev, SameIpv4AddressWithAnotherPrefixLengthIsASecondAddress,
    DeletingAnIpv4PrimaryDeletesItsSecondaries, Ipv6AddressesGoWhenTheLinkGoesDown,
    MtuBelow1280DisablesIpv6, LoopbackUpGetsLoopbackAddressesButNoUnicastRoutes,
    PrefixRoutesFollowAddressesOnUpLinks, AddressesOnADownLinkGetRoutesWhenItComesUp,
    AddListAndDeleteRoutes, RoutesListedCanBeDeletedAsListed, DuplicateRouteIsEexist, TheSameRouteThroughTwoLinks,
    DeleteRouteMatchesLikeIpRouteDel, RouteErrors, Ipv6RouteHostBitsAreMasked,
    DeletingTheLastIpv4AddressFlushesIpv4Routes, Ipv6RouteMtuFollowsTheDevice,
    RoutesGoWhenTheLinkGoesDown, ListRoutesFiltersByLink, CallerStaysInItsNamespace,
    RulesAreAddedListedAndDeletedPerNamespace);

}  // namespace ibcni::testing
