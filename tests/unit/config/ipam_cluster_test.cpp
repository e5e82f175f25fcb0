// SPDX-License-Identifier: Apache-2.0
// ipam.cluster: every key typed and range-checked (error 7 naming the field), defaults, the pool's
// default name from the network name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "ibcni/config/ipam_conf.h"
#include "ibcni/config/net_conf.h"
#include "unit/config/expect_invalid_ipam.h"

namespace ibcni::config {
namespace {

using ::testing::HasSubstr;

std::string ipam(const std::string& cluster, const std::string& ranges = R"([[{"subnet": "10.56.0.0/16"}]])") {
  return R"({"type": "ibcni-ipam", "ranges": )" + ranges + R"(, "cluster": )" + cluster + "}";
}

ClusterConf parseClusterOk(const std::string& cluster) {
  auto c = parseIpamConfig(ipam(cluster));
  EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().msg);
  if (!c || !c->cluster) {
    ADD_FAILURE() << "no cluster object";
    return {};
  }
  return *c->cluster;
}

void expectClusterInvalid(const std::string& cluster, const std::vector<std::string>& parts,
                   const std::string& ranges = R"([[{"subnet": "10.56.0.0/16"}]])") {
  testing::expectInvalidIpam(ipam(cluster, ranges), parts);
}

TEST(IpamCluster, AbsentMeansNodeLocal) {
  auto c = parseIpamConfig(R"({"type": "ibcni-ipam", "ranges": [[{"subnet": "10.56.0.0/16"}]]})");
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->cluster.has_value());
  auto n = parseIpamConfig(R"({"type": "ibcni-ipam", "subnet": "10.56.0.0/16", "cluster": null})");
  ASSERT_TRUE(n);
  EXPECT_FALSE(n->cluster.has_value());
}

TEST(IpamCluster, DefaultsAreTheIssuedOnes) {
  auto c = parseClusterOk("{}");
  EXPECT_EQ(c.backend, ClusterBackend::kKubernetes);
  EXPECT_EQ(c.blockSize, 32U);
  EXPECT_EQ(c.timeout.count(), 5000);
  EXPECT_EQ(c.releaseAfter.count(), 600);
  EXPECT_EQ(c.leaseDuration.count(), 300);
  EXPECT_EQ(c.kubernetes.kubeconfig, "/etc/cni/net.d/ibcni.d/ibcni.kubeconfig");
  EXPECT_EQ(c.kubernetes.leaseNamespace, "kube-system");
  EXPECT_TRUE(c.nodeName.empty());
  EXPECT_TRUE(c.pool.empty()) << "filled from the network name by the request parser";
}

TEST(IpamCluster, EveryKeyIsRead) {
  auto c = parseClusterOk(R"({"backend": "etcd", "pool": "ib-p1", "blockSize": 64, "nodeName": "gpu-7.dc1",
      "timeoutMs": 2500, "releaseAfterSeconds": 0, "leaseDurationSeconds": 90,
      "etcd": {"endpoints": ["https://10.0.0.1:2379/", "http://[fd00::1]:2379"], "prefix": "/x/",
               "caFile": "/etc/e/ca.crt", "certFile": "/etc/e/c.crt", "keyFile": "/etc/e/c.key"}})");
  EXPECT_EQ(c.backend, ClusterBackend::kEtcd);
  EXPECT_EQ(c.pool, "ib-p1");
  EXPECT_EQ(c.poolPath, "ipam.cluster.pool");
  EXPECT_EQ(c.blockSize, 64U);
  EXPECT_EQ(c.nodeName, "gpu-7.dc1");
  EXPECT_EQ(c.timeout.count(), 2500);
  EXPECT_EQ(c.releaseAfter.count(), 0);
  EXPECT_EQ(c.leaseDuration.count(), 90);
  EXPECT_EQ(c.etcd.endpoints, (std::vector<std::string>{"https://10.0.0.1:2379", "http://[fd00::1]:2379"}));
  EXPECT_EQ(c.etcd.prefix, "/x/");
  EXPECT_EQ(c.etcd.caFile, "/etc/e/ca.crt");
  EXPECT_EQ(c.etcd.keyFile, "/etc/e/c.key");
  auto k = parseClusterOk(R"({"kubernetes": {"kubeconfig": "/etc/k.conf", "namespace": "ibcni", "context": "c1"}})");
  EXPECT_EQ(k.kubernetes.kubeconfig, "/etc/k.conf");
  EXPECT_EQ(k.kubernetes.leaseNamespace, "ibcni");
  EXPECT_EQ(k.kubernetes.context, "c1");
}

