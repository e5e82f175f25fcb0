// SPDX-License-Identifier: Apache-2.0
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

#include "ipam/policy/allocator.h"
#include "fake_store.h"
#include "ibcni/config/net_conf.h"

namespace ibcni::ipam {
namespace {

using testing::FakeNetnsChecker;
using testing::FakeStore;
using ::testing::HasSubstr;

net::IpAddress ip(const char* s) { return *net::IpAddress::parse(s); }

// A config, a fake store built for it, a fake netns checker and the allocator over them.
class AllocatorTest : public ::testing::Test {
 protected:
  void configure(const std::string& ipamJson) {
    auto c = config::parseIpamConfig(ipamJson);
    ASSERT_TRUE(c) << c.error().msg;
    config_ = std::make_unique<IpamConfig>(*c);
    store_ = std::make_unique<FakeStore>(Allocator::spansOf(*config_));
    alloc_ = std::make_unique<Allocator>(*config_, *store_, netns_);
  }

  AddRequest request(const std::string& cid, std::vector<net::IpAddress> requested = {}, PodRef pod = {}) {
    AddRequest r;
    r.key = {cid, "net1"};
    r.pod = std::move(pod);
    r.netns = "/run/netns/" + cid;
    r.requested = std::move(requested);
    r.requestedFrom = "runtimeConfig.ips";
    return r;
  }

  // The single address of a one-range-set ADD.
  net::IpAddress addOne(const std::string& cid, std::vector<net::IpAddress> requested = {}, PodRef pod = {}) {
    auto l = alloc_->allocate(request(cid, std::move(requested), std::move(pod)));
    EXPECT_TRUE(l) << (l ? "" : l.error().msg);
    if (!l || l->empty()) {
      return {};
    }
    return l->front().address;
  }

  cni::Error addFails(const std::string& cid, std::vector<net::IpAddress> requested = {}, PodRef pod = {}) {
    auto l = alloc_->allocate(request(cid, std::move(requested), std::move(pod)));
    EXPECT_FALSE(l) << "got " << (l && !l->empty() ? l->front().address.toString() : "");
    return l ? cni::Error{} : l.error();
  }

  std::unique_ptr<IpamConfig> config_;
  std::unique_ptr<FakeStore> store_;
  FakeNetnsChecker netns_;
  std::unique_ptr<Allocator> alloc_;
};

TEST_F(AllocatorTest, FirstAddressSkipsNetworkAndGatewayAndLeaseCarriesTheRange) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  auto l = alloc_->allocate(request("c1"));
  ASSERT_TRUE(l) << l.error().msg;
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].address, ip("10.1.2.2"));
  EXPECT_EQ((*l)[0].range.gateway, ip("10.1.2.1"));
  EXPECT_EQ((*l)[0].range.subnet.prefixLen, 24);
  EXPECT_EQ(store_->records().at({"c1", "net1"}).netns, "/run/netns/c1");
  EXPECT_FALSE(store_->records().at({"c1", "net1"}).createdAt.empty());
}

TEST_F(AllocatorTest, RoundRobinContinuesAfterTheLastReservedAddress) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  EXPECT_EQ(addOne("c1"), ip("10.1.2.2"));
  EXPECT_EQ(addOne("c2"), ip("10.1.2.3"));
  ASSERT_TRUE(alloc_->release({"c1", "net1"}));
  // .2 is free again, but round-robin goes on from .3 so that a freed address is not reused at once.
  EXPECT_EQ(addOne("c3"), ip("10.1.2.4"));
}

TEST_F(AllocatorTest, WrapsAroundToTheStartOfTheRange) {
  configure(R"({"ranges": [[{"subnet": "10.0.0.0/29"}]]})");  // .2-.6 usable, .1 gateway
  for (const char* c : {"a", "b", "c", "d", "e"}) {
    addOne(c);
  }
  ASSERT_TRUE(alloc_->release({"b", "net1"}));  // frees .3
  EXPECT_EQ(addOne("f"), ip("10.0.0.3"));
}

TEST_F(AllocatorTest, GatewayInsideTheRangeIsNeverHandedOut) {
  configure(R"({"ranges": [[{"subnet": "10.0.0.0/28", "gateway": "10.0.0.5", "rangeStart": "10.0.0.4",
                              "rangeEnd": "10.0.0.7"}]]})");
  std::set<net::IpAddress> got = {addOne("a"), addOne("b"), addOne("c")};
  EXPECT_EQ(got, (std::set<net::IpAddress>{ip("10.0.0.4"), ip("10.0.0.6"), ip("10.0.0.7")}));
  EXPECT_EQ(addFails("d").code, kIpamExhausted);
}

