// SPDX-License-Identifier: Apache-2.0
// FileStore under real concurrency and real crashes: many processes allocating at once, and
// processes SIGKILLed at random points in the middle of ADD and DEL.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "fake_store.h"
#include "store_test_util.h"
#include "support/exec_program.h"

namespace ibcni::ipam::testing {
namespace {

using namespace std::chrono_literals;

struct Outcome {
  std::vector<std::string> addresses;  // successful ADDs
  std::map<int, int> errors;           // code -> count
};

// Forks `processes` children that wait on a common start signal, then each run `adds` ADDs of
// their own attachments, and report "A <address>" or "E <code>" lines on a pipe.
Outcome runConcurrentAdds(const std::string& conf, int processes, int adds) {
  int start[2];
  int report[2];
  EXPECT_EQ(::pipe(start), 0);
  EXPECT_EQ(::pipe(report), 0);
  std::vector<pid_t> pids;
  for (int p = 0; p < processes; ++p) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(start[1]);
      ::close(report[0]);
      char c;
      (void)!::read(start[0], &c, 1);  // returns 0 when the parent closes its end: everyone starts
      EmbeddedIpamOptions o;
      o.netnsChecker = std::make_shared<FakeNetnsChecker>();
      EmbeddedIpam ipam(o);
      std::string lines;
      for (int i = 0; i < adds; ++i) {
        auto r = ipam.add(makeRequest(conf, "p" + std::to_string(p) + "-" + std::to_string(i)));
        lines += r ? "A " + r->ips[0].address.address.toString() + "\n"
                   : "E " + std::to_string(static_cast<int>(r.error().code)) + " " + r.error().msg + "\n";
      }
      (void)!::write(report[1], lines.data(), lines.size());
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  ::close(start[0]);
  ::close(report[1]);
  ::close(start[1]);  // go
  std::string text = ibcni::testing::readToEnd(report[0]);
  ::close(report[0]);
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  Outcome out;
  std::istringstream in(text);
  std::string kind;
  while (in >> kind) {
    std::string rest;
    std::getline(in, rest);
    if (kind == "A") {
      out.addresses.push_back(rest.substr(1));
    } else {
      out.errors[std::stoi(rest.substr(1))]++;
    }
  }
  return out;
}

TEST(FileStoreProcesses, ConcurrentAddsNeverShareAnAddress) {
  TempDir tmp;
  // 29 usable addresses (.2-.30), 8 processes x 6 ADDs = 48 attempts.
  std::string conf = netConfig(tmp.path(), R"("ranges": [[{"subnet": "10.3.0.0/27"}]])");
  Outcome out = runConcurrentAdds(conf, 8, 6);
  std::set<std::string> unique(out.addresses.begin(), out.addresses.end());
  EXPECT_EQ(out.addresses.size(), 29u) << "every address handed out once, no more";
  EXPECT_EQ(unique.size(), out.addresses.size()) << "no duplicates";
  EXPECT_EQ(out.errors.size(), 1u);
  EXPECT_EQ(out.errors[108], 48 - 29) << "the rest fail as exhausted";

  FakeNetnsChecker checker;
  StoreFixture f(tmp.path() + "/net1", R"({"ranges": [[{"subnet": "10.3.0.0/27"}]]})", checker);
  EXPECT_TRUE(verifyStore(*f.store).empty());
  EXPECT_EQ(countEntries(tmp.path() + "/net1/ips"), 29u);
  EXPECT_EQ(countEntries(tmp.path() + "/net1/attachments"), 29u);
}

TEST(FileStoreProcesses, ConcurrentDualStackAddsAndDels) {
  TempDir tmp;
  std::string conf = netConfig(tmp.path(), R"("ranges": [[{"subnet": "10.4.0.0/24"}], [{"subnet": "fd00:4::/64"}]])");
  int start[2];
  ASSERT_EQ(::pipe(start), 0);
  std::vector<pid_t> pids;
  for (int p = 0; p < 6; ++p) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(start[1]);
      char c;
      (void)!::read(start[0], &c, 1);
      EmbeddedIpamOptions o;
      o.netnsChecker = std::make_shared<FakeNetnsChecker>();
      EmbeddedIpam ipam(o);
      bool ok = true;
      for (int i = 0; i < 10; ++i) {
        auto req = makeRequest(conf, "p" + std::to_string(p) + "-" + std::to_string(i));
        ok = ok && ipam.add(req).has_value();
        if (i % 2 == 1) {
          ok = ok && ipam.del(req).has_value();  // every other attachment goes again
        }
      }
      ::_exit(ok ? 0 : 1);
    }
    pids.push_back(pid);
  }
  ::close(start[0]);
  ::close(start[1]);
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  FakeNetnsChecker checker;
  StoreFixture f(tmp.path() + "/net1", R"({"ranges": [[{"subnet": "10.4.0.0/24"}], [{"subnet": "fd00:4::/64"}]]})",
                 checker);
  EXPECT_TRUE(verifyStore(*f.store).empty());
  EXPECT_EQ(countEntries(tmp.path() + "/net1/attachments"), 30u);
  EXPECT_EQ(countEntries(tmp.path() + "/net1/ips"), 60u);
}

