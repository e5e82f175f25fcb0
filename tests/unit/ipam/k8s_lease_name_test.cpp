// SPDX-License-Identifier: Apache-2.0
// KubernetesBlockBackend's Lease names and label values, without a server: valid DNS-1123
// subdomains of at most 253 characters, readable for the usual keys, and never the same name for
// two distinct (pool, kind, key), IPv6 keys and awkward bytes included.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <regex>
#include <string>

#include "k8s_block_backend.h"

namespace ibcni::ipam {
namespace {

const std::regex kSubdomain(R"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)");
const std::regex kLabelValue(R"((([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?)");

using K = KubernetesBlockBackend;

TEST(K8sLeaseName, UsualKeysStayReadable) {
  EXPECT_EQ(K::leaseName(ClaimKind::kBlock, "ib-pool", "10.56.0.32-27"), "ibcni-ib-pool--b--10.56.0.32-27");
  EXPECT_EQ(K::leaseName(ClaimKind::kAddress, "ib-pool", "10.56.0.5"), "ibcni-ib-pool--a--10.56.0.5");
  EXPECT_EQ(K::leaseName(ClaimKind::kBlock, "p", "fd00::-120"), "ibcni-p--b--fd00z3az3a-120");
  EXPECT_EQ(K::poolLeaseName("ib-pool"), "ibcni-ib-pool--pool");
}

TEST(K8sLeaseName, DistinctKeysNeverShareANameAndEveryNameIsValid) {
  std::vector<std::string> pieces{"a", "z", "-", ".", ":", "A", "0", "--", "-b-", "b", "pool", "fd00::", "10.0.0.0-24",
                                  "::1", "x.y", "a--b", "z2d", "z3a", "-a", "a-", ".a", "a."};
  std::mt19937 rng(7);
  std::vector<std::string> names;
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int j = 0; j < n; ++j) {
      s += pieces[rng() % pieces.size()];
    }
    names.push_back(s);
  }
  std::map<std::string, std::string> seen;  // lease name -> what made it
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto& pool = names[i];
    const auto& key = names[(i * 7 + 3) % names.size()];
    for (const auto kind : {ClaimKind::kBlock, ClaimKind::kAddress}) {
      const std::string made = (kind == ClaimKind::kBlock ? "b:" : "a:") + pool + "|" + key;
      const std::string name = K::leaseName(kind, pool, key);
      ASSERT_FALSE(name.empty());
      EXPECT_TRUE(std::regex_match(name, kSubdomain)) << name << " from " << made;
      const auto [it, fresh] = seen.emplace(name, made);
      EXPECT_TRUE(fresh || it->second == made) << name << " from both " << it->second << " and " << made;
    }
    const std::string pn = K::poolLeaseName(pool);
    EXPECT_TRUE(std::regex_match(pn, kSubdomain)) << pn;
    const auto [it, fresh] = seen.emplace(pn, "pool:" + pool);
    EXPECT_TRUE(fresh || it->second == "pool:" + pool) << pn << " from both " << it->second << " and pool " << pool;
  }
}

TEST(K8sLeaseName, TheLongestIPv6KeyFitsAndTooLongIsEmpty) {
  const std::string pool(63, 'p');
  const std::string v6 = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff-128";
  const std::string name = K::leaseName(ClaimKind::kBlock, pool, v6);
  ASSERT_FALSE(name.empty());
  EXPECT_LE(name.size(), 253U);
  EXPECT_TRUE(K::leaseName(ClaimKind::kBlock, std::string(100, ':'), v6).empty());
}

TEST(K8sLabelValue, ValidValuesStayOthersAreHashed) {
  EXPECT_EQ(K::labelValue("node-7.example"), "node-7.example");
  const std::string longName(80, 'n');
  const std::string h = K::labelValue(longName);
  EXPECT_TRUE(std::regex_match(h, kLabelValue)) << h;
  EXPECT_EQ(h.size(), 17U);
  EXPECT_NE(K::labelValue(longName + "x"), h);
  EXPECT_TRUE(std::regex_match(K::labelValue("a b"), kLabelValue));
}

TEST(K8sOptions, ValidateRefusesWhatCannotWork) {
  K::Options o;
  o.server = "https://10.0.0.1:6443";
  EXPECT_TRUE(K::validate(o));
  o.server = "10.0.0.1:6443";
  EXPECT_FALSE(K::validate(o));
  o.server = "https://10.0.0.1:6443/";
  EXPECT_FALSE(K::validate(o));
  o.server = "https://10.0.0.1:6443";
  o.namespace_ = "Kube_System";
  EXPECT_FALSE(K::validate(o));
}

}  // namespace
}  // namespace ibcni::ipam
