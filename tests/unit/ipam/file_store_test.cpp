// SPDX-License-Identifier: Apache-2.0
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <set>

#include "fake_store.h"
#include "store_test_util.h"
#include "support/child_holder.h"

namespace ibcni::ipam::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

AddRequest addRequest(const std::string& cid, const std::string& netns = "") {
  AddRequest r;
  r.key = {cid, "net1"};
  r.netns = netns;
  return r;
}

class FileStoreTest : public ::testing::Test {
 protected:
  void open(const std::string& ipamJson) { f_ = std::make_unique<StoreFixture>(dir(), ipamJson, netns_); }
  [[nodiscard]] std::string dir() const { return tmp_.path() + "/net1"; }

  net::IpAddress add(const std::string& cid, const std::string& netns = "") {
    auto l = f_->allocator->allocate(addRequest(cid, netns));
    EXPECT_TRUE(l) << (l ? "" : l.error().msg);
    return l && !l->empty() ? l->front().address : net::IpAddress{};
  }

  std::string onlyIndexFile() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir() + "/index")) {
      names.push_back(e.path().string());
    }
    EXPECT_EQ(names.size(), 1u);
    return names.empty() ? "" : names[0];
  }

  TempDir tmp_;
  FakeNetnsChecker netns_;
  std::unique_ptr<StoreFixture> f_;
};

TEST_F(FileStoreTest, AddWritesRecordClaimAndIndex) {
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  EXPECT_EQ(add("c1", "/run/netns/c1"), ip("10.1.2.2"));
  std::string record = dir() + "/attachments/c1:net1";
  ASSERT_TRUE(fs::exists(record));
  EXPECT_THAT(readFile(record), HasSubstr("ibcni-ipam attachment 1 "));
  EXPECT_THAT(readFile(record), HasSubstr("\"netns\":\"/run/netns/c1\""));
  EXPECT_EQ(fs::read_symlink(dir() + "/ips/10.1.2.2").string(), "../attachments/c1:net1");
  EXPECT_THAT(readFile(onlyIndexFile()), HasSubstr("cursor 10.1.2.2"));
  EXPECT_TRUE(fs::exists(dir() + "/lock"));
  EXPECT_EQ(countEntries(dir() + "/tmp"), 0u);
  EXPECT_TRUE(verifyStore(*f_->store).empty());
}

TEST_F(FileStoreTest, ReleaseRemovesRecordAndClaimAndClearsTheBit) {
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  add("c1");
  add("c2");
  auto r = f_->allocator->release({"c1", "net1"});
  ASSERT_TRUE(r && *r);
  EXPECT_FALSE(fs::exists(dir() + "/attachments/c1:net1"));
  EXPECT_FALSE(fs::is_symlink(dir() + "/ips/10.1.2.2"));
  auto u = f_->allocator->usage();
  ASSERT_TRUE(u);
  EXPECT_EQ((*u)[0].inUse, 1u);
  EXPECT_TRUE(verifyStore(*f_->store).empty());
}

TEST_F(FileStoreTest, StateSurvivesANewStoreObject) {
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "fd00::/64"}]]})");
  auto first = f_->allocator->allocate(addRequest("c1"));
  ASSERT_TRUE(first);
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "fd00::/64"}]]})");
  auto again = f_->allocator->allocate(addRequest("c1"));
  ASSERT_TRUE(again);
  EXPECT_EQ((*again)[0].address, (*first)[0].address);
  EXPECT_EQ((*again)[1].address, (*first)[1].address);
  EXPECT_EQ(add("c2"), ip("10.1.2.3")) << "the cursor is persistent";
}

TEST_F(FileStoreTest, TruncatedRecordIsReportedNamingTheFile) {
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  add("c1");
  std::string record = dir() + "/attachments/c1:net1";
  std::string text = readFile(record);
  writeFile(record, text.substr(0, text.size() - 10));
  auto again = f_->allocator->allocate(addRequest("c1"));
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, cni::Errc::kIoFailure);
  EXPECT_THAT(again.error().msg, HasSubstr("ipam store file " + record + " is corrupt (truncated"));
  auto del = f_->allocator->release({"c1", "net1"});
  ASSERT_FALSE(del);
  EXPECT_THAT(del.error().msg, HasSubstr(record));
  auto gc = f_->allocator->gc({}, "net");
  ASSERT_FALSE(gc);
  EXPECT_THAT(gc.error().msg, HasSubstr(record));
  // Nothing was reset: the claim is still there, and another attachment does not get it.
  EXPECT_TRUE(fs::is_symlink(dir() + "/ips/10.1.2.2"));
  EXPECT_EQ(add("c2"), ip("10.1.2.3"));
}

