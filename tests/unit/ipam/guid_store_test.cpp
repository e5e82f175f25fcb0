// SPDX-License-Identifier: Apache-2.0
// A node-local store of GUIDs (FileStore in the GUID space) under the Allocator: the same store and
// policy as addresses, with claims named by 16 hex digits, no network/broadcast/gateway, and
// messages that say "GUID".
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <filesystem>
#include <fstream>
#include <set>

#include "fake_store.h"
#include "store_test_util.h"

namespace ibcni::ipam::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// One range set: kFirst .. kFirst + size - 1, inside the GUID prefix of `prefixLen` (whose first and
// last values an IP subnet would never hand out).
IpamConfig guidConfig(std::uint64_t size, int prefixLen) {
  IpamConfig c = guidRangeConfig(kFirst, kFirst + size - 1);
  c.rangeSets[0].ranges[0].subnet = net::IpPrefix{g(kFirst), prefixLen};
  return c;
}

class GuidStoreTest : public ::testing::Test {
 protected:
  void open(std::uint64_t size = 4, int prefixLen = 62) {
    alloc_.reset();
    config_ = std::make_unique<IpamConfig>(guidConfig(size, prefixLen));
    FileStore::Options o{dir(), Allocator::spansOf(*config_), std::chrono::seconds(10)};
    o.space = SpaceKind::kGuid;
    store_ = std::make_unique<FileStore>(std::move(o));
    alloc_ = std::make_unique<Allocator>(*config_, *store_, netns_);
  }
  [[nodiscard]] std::string dir() const { return tmp_.path() + "/pool"; }

  AddRequest request(const std::string& cid, std::vector<net::IpAddress> requested = {}) {
    AddRequest r;
    r.key = {cid, "net1"};
    r.pod = {"ns", "pod-" + cid, "uid-" + cid};
    r.netns = "/run/netns/" + cid;
    r.requested = std::move(requested);
    r.requestedFrom = "runtimeConfig.infinibandGUID";
    return r;
  }

  net::IpAddress add(const std::string& cid, std::vector<net::IpAddress> requested = {}) {
    auto l = alloc_->allocate(request(cid, std::move(requested)));
    EXPECT_TRUE(l) << (l ? "" : l.error().msg);
    return l && l->size() == 1 ? l->front().address : net::IpAddress{};
  }

  cni::Error addFails(const std::string& cid, std::vector<net::IpAddress> requested = {}) {
    auto l = alloc_->allocate(request(cid, std::move(requested)));
    EXPECT_FALSE(l) << "got " << (l && !l->empty() ? l->front().address.toString() : "");
    return l ? cni::Error{} : l.error();
  }

  std::set<std::string> claimNames() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir() + "/ips")) {
      out.insert(e.path().filename().string());
    }
    return out;
  }

  TempDir tmp_;
  FakeNetnsChecker netns_;
  std::unique_ptr<IpamConfig> config_;
  std::unique_ptr<FileStore> store_;
  std::unique_ptr<Allocator> alloc_;
};

TEST_F(GuidStoreTest, AllocatesRoundRobinOverTheWholeRangeWithoutNetworkOrBroadcast) {
  open();
  // The first and last GUID of the /62 are handed out: GUIDs have no network, broadcast or gateway.
  EXPECT_EQ(add("a"), g(kFirst));
  EXPECT_EQ(add("b"), g(kFirst + 1));
  EXPECT_EQ(add("c"), g(kFirst + 2));
  EXPECT_EQ(add("d"), g(kFirst + 3));
  EXPECT_TRUE(add("a").isGuid()) << "idempotent per attachment";
  EXPECT_EQ(add("a"), g(kFirst));
  auto r = alloc_->release({"b", "net1"});
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_TRUE(*r);
  EXPECT_EQ(add("e"), g(kFirst + 1));  // wrapped around to the one free
  EXPECT_TRUE(verifyStore(*store_).empty());
}

