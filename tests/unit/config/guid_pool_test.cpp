// SPDX-License-Identifier: Apache-2.0
// guidPool (sriov mode): every key typed and range-checked (error 7 naming the field), defaults, the
// range in whole blocks without the all-zero and all-ones GUIDs, the cluster object read exactly as
// ipam.cluster is, refused in ipoib mode, and carried (not raised) by DEL.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "ibcni/config/guid_pool_conf.h"
#include "ibcni/config/ipam_conf.h"
#include "ibcni/config/net_conf.h"
#include "ipam/config/guid_pool.h"

namespace ibcni::config {
namespace {

using ::testing::HasSubstr;

constexpr const char* kRange = R"("range": "02:00:00:00:00:00:00:00-02:00:00:00:00:ff:ff:ff")";

std::string request(const std::string& guidPool, const std::string& name = "ib-net",
                    const std::string& mode = "sriov") {
  return R"({"cniVersion": "1.1.0", "name": ")" + name + R"(", "type": "ibcni", "mode": ")" + mode +
         R"(", "device": "vf0", "master": "ib0", "guidPool": )" + guidPool + "}";
}

GuidPoolConf parseOk(const std::string& guidPool, const std::string& name = "ib-net") {
  auto c = parseNetConf(request(guidPool, name), cni::Command::kAdd);
  EXPECT_TRUE(c) << (c ? "" : c.error().msg);
  if (!c || !c->guidPool || !*c->guidPool) {
    ADD_FAILURE() << "no guidPool for " << guidPool;
    return {};
  }
  return **c->guidPool;
}

// The error ADD gets for `guidPool`: 7, naming every one of `parts`.
std::string expectInvalid(const std::string& guidPool, const std::vector<std::string>& parts) {
  auto c = parseNetConf(request(guidPool), cni::Command::kAdd);
  EXPECT_FALSE(c.has_value()) << "accepted: " << guidPool;
  if (c) {
    return {};
  }
  EXPECT_EQ(c.error().code, cni::Errc::kInvalidConfig) << c.error().msg;
  for (const auto& p : parts) {
    EXPECT_THAT(c.error().msg, HasSubstr(p)) << "for " << guidPool;
  }
  return c.error().msg;
}