TEST_F(FileStoreTest, FlippedByteInARecordIsAChecksumMismatch) {
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  add("c1");
  std::string record = dir() + "/attachments/c1:net1";
  std::string text = readFile(record);
  text[text.size() - 5] ^= 0x01;
  writeFile(record, text);
  auto check = f_->allocator->held({"c1", "net1"});
  ASSERT_FALSE(check);
  EXPECT_THAT(check.error().msg, HasSubstr(record + " is corrupt (checksum mismatch)"));
  writeFile(record, "");
  check = f_->allocator->held({"c1", "net1"});
  ASSERT_FALSE(check);
  EXPECT_THAT(check.error().msg, HasSubstr(record + " is corrupt (empty file)"));
}

TEST_F(FileStoreTest, CorruptIndexIsReportedAndARemovedOneIsRebuilt) {
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  for (const char* c : {"a", "b", "c"}) {
    add(c);
  }
  std::string index = onlyIndexFile();
  std::string good = readFile(index);
  std::string bad = good;
  bad[bad.size() - 1] ^= 0x40;
  writeFile(index, bad);
  auto e = f_->allocator->allocate(addRequest("d"));
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, cni::Errc::kIoFailure);
  EXPECT_THAT(e.error().msg, HasSubstr("ipam store file " + index + " is corrupt (checksum mismatch)"));
  EXPECT_THAT(e.error().msg, HasSubstr("remove it to have it rebuilt from " + dir() + "/ips"));
  writeFile(index, good.substr(0, good.size() / 2));
  e = f_->allocator->allocate(addRequest("d"));
  ASSERT_FALSE(e);
  EXPECT_THAT(e.error().msg, HasSubstr(index + " is corrupt (truncated"));
  EXPECT_EQ(readFile(index), good.substr(0, good.size() / 2)) << "a corrupt file is never silently reset";
  // The documented fix: remove it. ips/ is the truth, so nothing is handed out twice.
  fs::remove(index);
  EXPECT_EQ(add("d"), ip("10.1.2.5"));
  EXPECT_TRUE(verifyStore(*f_->store).empty());
}

TEST_F(FileStoreTest, BadClaimIsReportedNamingTheFile) {
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  add("c1");
  std::string claim = dir() + "/ips/10.1.2.2";
  fs::remove(claim);
  fs::create_symlink("somewhere/else", claim);
  auto del = f_->allocator->release({"c1", "net1"});
  ASSERT_FALSE(del);
  EXPECT_THAT(del.error().msg, HasSubstr("ipam store file " + claim + " is corrupt (bad link target"));
  fs::remove(claim);
  writeFile(claim, "x");
  del = f_->allocator->release({"c1", "net1"});
  ASSERT_FALSE(del);
  EXPECT_THAT(del.error().msg, HasSubstr(claim + " is corrupt (not a symbolic link)"));
}

TEST_F(FileStoreTest, ClaimMissingFromTheBitmapIsSkippedAndRepaired) {
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  add("c1");  // .2
  // What a process killed between its claim and its index write leaves: a claim whose bit is clear.
  AddRequest killed = addRequest("killed");
  {
    auto lock = StoreLock::acquire(*f_->store);
    ASSERT_TRUE(lock);
    Allocation a{{"killed", "net1"}, {}, "", 0, "", {ip("10.1.2.3")}, "", ""};
    ASSERT_TRUE(f_->store->reserve(a));
    // No commit(): the bit for .3 is never written.
  }
  EXPECT_THAT(readFile(onlyIndexFile()), HasSubstr("cursor 10.1.2.2"));
  EXPECT_EQ(add("c2"), ip("10.1.2.4"));
  EXPECT_TRUE(verifyStore(*f_->store).empty());
  auto u = f_->allocator->usage();
  ASSERT_TRUE(u);
  EXPECT_EQ((*u)[0].inUse, 3u) << "the repaired bit was saved";
}