TEST_F(GuidStoreTest, ClaimsAreNamedBySixteenHexDigitsAndReadBackAsGuids) {
  open();
  add("a");
  add("b");
  EXPECT_EQ(claimNames(), (std::set<std::string>{"0200000000000100", "0200000000000101"}));
  EXPECT_EQ(store_->claimPath(g(kFirst)), dir() + "/ips/0200000000000100");
  EXPECT_EQ(fs::read_symlink(dir() + "/ips/0200000000000101").string(), "../attachments/b:net1");
  std::ifstream in(dir() + "/attachments/b:net1");
  const std::string record{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_THAT(record, HasSubstr(R"("addresses":["02:00:00:00:00:00:01:01"])"));
  // A new store object reads the files back as GUIDs, never as IPv6.
  open();
  auto lock = StoreLock::acquire(*store_);
  ASSERT_TRUE(lock);
  auto rec = store_->find({"b", "net1"});
  ASSERT_TRUE(rec && *rec) << (rec ? "no record" : rec.error().describe());
  ASSERT_EQ((*rec)->addresses.size(), 1u);
  EXPECT_TRUE((*rec)->addresses[0].isGuid());
  EXPECT_EQ((*rec)->addresses[0], g(kFirst + 1));
  auto owner = store_->ownerOf(g(kFirst + 1));
  ASSERT_TRUE(owner && *owner);
  EXPECT_EQ(**owner, (AttachmentKey{"b", "net1"}));
  auto ipv6 = store_->ownerOf(*net::IpAddress::parse("02:00:00:00:00:00:01:01"));
  ASSERT_TRUE(ipv6);
  EXPECT_FALSE(*ipv6) << "the IPv6 twin of a GUID's text holds nothing";
  auto used = store_->countInUse(0);
  ASSERT_TRUE(used);
  EXPECT_EQ(*used, 2u);
  auto problems = store_->verify();
  ASSERT_TRUE(problems);
  EXPECT_TRUE(problems->empty());
}

TEST_F(GuidStoreTest, VerifyReportsAClaimNotNamedAfterAGuid) {
  open();
  add("a");
  fs::create_symlink("../attachments/a:net1", dir() + "/ips/02:00:00:00:00:00:01:00");
  auto problems = verifyStore(*store_);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], dir() + "/ips/02:00:00:00:00:00:01:00: not named after a GUID");
}

TEST_F(GuidStoreTest, OrphanedClaimsAreDropped) {
  open();
  for (const char* c : {"a", "b", "c"}) {
    add(c);
  }
  fs::remove(dir() + "/attachments/b:net1");
  auto problems = verifyStore(*store_);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], dir() + "/ips/0200000000000101: held by b/net1, which has no record");
  {
    auto lock = StoreLock::acquire(*store_);
    ASSERT_TRUE(lock);
    auto dropped = store_->dropOrphans();
    ASSERT_TRUE(dropped) << dropped.error().describe();
    EXPECT_EQ(*dropped, 1u);
    ASSERT_TRUE(store_->commit());
  }
  EXPECT_TRUE(verifyStore(*store_).empty());
  EXPECT_EQ(claimNames(), (std::set<std::string>{"0200000000000100", "0200000000000102"}));
  EXPECT_EQ(add("d"), g(kFirst + 3));
  EXPECT_EQ(add("e"), g(kFirst + 1));
}

TEST_F(GuidStoreTest, RequestedGuidHeldByAnotherIsRefusedNamingTheHolderUntilReleased) {
  open();
  netns_.state["/run/netns/a"] = os::NetnsLiveness::kAlive;
  EXPECT_EQ(add("a", {g(kFirst + 2)}), g(kFirst + 2));
  auto e = addFails("b", {g(kFirst + 2)});
  EXPECT_EQ(e.code, cni::Errc::kTryAgainLater);
  EXPECT_EQ(e.msg,
            "requested GUID (runtimeConfig.infinibandGUID) 02:00:00:00:00:00:01:02 is held by containerID a ifname "
            "net1 (pod ns/pod-a), netns /run/netns/a; it can be given out once that attachment is deleted");
  auto r = alloc_->release({"a", "net1"});
  ASSERT_TRUE(r && *r);
  EXPECT_EQ(add("b", {g(kFirst + 2)}), g(kFirst + 2));
  EXPECT_TRUE(verifyStore(*store_).empty());
}