TEST_F(AllocatorTest, ExcludedCidrIsSkippedInOneStep) {
  configure(R"({"ranges": [[{"subnet": "10.1.0.0/16"}]], "exclude": ["10.1.0.0/17", "10.1.128.1"]})");
  EXPECT_EQ(addOne("a"), ip("10.1.128.0"));  // a host address of the /16
  EXPECT_EQ(addOne("b"), ip("10.1.128.2"));
  // A /17 of excluded addresses costs no per-address work: one store lookup per free interval.
  EXPECT_LE(store_->firstFreeCalls, 3);
}

TEST_F(AllocatorTest, RangeSetMovesOnToItsNextRangeThenWraps) {
  configure(R"({"ranges": [[{"subnet": "10.0.0.0/30"}, {"subnet": "10.0.1.0/30"}]]})");
  EXPECT_EQ(addOne("a"), ip("10.0.0.2"));
  EXPECT_EQ(addOne("b"), ip("10.0.1.2"));
  EXPECT_EQ(addFails("c").code, kIpamExhausted);
  ASSERT_TRUE(alloc_->release({"a", "net1"}));
  EXPECT_EQ(addOne("d"), ip("10.0.0.2"));
}

TEST_F(AllocatorTest, DualStackTakesOneAddressPerRangeSet) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "fd00:1::/64"}]]})");
  auto l = alloc_->allocate(request("c1"));
  ASSERT_TRUE(l) << l.error().msg;
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0].address, ip("10.1.2.2"));
  EXPECT_EQ((*l)[0].rangeSet, 0u);
  EXPECT_EQ((*l)[1].address, ip("fd00:1::2"));
  EXPECT_EQ((*l)[1].range.gateway, ip("fd00:1::1"));
  EXPECT_EQ(store_->records().at({"c1", "net1"}).addresses.size(), 2u);
}

TEST_F(AllocatorTest, AddIsIdempotentPerContainerAndIfname) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "fd00:1::/64"}]]})");
  auto first = alloc_->allocate(request("c1"));
  ASSERT_TRUE(first);
  int reserves = store_->reserves;
  auto again = alloc_->allocate(request("c1", {ip("10.1.2.77")}));
  ASSERT_TRUE(again) << again.error().msg;
  EXPECT_EQ((*again)[0].address, (*first)[0].address);
  EXPECT_EQ((*again)[1].address, (*first)[1].address);
  EXPECT_EQ(store_->reserves, reserves) << "a repeated ADD writes nothing";
  EXPECT_EQ(store_->claims().size(), 2u);
  // Another ifname of the same container is another attachment.
  AddRequest other = request("c1");
  other.key.ifName = "net2";
  auto second = alloc_->allocate(other);
  ASSERT_TRUE(second);
  EXPECT_NE((*second)[0].address, (*first)[0].address);
}

TEST_F(AllocatorTest, RequestedAddressIsHonored) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "fd00:1::/64"}]]})");
  auto l = alloc_->allocate(request("c1", {ip("fd00:1::99"), ip("10.1.2.99")}));
  ASSERT_TRUE(l) << l.error().msg;
  EXPECT_EQ((*l)[0].address, ip("10.1.2.99"));
  EXPECT_EQ((*l)[1].address, ip("fd00:1::99"));
  // Only one range set requested: the other is allocated round-robin.
  auto m = alloc_->allocate(request("c2", {ip("10.1.2.50")}));
  ASSERT_TRUE(m) << m.error().msg;
  EXPECT_EQ((*m)[0].address, ip("10.1.2.50"));
  EXPECT_EQ((*m)[1].address, ip("fd00:1::9a"));
}

TEST_F(AllocatorTest, RequestedAddressErrorsNameTheAddressAndTheReason) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24", "rangeEnd": "10.1.2.200"}]],
                "exclude": ["10.1.2.64/26"], "reservations": {"ns/db": "10.1.2.7"}})");
  auto outside = addFails("c1", {ip("10.1.2.201")});
  EXPECT_EQ(outside.code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(outside.msg, HasSubstr("requested address (runtimeConfig.ips) 10.1.2.201 is not inside any range"));
  EXPECT_THAT(outside.msg, HasSubstr("ipam.ranges[0] = 10.1.2.0/24 (10.1.2.2-10.1.2.200)"));
  EXPECT_THAT(addFails("c1", {ip("10.1.2.0")}).msg, HasSubstr("not inside any range"));
  EXPECT_THAT(addFails("c1", {ip("10.1.2.70")}).msg,
              HasSubstr("10.1.2.70 cannot be handed out: it is excluded by ipam.exclude[0] = 10.1.2.64/26"));
  EXPECT_THAT(addFails("c1", {ip("10.1.2.7")}).msg,
              HasSubstr("10.1.2.7 cannot be handed out: it is reserved for pod ns/db in ipam.reservations"));
  EXPECT_THAT(addFails("c1", {ip("10.1.2.5"), ip("10.1.2.6")}).msg,
              HasSubstr("are both in ipam.ranges[0]; an attachment gets one address per range set"));
  EXPECT_THAT(addFails("c1", {ip("fd00::1")}).msg, HasSubstr("fd00::1 is not inside any range"));
  EXPECT_TRUE(store_->claims().empty()) << "a refused request holds nothing";
}