// What a process killed between writing its record and creating its claims leaves: a record
// listing an address nobody holds. The retried ADD finishes the job; if the address went to
// someone else meanwhile, it takes another, and DEL never touches the other holder's claim.
TEST_F(FileStoreTest, RecordWrittenButClaimMissingIsFinishedByTheRetriedAdd) {
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  EXPECT_EQ(add("k"), ip("10.1.2.2"));
  fs::remove(dir() + "/ips/10.1.2.2");
  auto held = f_->allocator->held({"k", "net1"});
  ASSERT_TRUE(held);
  EXPECT_TRUE(held->empty()) << "a listed address is held only if its claim says so";
  EXPECT_EQ(add("k"), ip("10.1.2.2")) << "the retry gets what it was about to get";
  EXPECT_TRUE(verifyStore(*f_->store).empty());

  fs::remove(dir() + "/ips/10.1.2.2");
  {
    auto lock = StoreLock::acquire(*f_->store);
    ASSERT_TRUE(lock);
    ASSERT_TRUE(f_->store->reserve({{"other", "net1"}, {}, "", 0, "", {ip("10.1.2.2")}, "", ""}));
    ASSERT_TRUE(f_->store->commit());
  }
  EXPECT_EQ(add("k"), ip("10.1.2.3"));
  ASSERT_TRUE(f_->allocator->release({"k", "net1"}));
  EXPECT_EQ(fs::read_symlink(dir() + "/ips/10.1.2.2").string(), "../attachments/other:net1");
  EXPECT_TRUE(verifyStore(*f_->store).empty());
}

// What a process killed in the middle of DEL leaves: claims gone (or some of them), record still
// there. DEL again completes it.
TEST_F(FileStoreTest, DelInterruptedAfterTheClaimsIsCompletedByTheNextDel) {
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "fd00::/64"}]]})");
  ASSERT_TRUE(f_->allocator->allocate(addRequest("k")));
  fs::remove(dir() + "/ips/10.1.2.2");
  auto r = f_->allocator->release({"k", "net1"});
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_TRUE(*r);
  EXPECT_EQ(countEntries(dir() + "/ips"), 0u);
  EXPECT_EQ(countEntries(dir() + "/attachments"), 0u);
  EXPECT_TRUE(verifyStore(*f_->store).empty());
}

TEST_F(FileStoreTest, OrphanedClaimsAreDroppedByGcAndReclaim) {
  open(R"({"ranges": [[{"subnet": "10.0.0.0/29"}]]})");
  for (const char* c : {"a", "b", "c", "d", "e"}) {
    add(c);
  }
  fs::remove(dir() + "/attachments/b:net1");  // an operator removing a corrupt record
  auto problems = verifyStore(*f_->store);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("10.0.0.3: held by b/net1, which has no record"));
  auto r = f_->allocator->reclaim();
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_TRUE(verifyStore(*f_->store).empty());
  EXPECT_EQ(add("f"), ip("10.0.0.3"));
}

TEST_F(FileStoreTest, IndexMarkWithoutClaimIsClearedByGc) {
  open(R"({"ranges": [[{"subnet": "10.0.0.0/29"}]]})");
  for (const char* c : {"a", "b", "c", "d", "e"}) {
    add(c);
  }
  // Removed by hand, index not updated: .4 looks held forever.
  fs::remove(dir() + "/ips/10.0.0.4");
  fs::remove(dir() + "/attachments/c:net1");
  EXPECT_THAT(verifyStore(*f_->store), ::testing::ElementsAre(HasSubstr("10.0.0.4 is marked held but has no claim")));
  auto gc = f_->allocator->gc({{"a", "net1"}, {"b", "net1"}, {"d", "net1"}, {"e", "net1"}}, "net");
  ASSERT_TRUE(gc) << gc.error().msg;
  EXPECT_TRUE(verifyStore(*f_->store).empty());
  EXPECT_EQ(add("f"), ip("10.0.0.4"));
  // An exhausted pool repairs itself the same way before giving up.
  fs::remove(dir() + "/ips/10.0.0.5");
  fs::remove(dir() + "/attachments/d:net1");
  EXPECT_EQ(add("g"), ip("10.0.0.5"));
  EXPECT_TRUE(verifyStore(*f_->store).empty());
}

TEST_F(FileStoreTest, Ipv6Slash64IsProbedFromTheCursor) {
  open(R"({"ranges": [[{"subnet": "fd00:5::/64"}]]})");
  std::set<net::IpAddress> got;
  for (int i = 0; i < 100; ++i) {
    got.insert(add("c" + std::to_string(i)));
  }
  EXPECT_EQ(got.size(), 100u);
  EXPECT_EQ(*got.begin(), ip("fd00:5::2"));
  EXPECT_EQ(*got.rbegin(), ip("fd00:5::65"));
  ASSERT_TRUE(f_->allocator->release({"c0", "net1"}));
  EXPECT_EQ(add("next"), ip("fd00:5::66"));
  auto u = f_->allocator->usage();
  ASSERT_TRUE(u);
  EXPECT_EQ((*u)[0].inUse, 100u);
  EXPECT_THAT(readFile(onlyIndexFile()), HasSubstr(" probe 0\n"));
}