TEST(IpamCluster, EveryBadValueNamesItsField) {
  expectClusterInvalid(R"("yes")", {"ipam.cluster", "must be an object"});
  expectClusterInvalid(R"({"backend": "consul"})", {"ipam.cluster.backend", "consul", "\"kubernetes\"", "\"etcd\""});
  expectClusterInvalid(R"({"backend": 1})", {"ipam.cluster.backend"});
  expectClusterInvalid(R"({"pool": "IB_Pool"})", {"ipam.cluster.pool", "IB_Pool", "lowercase"});
  expectClusterInvalid(R"({"pool": ""})", {"ipam.cluster.pool"});
  expectClusterInvalid(R"({"pool": "p-"})", {"ipam.cluster.pool"});
  expectClusterInvalid(R"({"blockSize": 48})", {"ipam.cluster.blockSize", "48", "power of two"});
  expectClusterInvalid(R"({"blockSize": 2})", {"ipam.cluster.blockSize", "from 4 to 65536"});
  expectClusterInvalid(R"({"blockSize": 131072})", {"ipam.cluster.blockSize"});
  expectClusterInvalid(R"({"blockSize": "32"})", {"ipam.cluster.blockSize"});
  expectClusterInvalid(R"({"blockSize": 32.5})", {"ipam.cluster.blockSize"});
  expectClusterInvalid(R"({"blockSize": 64})", {"ipam.cluster.blockSize", "larger than ipam.ranges[0][0]", "10.56.0.0/27"},
                R"([[{"subnet": "10.56.0.0/27"}]])");
  expectClusterInvalid(R"({"nodeName": "Node_1"})", {"ipam.cluster.nodeName", "Node_1"});
  expectClusterInvalid(R"({"timeoutMs": 50})", {"ipam.cluster.timeoutMs", "from 100 to 600000"});
  expectClusterInvalid(R"({"timeoutMs": 18446744073709551615})", {"ipam.cluster.timeoutMs"});
  expectClusterInvalid(R"({"timeoutMs": -1})", {"ipam.cluster.timeoutMs"});
  expectClusterInvalid(R"({"releaseAfterSeconds": -5})", {"ipam.cluster.releaseAfterSeconds"});
  expectClusterInvalid(R"({"leaseDurationSeconds": 5})", {"ipam.cluster.leaseDurationSeconds", "from 10"});
  expectClusterInvalid(R"({"blocksize": 32})", {"ipam.cluster.blocksize", "not a key of ipam.cluster", "blockSize"});
  expectClusterInvalid(R"({"kubernetes": {"kubeconfig": "relative/k"}})", {"ipam.cluster.kubernetes.kubeconfig", "absolute"});
  expectClusterInvalid(R"({"kubernetes": {"namespace": "Kube System"}})", {"ipam.cluster.kubernetes.namespace"});
  expectClusterInvalid(R"({"kubernetes": {"server": "x"}})", {"ipam.cluster.kubernetes.server", "not a key"});
  expectClusterInvalid(R"({"kubernetes": []})", {"ipam.cluster.kubernetes", "must be an object"});
  expectClusterInvalid(R"({"backend": "etcd"})", {"ipam.cluster.etcd", "required"});
  expectClusterInvalid(R"({"backend": "etcd", "etcd": {}})", {"ipam.cluster.etcd.endpoints", "at least one"});
  expectClusterInvalid(R"({"backend": "etcd", "etcd": {"endpoints": "http://a:1"}})", {"ipam.cluster.etcd.endpoints"});
  for (const char* bad : {"10.0.0.1:2379", "ftp://a:1", "http://", "http:///x", "http://a b:1", "http://u@a:1",
                          "http://a:1?x"}) {
    expectClusterInvalid(std::string(R"({"backend": "etcd", "etcd": {"endpoints": [")") + bad + R"("]}})",
                  {"ipam.cluster.etcd.endpoints[0]", "http(s)://host:port"});
  }
  expectClusterInvalid(R"({"backend": "etcd", "etcd": {"endpoints": ["http://a:1", "http://a:1/"]}})",
                {"ipam.cluster.etcd.endpoints[1]", "listed twice"});
  expectClusterInvalid(R"({"backend": "etcd", "etcd": {"endpoints": ["http://a:1"], "prefix": "ibcni"}})",
                {"ipam.cluster.etcd.prefix", "ending in '/'"});
  expectClusterInvalid(R"({"backend": "etcd", "etcd": {"endpoints": ["http://a:1"], "certFile": "/c.crt"}})",
                {"ipam.cluster.etcd.certFile", "keyFile"});
  expectClusterInvalid(R"({"backend": "etcd", "etcd": {"endpoints": ["http://a:1"], "caFile": "ca.crt"}})",
                {"ipam.cluster.etcd.caFile", "absolute"});
  expectClusterInvalid(R"({"etcd": {"endpoints": ["http://a:1"]}})", {"ipam.cluster.etcd", "backend \"etcd\""});
}

TEST(IpamCluster, ThePoolDefaultsToTheNetworkName) {
  const std::string body = R"({"cniVersion": "1.0.0", "name": "NAME", "type": "ibcni-ipam",
      "ipam": {"type": "ibcni-ipam", "subnet": "10.56.0.0/16", "cluster": {"backend": "etcd",
               "etcd": {"endpoints": ["http://127.0.0.1:2379"]}}}})";
  auto replace = [&](const std::string& name) {
    std::string s = body;
    s.replace(s.find("NAME"), 4, name);
    return s;
  };
  auto ok = parseNetConf(replace("ib-partition-1"), cni::Command::kAdd, Role::kIpamPlugin);
  ASSERT_TRUE(ok) << ok.error().msg;
  ASSERT_TRUE(ok->embeddedIpam && *ok->embeddedIpam);
  EXPECT_EQ((**ok->embeddedIpam).cluster->pool, "ib-partition-1");
  EXPECT_EQ((**ok->embeddedIpam).cluster->poolPath, "the network name");
  auto bad = parseNetConf(replace("IB_net"), cni::Command::kAdd, Role::kIpamPlugin);
  ASSERT_TRUE(bad) << "a mistake in the ipam object is reported by the IPAM";
  ASSERT_TRUE(bad->embeddedIpam);
  ASSERT_FALSE(*bad->embeddedIpam);
  EXPECT_EQ(bad->embeddedIpam->error().code, cni::Errc::kInvalidConfig);
  EXPECT_THAT(bad->embeddedIpam->error().msg, HasSubstr("ipam.cluster.pool"));
  EXPECT_THAT(bad->embeddedIpam->error().msg, HasSubstr("IB_net"));
}

}  // namespace
}  // namespace ibcni::config