std::string withCluster(const std::string& cluster) {
  return std::string("{") + kRange + R"(, "cluster": )" + cluster + "}";
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  for (auto at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

TEST(GuidPool, EveryKeyIsRead) {
  auto g = parseOk(R"({"range": "02:00:00:00:00:01:00:00-02:00:00:00:00:01:ff:ff", "blockSize": 1024,
      "pool": "ib-guids.a", "assign": "always", "dataDir": "/var/lib/guids/",
      "cluster": {"backend": "etcd", "nodeName": "gpu-7", "timeoutMs": 900, "releaseAfterSeconds": 30,
                  "leaseDurationSeconds": 60, "minBlocksPerNode": 2,
                  "etcd": {"endpoints": ["https://10.0.0.1:2379"], "prefix": "/g/"}}})");
  EXPECT_EQ(g.first.value, 0x0200000000010000ULL);
  EXPECT_EQ(g.last.value, 0x020000000001ffffULL);
  EXPECT_EQ(g.blockSize, 1024U);
  EXPECT_EQ(g.pool, "ib-guids.a");
  EXPECT_EQ(g.assign, GuidAssign::kAlways);
  EXPECT_EQ(g.dataDir, "/var/lib/guids");
  ASSERT_TRUE(g.cluster);
  EXPECT_EQ(g.cluster->backend, ClusterBackend::kEtcd);
  EXPECT_EQ(g.cluster->pool, "ib-guids.a");
  EXPECT_EQ(g.cluster->poolPath, "guidPool.pool");
  EXPECT_EQ(g.cluster->blockSize, 1024U);
  EXPECT_EQ(g.cluster->nodeName, "gpu-7");
  EXPECT_EQ(g.cluster->timeout.count(), 900);
  EXPECT_EQ(g.cluster->releaseAfter.count(), 30);
  EXPECT_EQ(g.cluster->leaseDuration.count(), 60);
  EXPECT_EQ(g.cluster->minBlocksPerNode, 2U);
  EXPECT_EQ(g.cluster->etcd.endpoints, std::vector<std::string>{"https://10.0.0.1:2379"});
  EXPECT_EQ(g.cluster->etcd.prefix, "/g/");
}

TEST(GuidPool, Defaults) {
  auto g = parseOk(std::string("{") + kRange + "}", "ib-partition-1");
  EXPECT_EQ(g.first.value, 0x0200000000000000ULL);
  EXPECT_EQ(g.last.value, 0x0200000000ffffffULL);
  EXPECT_EQ(g.blockSize, 256U);
  EXPECT_EQ(g.pool, "ib-partition-1");
  EXPECT_EQ(g.assign, GuidAssign::kWhenUnset);
  EXPECT_TRUE(g.dataDir.empty()) << "the caller's default, as ipam.dataDir";
  EXPECT_FALSE(g.cluster) << "node-local";
  auto k = parseOk(withCluster("{}"));
  ASSERT_TRUE(k.cluster);
  EXPECT_EQ(k.cluster->backend, ClusterBackend::kKubernetes);
  EXPECT_EQ(k.cluster->pool, "ib-net");
  EXPECT_EQ(k.cluster->poolPath, "the network name");
  EXPECT_EQ(k.cluster->blockSize, 256U);
  EXPECT_EQ(k.cluster->kubernetes.leaseNamespace, "kube-system");
  auto one = parseOk(R"({"range": "00:00:00:00:00:00:00:01-00:00:00:00:00:00:00:01", "blockSize": 1})");
  EXPECT_EQ(one.first.value, 1U);
  EXPECT_EQ(one.last.value, 1U);
  auto noPool = parseNetConf(request(std::string("{") + kRange + "}", "IB_net"), cni::Command::kAdd);
  ASSERT_FALSE(noPool);
  EXPECT_THAT(noPool.error().msg, HasSubstr("guidPool.pool"));
  EXPECT_THAT(noPool.error().msg, HasSubstr("IB_net"));
}

struct BadCase {
  std::string guidPool;
  std::vector<std::string> parts;
};

TEST(GuidPool, EveryBadValueNamesItsField) {
  const std::string r = kRange;
  const std::vector<BadCase> cases = {
      {R"("02:00:00:00:00:00:00:00-02:00:00:00:00:ff:ff:ff")", {"invalid guidPool =", "must be an object"}},
      {R"({"blockSize": 256})", {"guidPool.range is missing", "FIRST-LAST"}},
      {R"({"range": 5})", {"guidPool.range", "FIRST-LAST"}},
      {R"({"range": "02:00:00:00:00:00:00:00"})", {"guidPool.range", "FIRST-LAST"}},
      {R"({"range": "02:00:00:00:00:00:00:00-02:00:00:00:00:ff:ff"})", {"guidPool.range", "8 colon-separated"}},
      {R"({"range": "02:00:00:00:00:00:00:00-02:00:00:00:00:ff:ff:ff-"})", {"guidPool.range"}},
      {R"({"range": "02:00:00:00:00:ff:ff:ff-02:00:00:00:00:00:00:00"})",
       {"guidPool.range", "lower GUID first", "\"02:00:00:00:00:00:00:00-02:00:00:00:00:ff:ff:ff\""}},
      {"{" + r + R"(, "blockSize": 48})", {"guidPool.blockSize", "48", "power of two from 1 to 65536"}},
      {"{" + r + R"(, "blockSize": 0})", {"guidPool.blockSize", "from 1 to 65536"}},
      {"{" + r + R"(, "blockSize": 131072})", {"guidPool.blockSize", "131072"}},
      {"{" + r + R"(, "blockSize": -256})", {"guidPool.blockSize"}},
      {"{" + r + R"(, "blockSize": "256"})", {"guidPool.blockSize"}},
      {"{" + r + R"(, "blockSize": 25.6})", {"guidPool.blockSize"}},
      {"{" + r + R"(, "pool": "IB_Pool"})", {"guidPool.pool", "IB_Pool", "lowercase"}},
      {"{" + r + R"(, "pool": ""})", {"guidPool.pool"}},
      {"{" + r + R"(, "pool": 7})", {"guidPool.pool"}},
      {"{" + r + R"(, "assign": "sometimes"})", {"guidPool.assign", "sometimes", "\"when-unset\"", "\"always\""}},
      {"{" + r + R"(, "assign": true})", {"guidPool.assign"}},
      {"{" + r + R"(, "dataDir": "relative/dir"})", {"invalid guidPool.dataDir = \"relative/dir\"", "absolute"}},
      {"{" + r + R"(, "dataDir": "/run/../etc"})", {"guidPool.dataDir"}},
      {"{" + r + R"(, "dataDir": 1})", {"guidPool.dataDir"}},
      {"{" + r + R"(, "cluster": "yes"})", {"guidPool.cluster", "must be an object"}},
      {"{" + r + R"(, "rnage": "x"})", {"guidPool.rnage", "not a key of guidPool", "range"}},
  };
  for (const auto& c : cases) {
    expectInvalid(c.guidPool, c.parts);
  }
}

TEST(GuidPool, TheRangeHoldsNeitherTheAllZeroNorTheAllOnesGuid) {
  expectInvalid(R"({"range": "00:00:00:00:00:00:00:00-00:00:00:00:00:00:ff:ff"})",
                {"guidPool.range", "all-zero GUID", "start the range at 00:00:00:00:00:00:01:00"});
  expectInvalid(R"({"range": "ff:ff:ff:ff:ff:ff:ff:00-ff:ff:ff:ff:ff:ff:ff:ff", "blockSize": 16})",
                {"guidPool.range", "all-ones GUID", "end the range at ff:ff:ff:ff:ff:ff:ff:ef"});
  expectInvalid(R"({"range": "00:00:00:00:00:00:00:00-ff:ff:ff:ff:ff:ff:ff:ff"})", {"guidPool.range", "all-zero"});
  parseOk(R"({"range": "00:00:00:00:00:00:01:00-ff:ff:ff:ff:ff:ff:fe:ff"})");
}

TEST(GuidPool, TheRangeHoldsWholeBlocks) {
  expectInvalid(R"({"range": "02:00:00:00:00:00:00:10-02:00:00:00:00:00:ff:ff"})",
                {"guidPool.range", "does not start on a block boundary (guidPool.blockSize 256)",
                 "start it at 02:00:00:00:00:00:00:00 or 02:00:00:00:00:00:01:00, or give a smaller blockSize"});
  expectInvalid(R"({"range": "02:00:00:00:00:00:00:00-02:00:00:00:00:00:01:7f"})",
                {"guidPool.range", "does not end on a block boundary (guidPool.blockSize 256)",
                 "end it at 02:00:00:00:00:00:00:ff or 02:00:00:00:00:00:01:ff, or give a smaller blockSize"});
  expectInvalid(R"({"range": "02:00:00:00:00:00:00:00-02:00:00:00:00:00:00:7f"})",
                {"does not end on a block boundary", "end it at 02:00:00:00:00:00:00:ff,"});
  expectInvalid(R"({"range": "02:00:00:00:00:00:00:10-02:00:00:00:00:00:00:20"})",
                {"does not start on a block boundary", "02:00:00:00:00:00:00:00, or give"});
  auto g = parseOk(R"({"range": "02:00:00:00:00:00:00:10-02:00:00:00:00:00:00:2f", "blockSize": 16})");
  EXPECT_EQ(g.first.value, 0x0200000000000010ULL);
  EXPECT_EQ(g.last.value, 0x020000000000002fULL);
}

// The cluster object is ipam.cluster's: the same outcome, the same message with the path swapped.
TEST(GuidPool, TheClusterObjectIsReadAsIpamClusterIs) {
  const std::vector<std::string> refused = {
      R"({"backend": "consul"})",
      R"({"backend": 1})",
      R"({"nodeName": "Node_1"})",
      R"({"timeoutMs": 50})",
      R"({"timeoutMs": 18446744073709551615})",
      R"({"releaseAfterSeconds": -5})",
      R"({"leaseDurationSeconds": 5})",
      R"({"minBlocksPerNode": 2000})",
      R"({"kubernetes": {"kubeconfig": "relative/k"}})",
      R"({"kubernetes": {"namespace": "Kube System"}})",
      R"({"kubernetes": {"server": "x"}})",
      R"({"kubernetes": []})",
      R"({"backend": "etcd"})",
      R"({"backend": "etcd", "etcd": {}})",
      R"({"backend": "etcd", "etcd": {"endpoints": ["ftp://a:1"]}})",
      R"({"backend": "etcd", "etcd": {"endpoints": ["http://a:1", "http://a:1/"]}})",
      R"({"backend": "etcd", "etcd": {"endpoints": ["http://a:1"], "prefix": "ibcni"}})",
      R"({"backend": "etcd", "etcd": {"endpoints": ["http://a:1"], "certFile": "/c.crt"}})",
      R"({"etcd": {"endpoints": ["http://a:1"]}})",
      R"({"backend": "kubernetes", "etcd": {"endpoints": ["http://a:1"]}})",
  };
  for (const auto& cluster : refused) {
    auto ip = parseIpamConfig(R"({"type": "ibcni-ipam", "subnet": "10.56.0.0/16", "cluster": )" + cluster + "}");
    ASSERT_FALSE(ip) << cluster;
    const std::string guid = expectInvalid(withCluster(cluster), {"guidPool.cluster"});
    EXPECT_EQ(guid, replaced(ip.error().msg, "ipam.cluster", "guidPool.cluster")) << cluster;
    EXPECT_THAT(guid, ::testing::Not(HasSubstr("ipam."))) << cluster;
  }
  const std::vector<std::string> accepted = {
      R"({"backend": "etcd", "nodeName": "n-1", "etcd": {"endpoints": ["http://a:1"], "caFile": "/etc/ca.crt"}})",
      R"({"kubernetes": {"kubeconfig": "/etc/k.conf", "namespace": "ibcni", "context": "c1"}, "timeoutMs": 100})",
      R"({"releaseAfterSeconds": 0, "leaseDurationSeconds": 86400, "minBlocksPerNode": 3})",
  };
  for (const auto& cluster : accepted) {
    auto ip = parseIpamConfig(R"({"type": "ibcni-ipam", "subnet": "10.56.0.0/16", "cluster": )" + cluster + "}");
    ASSERT_TRUE(ip && ip->cluster) << cluster;
    auto g = parseOk(withCluster(cluster));
    ASSERT_TRUE(g.cluster) << cluster;
    const ClusterConf& a = *ip->cluster;
    const ClusterConf& b = *g.cluster;
    EXPECT_EQ(a.backend, b.backend) << cluster;
    EXPECT_EQ(a.nodeName, b.nodeName) << cluster;
    EXPECT_EQ(a.timeout, b.timeout) << cluster;
    EXPECT_EQ(a.releaseAfter, b.releaseAfter) << cluster;
    EXPECT_EQ(a.leaseDuration, b.leaseDuration) << cluster;
    EXPECT_EQ(a.kubernetes.kubeconfig, b.kubernetes.kubeconfig) << cluster;
    EXPECT_EQ(a.kubernetes.leaseNamespace, b.kubernetes.leaseNamespace) << cluster;
    EXPECT_EQ(a.kubernetes.context, b.kubernetes.context) << cluster;
    EXPECT_EQ(a.etcd.endpoints, b.etcd.endpoints) << cluster;
    EXPECT_EQ(a.etcd.caFile, b.etcd.caFile) << cluster;
    EXPECT_EQ(a.minBlocksPerNode, b.minBlocksPerNode) << cluster;
  }
}

TEST(GuidPool, PoolAndBlockSizeBelongToGuidPoolNotToItsCluster) {
  expectInvalid(withCluster(R"({"pool": "p1"})"), {"guidPool.cluster.pool", "p1", "give it as guidPool.pool"});
  expectInvalid(withCluster(R"({"blockSize": 64})"),
                {"guidPool.cluster.blockSize", "64", "give it as guidPool.blockSize"});
  const std::string unknown = expectInvalid(withCluster(R"({"blocksize": 64})"),
                                            {"guidPool.cluster.blocksize", "not a key of guidPool.cluster"});
  EXPECT_THAT(unknown, ::testing::Not(HasSubstr("blockSize"))) << "not offered as a known key";
}

TEST(GuidPool, IpoibModeRefusesIt) {
  auto c = parseNetConf(request(std::string("{") + kRange + "}", "ib-net", "ipoib"), cni::Command::kAdd);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(c.error().msg, HasSubstr("guidPool"));
  EXPECT_THAT(c.error().msg, HasSubstr("sriov-mode key"));
  auto check = parseNetConf(request(std::string("{") + kRange + "}", "ib-net", "ipoib"), cni::Command::kCheck);
  ASSERT_FALSE(check);
  EXPECT_THAT(check.error().msg, HasSubstr("sriov-mode key"));
}

// DEL must put the VF back whatever is wrong with guidPool: the parse succeeds and carries the error.
TEST(GuidPool, ABrokenGuidPoolDoesNotFailDelOrGc) {
  for (const auto& [pool, mode] : std::vector<std::pair<std::string, std::string>>{
           {R"({"range": "02:00:00:00:00:00:00:10-02:00:00:00:00:00:ff:ff"})", "sriov"},
           {R"({"rnage": 1})", "sriov"},
           {std::string("{") + kRange + "}", "ipoib"}}) {
    ASSERT_FALSE(parseNetConf(request(pool, "ib-net", mode), cni::Command::kAdd)) << pool;
    for (auto command : {cni::Command::kDel, cni::Command::kGc}) {
      auto c = parseNetConf(request(pool, "ib-net", mode), command);
      ASSERT_TRUE(c) << pool << ": " << c.error().msg;
      ASSERT_TRUE(c->guidPool) << pool;
      ASSERT_FALSE(*c->guidPool) << pool;
      EXPECT_EQ(c->guidPool->error().code, cni::Errc::kInvalidConfig);
      EXPECT_THAT(c->guidPool->error().msg, HasSubstr("guidPool")) << pool;
    }
  }
  auto none = parseNetConf(R"({"cniVersion": "1.1.0", "name": "n", "type": "ibcni", "device": "vf0"})",
                           cni::Command::kDel);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->guidPool);
  auto ok = parseNetConf(request(std::string("{") + kRange + "}"), cni::Command::kDel);
  ASSERT_TRUE(ok && ok->guidPool && *ok->guidPool);
  EXPECT_EQ((**ok->guidPool).blockSize, 256U);
  EXPECT_TRUE(ok->unknownKeys.empty()) << "guidPool is a known key";
}

