// SPDX-License-Identifier: Apache-2.0
// ADD time must not grow with pool fill: on a /16, the median ADD at 99% full stays within a
// small factor of the median on an empty pool.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <algorithm>
#include <chrono>
#include <iostream>
#include <random>

#include "fake_store.h"
#include "store_test_util.h"

namespace ibcni::ipam::testing {
namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

TEST(FillIndependence, MedianAddAt99PercentIsWithin3xOfEmpty) {
  TempDir tmp;
  const std::string body = R"("ranges": [[{"subnet": "10.20.0.0/16"}]])";
  const std::string ipamJson = "{" + body + "}";
  std::string emptyConf = netConfig(tmp.path(), body, "", "empty");
  std::string fullConf = netConfig(tmp.path(), body, "", "full");
  EmbeddedIpamOptions o;
  o.netnsChecker = std::make_shared<FakeNetnsChecker>();
  EmbeddedIpam ipam(o);

  // Fill network "full" to 99% by direct store calls, in random order, so that the free addresses
  // are scattered and the cursor sits anywhere.
  FakeNetnsChecker checker;
  StoreFixture f(tmp.path() + "/full", ipamJson, checker);
  std::vector<std::uint32_t> offsets(65533);  // 10.20.0.2 .. 10.20.255.254
  for (std::uint32_t i = 0; i < offsets.size(); ++i) {
    offsets[i] = i;
  }
  std::shuffle(offsets.begin(), offsets.end(), std::mt19937(7));
  std::size_t fill = offsets.size() * 99 / 100;
  auto t0 = Clock::now();
  {
    auto lock = StoreLock::acquire(*f.store);
    ASSERT_TRUE(lock);
    U128 base = toInt(ip("10.20.0.2"));
    for (std::size_t i = 0; i < fill; ++i) {
      Allocation a{{"f" + std::to_string(i), "net1"}, {}, "", 0, "", {fromInt(base + offsets[i], AF_INET)}, "", ""};
      auto r = f.store->reserve(a);
      ASSERT_TRUE(r) << r.error().describe();
    }
    ASSERT_TRUE(f.store->commit());
  }
  double fillSeconds = std::chrono::duration<double>(Clock::now() - t0).count();

  // 200 ADDs on each network, alternating, so that both see the same machine load.
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(ipam.add(makeRequest(emptyConf, "warm" + std::to_string(i))));
  }
  std::vector<double> emptyUs;
  std::vector<double> fullUs;
  for (int i = 0; i < 200; ++i) {
    std::string cid = "c" + std::to_string(i);
    for (auto [conf, out] : {std::pair{&emptyConf, &emptyUs}, std::pair{&fullConf, &fullUs}}) {
      auto req = makeRequest(*conf, cid, "/run/netns/" + cid);
      auto start = Clock::now();
      auto r = ipam.add(req);
      out->push_back(micros(Clock::now() - start));
      ASSERT_TRUE(r) << r.error().msg;
    }
  }
  double empty = median(emptyUs);
  double full = median(fullUs);
  auto usage = f.allocator->usage();
  ASSERT_TRUE(usage);
  EXPECT_EQ((*usage)[0].inUse, fill + 200);
  std::cout << "median ADD: " << empty << " us at 0% full, " << full << " us at 99% full (" << fill
            << " of 65533 held; filled in " << fillSeconds << " s)\n";
  ::testing::Test::RecordProperty("median_add_us_empty", std::to_string(empty));
  ::testing::Test::RecordProperty("median_add_us_99", std::to_string(full));
  EXPECT_LT(full, 3 * empty) << "ADD slows down as the pool fills";
}

}  // namespace
}  // namespace ibcni::ipam::testing