TEST_F(GuidStoreTest, RequestedGuidOutsideTheRangeIsInvalidSayingGuid) {
  open();
  auto e = addFails("a", {g(kFirst + 4)});
  EXPECT_EQ(e.code, cni::Errc::kInvalidConfig);
  EXPECT_EQ(e.msg, "requested GUID (runtimeConfig.infinibandGUID) 02:00:00:00:00:00:01:04 is not inside any range: "
                   "guidPool.range = 02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:03");
}

TEST_F(GuidStoreTest, ExhaustionNamesTheRangeSetAndCountsGuids) {
  open();
  for (const char* c : {"a", "b", "c", "d"}) {
    netns_.state[std::string("/run/netns/") + c] = os::NetnsLiveness::kAlive;
    add(c);
  }
  auto e = addFails("e");
  EXPECT_EQ(static_cast<int>(e.code), 108);
  EXPECT_EQ(e.msg, "no free GUID in guidPool.range = 02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:03: 4 GUIDs can "
                   "be handed out and 4 are in use; widen the range or delete pods");
  EXPECT_EQ(claimNames().size(), 4u);
  EXPECT_FALSE(fs::exists(dir() + "/attachments/e:net1")) << "a failed ADD records nothing";
}

TEST_F(GuidStoreTest, ReserveRefusesAGuidHeldByAnotherAttachmentSayingGuid) {
  open();
  auto lock = StoreLock::acquire(*store_);
  ASSERT_TRUE(lock);
  ASSERT_TRUE(store_->reserve({{"a", "net1"}, {}, "", 0, "", {g(kFirst + 1)}, "", ""}));
  auto clash = store_->reserve({{"b", "net1"}, {}, "", 0, "", {g(kFirst + 1)}, "", ""});
  ASSERT_FALSE(clash);
  EXPECT_EQ(clash.error().err, EEXIST);
  EXPECT_THAT(clash.error().op, HasSubstr("claim " + dir() + "/ips/0200000000000101: GUID "
                                          "02:00:00:00:00:00:01:01 is held by a/net1"));
}

TEST(IdentSpace, TextsOfEachSpace) {
  EXPECT_EQ(ipSpace().noun, "address");
  EXPECT_EQ(guidSpace().noun, "GUID");
  EXPECT_EQ(ipSpace().claimName(*net::IpAddress::parse("fd00::5")), "fd00::5");
  EXPECT_EQ(guidSpace().claimName(g(0xc2112233445566a7ULL)), "c2112233445566a7");
  EXPECT_EQ(guidSpace().fromClaimName("c2112233445566a7"), g(0xc2112233445566a7ULL));
  for (const char* bad : {"c2112233445566a", "c2112233445566a70", "c2:11:22:33:44:55:66:a7", "-2112233445566a7", ""}) {
    EXPECT_FALSE(guidSpace().fromClaimName(bad)) << bad;
  }
  EXPECT_EQ(guidSpace().parse("02:00:00:00:00:00:00:05"), g(5ULL | (2ULL << 56)));
  EXPECT_FALSE(guidSpace().parse("0200000000000005"));
  EXPECT_FALSE(guidSpace().parse("10.1.2.3"));
  EXPECT_EQ(ipSpace().parse("02:00:00:00:00:00:00:05")->family, AF_INET6);
  EXPECT_EQ(&spaceOf(guidConfig(4, 62)), &guidSpace());
  EXPECT_EQ(&spaceOf(IpamConfig{}), &ipSpace());
  EXPECT_EQ(&spaceOf(SpaceKind::kGuid), &guidSpace());
}

}  // namespace
}  // namespace ibcni::ipam::testing