TEST(GuidPool, ItsClusterObjectKnowsItsFieldPaths) {
  auto g = parseOk(withCluster(R"({"backend": "etcd", "etcd": {"endpoints": ["http://10.0.0.1:2379"]}})"));
  ASSERT_TRUE(g.cluster);
  EXPECT_EQ(g.cluster->path, "guidPool.cluster");
  EXPECT_EQ(g.cluster->poolKeysPath, "guidPool");
  auto ipam = parseIpamConfig(R"({"type": "ibcni-ipam", "subnet": "10.56.0.0/16", "cluster": {}})");
  ASSERT_TRUE(ipam && ipam->cluster) << (ipam ? "no cluster" : ipam.error().msg);
  EXPECT_EQ(ipam->cluster->path, "ipam.cluster");
  EXPECT_EQ(ipam->cluster->poolKeysPath, "ipam.cluster");
}

TEST(GuidPool, TheMachineryRunsItAsOneGuidRangeSetDescribedByItsEnds) {
  auto g = parseOk(R"({"range": "02:00:00:00:00:01:00:00-02:00:00:00:00:01:ff:ff", "blockSize": 1024,
      "dataDir": "/var/lib/guids", "cluster": {"backend": "etcd", "etcd": {"endpoints": ["http://10.0.0.1:2379"]}}})");
  const IpamConfig c = guidIpamConfig(g);
  ASSERT_EQ(c.rangeSets.size(), 1U);
  const RangeSet& set = c.rangeSets[0];
  EXPECT_EQ(set.family, net::kFamilyGuid);
  EXPECT_EQ(set.path, "guidPool.range");
  ASSERT_EQ(set.ranges.size(), 1U);
  EXPECT_EQ(set.ranges[0].path, "guidPool.range");
  EXPECT_EQ(set.ranges[0].rangeStart, net::IpAddress::fromGuid(net::Guid{0x0200000000010000ULL}));
  EXPECT_EQ(set.ranges[0].rangeEnd, net::IpAddress::fromGuid(net::Guid{0x020000000001ffffULL}));
  EXPECT_EQ(set.ranges[0].describe(), "02:00:00:00:00:01:00:00-02:00:00:00:00:01:ff:ff");
  EXPECT_EQ(set.describe(), "02:00:00:00:00:01:00:00-02:00:00:00:00:01:ff:ff");
  EXPECT_EQ(c.dataDir, "/var/lib/guids");
  ASSERT_TRUE(c.cluster);
  EXPECT_EQ(c.cluster->blockSize, 1024U);
  EXPECT_EQ(c.cluster->path, "guidPool.cluster");
  EXPECT_TRUE(c.exclude.empty());
  EXPECT_TRUE(c.reservations.empty());
  EXPECT_TRUE(c.networkFile.empty());
  EXPECT_FALSE(guidIpamConfig(parseOk(std::string("{") + kRange + "}")).cluster);

  // An address range reads as before.
  auto ip = parseIpamConfig(R"({"type": "ibcni-ipam", "ranges": [[{"subnet": "10.1.2.0/24"}],
      [{"subnet": "fd00::/120", "rangeStart": "fd00::10", "rangeEnd": "fd00::20"}]]})");
  ASSERT_TRUE(ip) << ip.error().msg;
  EXPECT_EQ(ip->rangeSets[0].describe(), "10.1.2.0/24 (10.1.2.2-10.1.2.254)");
  EXPECT_EQ(ip->rangeSets[1].describe(), "fd00::/120 (fd00::10-fd00::20)");
}

TEST(GuidPool, ItsPoolFileIsTheObjectAsGivenAndReadsBackToThePool) {
  const std::string given = R"({"range": "02:00:00:00:00:00:00:00-02:00:00:00:00:ff:ff:ff", "assign": "always"})";
  auto g = parseOk(given, "ib-net");
  EXPECT_EQ(nlohmann::json::parse(g.poolFile), nlohmann::json::parse(given));
  auto back = guidPoolFile(g.poolFile, "ib-net");
  ASSERT_TRUE(back) << back.error().msg;
  EXPECT_EQ(back->pool, "ib-net");
  EXPECT_EQ(back->first.value, g.first.value);
  EXPECT_EQ(back->last.value, g.last.value);
  EXPECT_EQ(back->assign, GuidAssign::kAlways);
  EXPECT_EQ(back->poolFile, g.poolFile);
  auto broken = guidPoolFile("{\"range\":", "ib-net");
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().code, cni::Errc::kIoFailure);
  EXPECT_THAT(broken.error().msg, HasSubstr("\"ib-net\""));
}

}  // namespace
}  // namespace ibcni::config