TEST_F(AllocatorTest, RequestedGatewayIsRefused) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24", "rangeStart": "10.1.2.1", "gateway": "10.1.2.1"}]]})");
  auto e = addFails("c1", {ip("10.1.2.1")});
  EXPECT_EQ(e.code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(e.msg, HasSubstr("10.1.2.1 cannot be handed out: it is the gateway of ipam.ranges[0][0]"));
}

TEST_F(AllocatorTest, RequestedAddressHeldByALivePodIsTryAgainLater) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  netns_.state["/run/netns/old"] = os::NetnsLiveness::kAlive;
  addOne("old", {ip("10.1.2.9")}, {"ns", "web-0", "u1"});
  auto e = addFails("new", {ip("10.1.2.9")});
  EXPECT_EQ(e.code, cni::Errc::kTryAgainLater);
  EXPECT_THAT(e.msg, HasSubstr("10.1.2.9 is held by containerID old ifname net1 (pod ns/web-0), netns /run/netns/old"));
}

TEST_F(AllocatorTest, RequestedAddressHeldByADeadPodIsTakenOver) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  addOne("old", {ip("10.1.2.9")});
  netns_.state["/run/netns/old"] = os::NetnsLiveness::kGone;
  EXPECT_EQ(addOne("new", {ip("10.1.2.9")}), ip("10.1.2.9"));
  EXPECT_FALSE(store_->records().contains({"old", "net1"}));
}

TEST_F(AllocatorTest, ReservationWinsAndIsNeverGivenToAnyoneElse) {
  configure(R"({"ranges": [[{"subnet": "10.0.0.0/29"}], [{"subnet": "fd00::/125"}]],
                "reservations": {"ns/db-0": ["10.0.0.4", "fd00::4"]}})");
  // Everybody else: .2 .3 .5 .6 (4 addresses), then the pool is exhausted for them.
  std::set<net::IpAddress> others;
  for (const char* c : {"a", "b", "c", "d"}) {
    auto l = alloc_->allocate(request(c, {}, {"ns", c, ""}));
    ASSERT_TRUE(l) << l.error().msg;
    others.insert((*l)[0].address);
    EXPECT_NE((*l)[1].address, ip("fd00::4"));
  }
  EXPECT_FALSE(others.contains(ip("10.0.0.4")));
  auto full = alloc_->allocate(request("e", {}, {"ns", "e", ""}));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, kIpamExhausted);
  // The reserved pod still gets its addresses, even when it asks for others.
  auto db = alloc_->allocate(request("db", {ip("10.0.0.3")}, {"ns", "db-0", "uid"}));
  ASSERT_TRUE(db) << db.error().msg;
  EXPECT_EQ((*db)[0].address, ip("10.0.0.4"));
  EXPECT_EQ((*db)[1].address, ip("fd00::4"));
}

TEST_F(AllocatorTest, ReservedAddressHeldByTheSamePodsDeadSandboxIsTakenOver) {
  configure(R"({"ranges": [[{"subnet": "10.0.0.0/24"}]], "reservations": {"ns/db-0": "10.0.0.40"}})");
  EXPECT_EQ(addOne("sandbox1", {}, {"ns", "db-0", "u1"}), ip("10.0.0.40"));
  // Recreated before the old sandbox's DEL: wait while it lives, take over once it is gone.
  netns_.state["/run/netns/sandbox1"] = os::NetnsLiveness::kAlive;
  EXPECT_EQ(addFails("sandbox2", {}, {"ns", "db-0", "u2"}).code, cni::Errc::kTryAgainLater);
  netns_.state["/run/netns/sandbox1"] = os::NetnsLiveness::kGone;
  EXPECT_EQ(addOne("sandbox2", {}, {"ns", "db-0", "u2"}), ip("10.0.0.40"));
}

TEST_F(AllocatorTest, ExhaustionNamesTheRangeSetItsSizeAndUse) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "10.0.0.0/29"}]], "exclude": ["10.0.0.6"]})");
  for (const char* c : {"a", "b", "c", "d"}) {
    addOne(c);
  }
  auto e = addFails("e");
  EXPECT_EQ(e.code, kIpamExhausted);
  EXPECT_EQ(static_cast<int>(e.code), 108);
  EXPECT_THAT(e.msg, HasSubstr("no free address in ipam.ranges[1] = 10.0.0.0/29 (10.0.0.2-10.0.0.6)"));
  EXPECT_THAT(e.msg, HasSubstr("4 addresses can be handed out and 4 are in use"));
  EXPECT_FALSE(store_->records().contains({"e", "net1"})) << "a failed ADD records nothing";
  EXPECT_EQ(store_->claims().size(), 8u);
}