// A child that ADDs (and now and then DELs) attachments of its own until it is killed.
[[noreturn]] void churn(const std::string& conf, int iteration) {
  EmbeddedIpamOptions o;
  o.netnsChecker = std::make_shared<FakeNetnsChecker>();
  EmbeddedIpam ipam(o);
  for (int n = 0;; ++n) {
    auto req = makeRequest(conf, "k" + std::to_string(iteration) + "-" + std::to_string(n % 40));
    if (n % 3 == 2) {
      (void)ipam.del(req);
    } else {
      (void)ipam.add(req);
    }
  }
}

// How long a fresh process takes to its first ADD here (a forked child, as churn() runs): the kills
// below land within a few of those, whatever the machine (under qemu-user or the sanitizers it is
// ten times a native build's). A throwaway store, so that the checked one holds only the children's.
std::chrono::microseconds firstAddTime(const std::string& ranges) {
  TempDir calib;
  const std::string conf = netConfig(calib.path(), ranges);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    EmbeddedIpamOptions o;
    o.netnsChecker = std::make_shared<FakeNetnsChecker>();
    EmbeddedIpam ipam(o);
    ::_exit(ipam.add(makeRequest(conf, "calibration")).has_value() ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
}

TEST(FileStoreProcesses, SigkillAtRandomPointsLeavesAConsistentStore) {
  TempDir tmp;
  const std::string ipamJson = R"({"ranges": [[{"subnet": "10.5.0.0/20"}], [{"subnet": "fd00:5::/64"}]]})";
  const std::string ranges = R"("ranges": [[{"subnet": "10.5.0.0/20"}], [{"subnet": "fd00:5::/64"}]])";
  std::string conf = netConfig(tmp.path(), ranges);
  std::mt19937 rng(12345);
  // Up to 3 ms natively; on a slower machine up to three first ADDs, so that most children get
  // something done before the kill (the point is killing them in the middle of it).
  const auto first = firstAddTime(ranges);
  std::uniform_int_distribution<long> delayUs(0, std::max(3000l, 3 * static_cast<long>(first.count())));
  for (int i = 0; i < 100; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      churn(conf, i);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delayUs(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));
  }

  FakeNetnsChecker checker;
  StoreFixture f(tmp.path() + "/net1", ipamJson, checker);
  // The store opens and is consistent: every file parses, every claim is listed by its holder's
  // record, every set bit has its claim. Claims are unique by construction (one name per address).
  EXPECT_EQ(verifyStore(*f.store), std::vector<std::string>{});
  std::size_t records = countEntries(tmp.path() + "/net1/attachments");
  std::size_t claims = countEntries(tmp.path() + "/net1/ips");
  EXPECT_GT(records, 0u) << "the children got some work done";
  std::cout << "after 100 kills: " << records << " attachments, " << claims << " claims\n";

  // No address is held twice, and each attachment holds at most one per range set.
  std::vector<Allocation> all;
  {
    auto lock = StoreLock::acquire(*f.store);
    ASSERT_TRUE(lock);
    auto list = f.store->list();
    ASSERT_TRUE(list) << list.error().describe();
    all = *list;
    std::set<net::IpAddress> held;
    std::size_t owned = 0;
    for (const auto& a : all) {
      for (const auto& addr : a.addresses) {
        auto owner = f.store->ownerOf(addr);
        ASSERT_TRUE(owner);
        if (*owner && **owner == a.key) {
          EXPECT_TRUE(held.insert(addr).second) << addr.toString() << " held twice";
          ++owned;
        }
      }
    }
    EXPECT_EQ(owned, claims) << "every claim belongs to a record";
  }
  // The store still works, and DEL of each attachment cleans everything up.
  EmbeddedIpamOptions o;
  o.netnsChecker = std::make_shared<FakeNetnsChecker>();
  EmbeddedIpam ipam(o);
  auto fresh = ipam.add(makeRequest(conf, "after-the-storm"));
  ASSERT_TRUE(fresh) << fresh.error().msg;
  ASSERT_TRUE(ipam.del(makeRequest(conf, "after-the-storm")));
  for (const auto& a : all) {
    auto d = ipam.del(makeRequest(conf, a.key.containerId, "", "", a.key.ifName));
    ASSERT_TRUE(d) << d.error().msg;
  }
  EXPECT_EQ(countEntries(tmp.path() + "/net1/attachments"), 0u);
  EXPECT_EQ(countEntries(tmp.path() + "/net1/ips"), 0u);
  EXPECT_EQ(countEntries(tmp.path() + "/net1/tmp"), 0u);
  auto usage = f.allocator->usage();
  ASSERT_TRUE(usage);
  EXPECT_EQ((*usage)[0].inUse, 0u);
  EXPECT_EQ((*usage)[1].inUse, 0u);
  EXPECT_EQ(verifyStore(*f.store), std::vector<std::string>{});
}

}  // namespace
}  // namespace ibcni::ipam::testing
