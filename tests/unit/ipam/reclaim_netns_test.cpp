// SPDX-License-Identifier: Apache-2.0
// Self-reclaim against real network namespaces bound to files (label "netns": needs root).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/mount.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

#include "store_test_util.h"
#include "support/test_netns.h"

namespace ibcni::ipam::testing {
namespace {

using ::testing::HasSubstr;

// Detaches a bind mount when the test ends, passed or not, before its directory is removed.
struct Unmount {
  explicit Unmount(std::string p) : path(std::move(p)) {}
  std::string path;
  Unmount(const Unmount&) = delete;
  Unmount& operator=(const Unmount&) = delete;
  ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
};

std::optional<ibcni::testing::TestNetns> makeNetns(const char* label, std::string& skipReason) {
  auto ns = ibcni::testing::TestNetns::create(label);
  if (!ns) {
    skipReason = "cannot create a network namespace bound to a file: " + ns.error().describe();
    return std::nullopt;
  }
  return std::move(*ns);
}

TEST(SelfReclaimNetns, LiveNamespaceKeepsItsAddressDeletedOneIsReclaimed) {
  std::string why;
  auto live = makeNetns("live", why);
  if (!live) {
    GTEST_SKIP() << why;
  }
  auto doomed = makeNetns("doomed", why);
  if (!doomed) {
    GTEST_SKIP() << why;
  }
  TempDir tmp;
  // The doomed pod's namespace is bound where runtimes put them (like /run/netns/<name>): a file
  // in a directory that outlives it. (TestNetns removes its own directory too, and a missing
  // directory never counts as proof that a namespace is gone.)
  std::string doomedPath = tmp.path() + "/cni-doomed";
  std::ofstream(doomedPath) << "";
  ASSERT_EQ(::mount(doomed->path().c_str(), doomedPath.c_str(), nullptr, MS_BIND, nullptr), 0) << std::strerror(errno);
  Unmount unmount{doomedPath};
  doomed.reset();  // the bind mount keeps the namespace alive
  std::string conf = netConfig(tmp.path(), R"("ranges": [[{"subnet": "10.7.0.0/29"}]])");  // 5 addresses
  EmbeddedIpam ipam;                                                                       // the production checker
  auto kept = ipam.add(makeRequest(conf, "live", live->path()));
  ASSERT_TRUE(kept) << kept.error().msg;
  ASSERT_TRUE(ipam.add(makeRequest(conf, "doomed", doomedPath)));
  for (const char* c : {"x", "y", "z"}) {
    ASSERT_TRUE(ipam.add(makeRequest(conf, c, live->path())));
  }
  // Full, and every holder alive: nothing may be taken.
  auto full = ipam.add(makeRequest(conf, "new", live->path()));
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, kIpamExhausted);
  auto none = ipam.reclaim(makeRequest(conf, ""));
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty()) << "a live netns never loses its address";

  // Unmounted and removed, as a runtime does when the pod goes (and the DEL never came).
  ASSERT_EQ(::umount2(doomedPath.c_str(), MNT_DETACH), 0);
  ASSERT_EQ(::unlink(doomedPath.c_str()), 0);
  auto r = ipam.add(makeRequest(conf, "new", live->path()));
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_EQ(r->ips[0].address.toString(), "10.7.0.3/29") << "the deleted pod's address";
  // The live pod still holds its address.
  EXPECT_TRUE(ipam.check(makeRequest(conf, "live")));
  auto again = ipam.reclaim(makeRequest(conf, ""));
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->empty());
}

TEST(SelfReclaimNetns, RecordedInodeTellsANewNamespaceAtTheSamePath) {
  std::string why;
  auto first = makeNetns("ns", why);
  if (!first) {
    GTEST_SKIP() << why;
  }
  auto second = makeNetns("ns", why);
  if (!second) {
    GTEST_SKIP() << why;
  }
  auto checker = os::systemNetnsChecker();
  std::uint64_t ino = checker->identify(first->path());
  ASSERT_NE(ino, 0u);
  EXPECT_EQ(checker->check(first->path(), ino), os::NetnsLiveness::kAlive);
  // A different namespace behind a path (a reused name): not the pod's any more.
  EXPECT_EQ(checker->check(second->path(), ino), os::NetnsLiveness::kGone);
}

}  // namespace
}  // namespace ibcni::ipam::testing