TEST_F(AllocatorTest, ExhaustionFirstReclaimsAllocationsWhoseNetnsIsGone) {
  configure(R"({"ranges": [[{"subnet": "10.0.0.0/29"}]]})");
  for (const char* c : {"a", "b", "c", "d", "e"}) {
    addOne(c);
  }
  netns_.state["/run/netns/a"] = os::NetnsLiveness::kAlive;
  netns_.state["/run/netns/b"] = os::NetnsLiveness::kAlive;
  netns_.state["/run/netns/c"] = os::NetnsLiveness::kGone;
  // d and e: unknown, never reclaimed.
  EXPECT_EQ(addOne("f"), ip("10.0.0.4"));
  EXPECT_FALSE(store_->records().contains({"c", "net1"}));
  EXPECT_EQ(store_->records().size(), 5u);
  EXPECT_EQ(addFails("g").code, kIpamExhausted);
}

TEST_F(AllocatorTest, ReleaseIsIdempotent) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  addOne("a");
  auto r1 = alloc_->release({"a", "net1"});
  ASSERT_TRUE(r1);
  EXPECT_TRUE(*r1);
  auto r2 = alloc_->release({"a", "net1"});
  ASSERT_TRUE(r2);
  EXPECT_FALSE(*r2);
  EXPECT_TRUE(store_->claims().empty());
}

TEST_F(AllocatorTest, HeldReportsTheAttachmentsLeases) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "fd00::/64"}]]})");
  ASSERT_TRUE(alloc_->allocate(request("a")));
  auto h = alloc_->held({"a", "net1"});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->size(), 2u);
  auto none = alloc_->held({"zz", "net1"});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

TEST_F(AllocatorTest, GcReleasesEverythingNotValid) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  for (const char* c : {"a", "b", "c"}) {
    addOne(c);
  }
  auto released = alloc_->gc({{"b", "net1"}, {"unknown", "net1"}}, "net");
  ASSERT_TRUE(released) << released.error().msg;
  EXPECT_EQ(released->size(), 2u);
  EXPECT_EQ(store_->records().size(), 1u);
  EXPECT_TRUE(store_->records().contains({"b", "net1"}));
}

TEST_F(AllocatorTest, ReclaimFreesOnlyGoneNamespaces) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  for (const char* c : {"alive", "gone", "unknown"}) {
    addOne(c);
  }
  netns_.state["/run/netns/alive"] = os::NetnsLiveness::kAlive;
  netns_.state["/run/netns/gone"] = os::NetnsLiveness::kGone;
  auto dry = alloc_->reclaim(/*dryRun=*/true);
  ASSERT_TRUE(dry);
  EXPECT_EQ(dry->size(), 1u);
  EXPECT_EQ(store_->records().size(), 3u);
  auto r = alloc_->reclaim();
  ASSERT_TRUE(r);
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].key.containerId, "gone");
  EXPECT_EQ(store_->records().size(), 2u);
}

TEST_F(AllocatorTest, UsageCountsAllocatableAndInUse) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]], "exclude": ["10.1.2.128/25"],
                "reservations": {"ns/a": "10.1.2.10"}})");
  addOne("x");
  auto u = alloc_->usage();
  ASSERT_TRUE(u);
  ASSERT_EQ(u->size(), 1u);
  EXPECT_EQ((*u)[0].allocatable, 125u);  // .2-.127 minus the reserved .10
  EXPECT_EQ((*u)[0].inUse, 1u);
  EXPECT_EQ((*u)[0].freeCount, 124u);
}

TEST_F(AllocatorTest, LockFailuresMapToTryAgainAndIo) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  store_->lockError = ETIMEDOUT;
  EXPECT_EQ(addFails("a").code, cni::Errc::kTryAgainLater);
  store_->lockError = EACCES;
  auto e = addFails("a");
  EXPECT_EQ(e.code, cni::Errc::kIoFailure);
  EXPECT_THAT(e.details, HasSubstr("EACCES"));
}

TEST_F(AllocatorTest, RecordKeepsPodIdentityAndNetnsInode) {
  configure(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  AddRequest r = request("a", {}, {"ns", "pod", "uid-1"});
  r.netnsInode = 4026532000;
  ASSERT_TRUE(alloc_->allocate(r));
  const Allocation& rec = store_->records().at({"a", "net1"});
  EXPECT_EQ(rec.pod, (PodRef{"ns", "pod", "uid-1"}));
  EXPECT_EQ(rec.netnsInode, 4026532000u);
}

}  // namespace
}  // namespace ibcni::ipam