TEST_F(FileStoreTest, ChangedRangesDropTheOldIndex) {
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  add("a");
  std::string oldIndex = onlyIndexFile();
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24", "rangeStart": "10.1.2.2", "rangeEnd": "10.1.2.100"}]]})");
  EXPECT_EQ(add("b"), ip("10.1.2.3")) << "the new index is rebuilt from ips/, so .2 stays taken";
  EXPECT_NE(onlyIndexFile(), oldIndex);
  // Back to the first configuration: its index is rebuilt too, not reused stale.
  ASSERT_TRUE(f_->allocator->release({"a", "net1"}));
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  EXPECT_EQ(add("c"), ip("10.1.2.2"));
  EXPECT_TRUE(verifyStore(*f_->store).empty());
}

TEST_F(FileStoreTest, LockTimeoutIsTryAgainLater) {
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  ibcni::testing::ChildHolder other([&](const ibcni::testing::ChildHolder::Report& report) {
    FileStore holder(FileStore::Options{dir(), {}, 1s});
    report(static_cast<bool>(holder.lock()));
  });
  ASSERT_TRUE(other.started());
  ASSERT_TRUE(other.held());
  StoreFixture impatient(dir(), R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})", netns_);
  impatient.store = std::make_unique<FileStore>(FileStore::Options{dir(), Allocator::spansOf(*impatient.config), 50ms});
  impatient.allocator = std::make_unique<Allocator>(*impatient.config, *impatient.store, netns_);
  auto e = impatient.allocator->allocate(addRequest("c1"));
  other.release();
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, cni::Errc::kTryAgainLater);
  EXPECT_THAT(e.error().msg, HasSubstr("locked by another invocation"));
}

TEST_F(FileStoreTest, CallsWithoutTheLockAreRefused) {
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  auto r = f_->store->find({"c1", "net1"});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().err, ENOLCK);
  auto lock = StoreLock::acquire(*f_->store);
  ASSERT_TRUE(lock);
  auto bad = f_->store->find({"../x", "net1"});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().err, EINVAL);
}

TEST_F(FileStoreTest, ReserveRefusesAnAddressHeldByAnotherAttachment) {
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}], [{"subnet": "fd00::/64"}]]})");
  auto lock = StoreLock::acquire(*f_->store);
  ASSERT_TRUE(lock);
  ASSERT_TRUE(f_->store->reserve({{"a", "net1"}, {}, "", 0, "", {ip("10.1.2.5")}, "", ""}));
  auto clash = f_->store->reserve({{"b", "net1"}, {}, "", 0, "", {ip("fd00::5"), ip("10.1.2.5")}, "", ""});
  ASSERT_FALSE(clash);
  EXPECT_EQ(clash.error().err, EEXIST);
  EXPECT_THAT(clash.error().op, HasSubstr("10.1.2.5 is held by a/net1"));
  // Nothing of b's is left behind.
  EXPECT_FALSE(fs::exists(dir() + "/attachments/b:net1"));
  EXPECT_FALSE(fs::is_symlink(dir() + "/ips/fd00::5"));
  auto problems = f_->store->verify();
  ASSERT_TRUE(problems);
  EXPECT_TRUE(problems->empty());
}

TEST_F(FileStoreTest, ReserveReplacingARecordReleasesWhatItDrops) {
  open(R"({"ranges": [[{"subnet": "10.1.2.0/24"}]]})");
  {
    auto lock = StoreLock::acquire(*f_->store);
    ASSERT_TRUE(lock);
    ASSERT_TRUE(f_->store->reserve({{"a", "net1"}, {}, "", 0, "", {ip("10.1.2.5"), ip("10.1.2.6")}, "", ""}));
    ASSERT_TRUE(f_->store->reserve({{"a", "net1"}, {}, "", 0, "", {ip("10.1.2.6")}, "", ""}));
    ASSERT_TRUE(f_->store->commit());
  }
  EXPECT_FALSE(fs::is_symlink(dir() + "/ips/10.1.2.5"));
  EXPECT_TRUE(fs::is_symlink(dir() + "/ips/10.1.2.6"));
  EXPECT_TRUE(verifyStore(*f_->store).empty());
}

}  // namespace
}  // namespace ibcni::ipam::testing
