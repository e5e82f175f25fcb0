// SPDX-License-Identifier: Apache-2.0
// The repository's example manifests, as a cluster would use them: every file of deploy/examples/
// and e2e/hw/manifests/ (found by glob, so that a new example is covered without touching this
// test) and every yaml block of README.md and docs/*.md holding a NetworkAttachmentDefinition is
// read; every ibcni config goes through config::parseNetConf as Multus delivers it, for the NAD
// alone and for each pod that names it; pods, device plugin config, IPPools and Services must agree
// with the networks.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <iostream>
#include <memory>

#include "manifests.h"

namespace ibcni::testing::examples {
namespace {

namespace fs = std::filesystem;

std::string listed(const std::vector<std::string>& problems) {
  std::string out;
  for (const auto& p : problems) {
    out += "\n  " + p;
  }
  return out;
}

int countIn(const Catalog& c, const std::string& group) {
  return static_cast<int>(
      std::count_if(c.nads.begin(), c.nads.end(), [&](const Nad& n) { return n.obj.group == group; }));
}

class DeployExamples : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    catalog_ = std::make_unique<Catalog>(loadRepository(IBCNI_SOURCE_DIR));
    scratch_ = fs::path(::testing::TempDir()) / ("deploy_examples_test." + std::to_string(getpid()));
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(scratch_, ec);
    catalog_.reset();
  }

  static const Catalog& catalog() { return *catalog_; }

  // The invocation for the NAD `nad` alone (no pod).
  static const Invocation* invocation(const std::vector<Invocation>& all, const std::string& nad) {
    for (const auto& i : all) {
      if (i.name == nad && i.pod.empty() && i.nad.starts_with(std::string(kExamplesGroup) + "/")) {
        return &i;
      }
    }
    return nullptr;
  }

  static inline std::unique_ptr<Catalog> catalog_;
  static inline fs::path scratch_;
};

TEST_F(DeployExamples, EveryManifestIsReadAndNoNetworkIsSkipped) {
  const Catalog& c = catalog();
  EXPECT_TRUE(c.problems.empty()) << "unreadable manifests:" << listed(c.problems);
  // Every "kind: NetworkAttachmentDefinition" line read became a NAD with a config.
  EXPECT_EQ(static_cast<int>(c.nads.size()), c.nadKindLines);
  EXPECT_GE(countIn(c, kExamplesGroup), 5);
  EXPECT_GE(countIn(c, kHwGroup), 2);
  EXPECT_GE(c.templates, 2);
  EXPECT_GE(c.docBlocks, 1) << "README.md and docs/*.md hold no NetworkAttachmentDefinition: is the page read?";
  std::cout << "[ examples ] " << c.files << " files (" << c.templates << " templates rendered), " << c.docBlocks
            << " README.md/docs blocks, " << c.documents << " documents: " << c.nads.size()
            << " NetworkAttachmentDefinitions ("
            << countIn(c, kExamplesGroup) << " deploy/examples, " << countIn(c, kHwGroup) << " e2e/hw, "
            << countIn(c, kDocsGroup) << " README.md/docs), " << c.pods.size() << " pods, " << c.configJson.size()
            << " ConfigMap JSON values, " << c.others.size() << " other objects\n";
}

TEST_F(DeployExamples, EveryIbcniConfigParsesAsMultusDeliversIt) {
  Stats stats;
  std::vector<Invocation> all;
  auto problems = checkNetworks(catalog(), scratch_, &stats, &all);
  EXPECT_TRUE(problems.empty()) << listed(problems);
  EXPECT_EQ(stats.ibcniConfigs + stats.otherConfigs, static_cast<int>(catalog().nads.size()));
  EXPECT_GE(stats.ibcniConfigs, 7);
  // One invocation per ibcni NAD, plus one per pod attachment naming it.
  EXPECT_GT(stats.invocations, stats.ibcniConfigs);
  std::cout << "[ examples ] " << stats.ibcniConfigs << " ibcni configs (" << stats.otherConfigs
            << " of other plugins), " << stats.invocations << " Multus invocations parsed for ADD and DEL, "
            << stats.ipamConfigs << " ipam objects accepted by ibcni-ipam's parser\n";
}

TEST_F(DeployExamples, PodsNameExistingNetworksAndRequestTheirDevices) {
  Stats stats;
  auto problems = checkPods(catalog(), &stats);
  EXPECT_TRUE(problems.empty()) << listed(problems);
  EXPECT_GE(stats.podNetworks, 7);
  std::cout << "[ examples ] " << catalog().pods.size() << " pods, " << stats.podNetworks << " network attachments\n";
}

TEST_F(DeployExamples, DevicePluginConfigPoolsAndServicesAgreeWithTheNetworks) {
  Stats stats;
  auto problems = checkSupportingObjects(catalog(), &stats);
  EXPECT_TRUE(problems.empty()) << listed(problems);
  EXPECT_GE(stats.deviceConfigs, 1);
}

// What each documented example is for, as ibcni reads it.
TEST_F(DeployExamples, TheDocumentedExamplesConfigureWhatTheySay) {
  std::vector<Invocation> all;
  auto problems = checkNetworks(catalog(), scratch_ / "documented", nullptr, &all);
  ASSERT_TRUE(problems.empty()) << listed(problems);
  using config::Mode;
  using config::RdmaIsolation;

  const Invocation* ipoib = invocation(all, "ib-ipoib");
  ASSERT_NE(ipoib, nullptr) << "deploy/examples/ipoib-ibcni-ipam.yaml: NAD ib-ipoib";
  EXPECT_EQ(ipoib->conf.mode, Mode::kIpoib);
  EXPECT_EQ(ipoib->conf.rdmaDevice, "mlx5_0");
  EXPECT_EQ(ipoib->conf.port, 1u);
  EXPECT_EQ(ipoib->conf.master, "");
  EXPECT_EQ(ipoib->conf.pkey, net::Pkey::fromWire(0x7fff));
  EXPECT_EQ(ipoib->conf.ipamType, "ibcni-ipam");
  EXPECT_EQ(ipoib->conf.cniVersion, "1.0.0");

  const Invocation* rdma = invocation(all, "ib-sriov-rdma");
  ASSERT_NE(rdma, nullptr) << "deploy/examples/sriov-rdma-isolation.yaml: NAD ib-sriov-rdma";
  EXPECT_EQ(rdma->conf.mode, Mode::kSriov);
  EXPECT_EQ(rdma->conf.rdmaIsolation, RdmaIsolation::kOn);
  EXPECT_EQ(rdma->conf.mtu, 4092u);
  EXPECT_EQ(rdma->conf.linkState, config::VfLinkState::kAuto);
  EXPECT_EQ(rdma->conf.pkey, net::Pkey::fromWire(0x7fff));
  ASSERT_TRUE(rdma->conf.deviceId.has_value());
  EXPECT_EQ(rdma->conf.deviceId->text, kStandInPci);
  EXPECT_FALSE(rdma->conf.runtime.deviceInfoFile.empty()) << "capability CNIDeviceInfoFile";
  EXPECT_EQ(rdma->conf.ipamType, "ibcni-ipam");

  const Invocation* guid = nullptr;
  for (const auto& i : all) {
    if (i.name == "ib-sriov-guid" && i.pod.starts_with(std::string(kExamplesGroup) + "/pod-sriov-guid.yaml")) {
      guid = &i;
    }
  }
  ASSERT_NE(guid, nullptr) << "deploy/examples/pod-sriov-guid.yaml attaching ib-sriov-guid";
  ASSERT_TRUE(guid->conf.runtime.infinibandGuid.has_value());
  EXPECT_EQ(*guid->conf.runtime.infinibandGuid, *net::Guid::parse("02:00:00:00:00:00:01:01"));
  ASSERT_EQ(guid->conf.runtime.ips.size(), 1u);
  EXPECT_EQ(guid->conf.runtime.ips[0].toString(), "192.168.30.11/24");

  const Invocation* whereabouts = invocation(all, "ib-ipoib-whereabouts");
  ASSERT_NE(whereabouts, nullptr) << "deploy/examples/ipoib-whereabouts.yaml";
  EXPECT_EQ(whereabouts->conf.mode, Mode::kIpoib);
  EXPECT_EQ(whereabouts->conf.ipamType, "whereabouts");
  EXPECT_FALSE(whereabouts->stdinConfig["ipam"].contains("gateway"));

  const Invocation* nvIpam = invocation(all, "ib-sriov-nv-ipam");
  ASSERT_NE(nvIpam, nullptr) << "deploy/examples/sriov-nv-ipam.yaml";
  EXPECT_EQ(nvIpam->conf.mode, Mode::kSriov);
  EXPECT_EQ(nvIpam->conf.ipamType, "nv-ipam");
  EXPECT_EQ(nvIpam->stdinConfig["ipam"]["poolName"], "ib-pool");

  for (const char* rail : {"ib-rail1", "ib-rail2"}) {
    const Invocation* r = invocation(all, rail);
    ASSERT_NE(r, nullptr) << "deploy/examples/sriov-multi-rail.yaml: NAD " << rail;
    ASSERT_TRUE(r->conf.policyRouting.has_value()) << rail;
    EXPECT_FALSE(r->conf.policyRouting->table) << rail << ": the table comes from the interface's name";
    EXPECT_EQ(r->stdinConfig["ipam"]["cluster"]["pool"], "ib-rails") << rail << ": one pool for the rails' subnet";
  }

  // The pods, and the ib_write_bw pair on two nodes.
  auto pod = [&](const std::string& name) -> const Pod* {
    for (const auto& p : catalog().pods) {
      if (p.obj.group == kExamplesGroup && p.obj.name == name) {
        return &p;
      }
    }
    return nullptr;
  };
  for (const auto& [name, network] :
       {std::pair{"ipoib-pod", "ib-ipoib"}, std::pair{"sriov-rdma-pod", "ib-sriov-rdma"},
        std::pair{"sriov-guid-pod", "ib-sriov-guid"}, std::pair{"ib-write-bw-server", "ib-sriov-rdma"},
        std::pair{"ib-write-bw-client", "ib-sriov-rdma"}}) {
    const Pod* p = pod(name);
    ASSERT_NE(p, nullptr) << "pod " << name << " in deploy/examples";
    ASSERT_EQ(p->networks.size(), 1u) << name;
    EXPECT_EQ(p->networks[0].name, network) << name;
    EXPECT_EQ(p->networks[0].interface, "net1") << name;
  }
  const Pod* rails = pod("multi-rail-pod");
  ASSERT_NE(rails, nullptr);
  ASSERT_EQ(rails->networks.size(), 2u);
  EXPECT_EQ(rails->networks[1].name, "ib-rail2");
  EXPECT_EQ(rails->networks[1].interface, "net2") << "table 102";
  for (const char* name : {"ib-write-bw-server", "ib-write-bw-client"}) {
    const json& spec = pod(name)->obj.tree["spec"];
    const json& terms = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    ASSERT_TRUE(terms.is_array() && terms.size() == 1) << name << ": one required anti-affinity term";
    EXPECT_EQ(terms[0]["topologyKey"], "kubernetes.io/hostname") << name;
    for (const char* other : {"ib-write-bw-server", "ib-write-bw-client"}) {
      for (const auto& [k, v] : terms[0]["labelSelector"]["matchLabels"].items()) {
        EXPECT_EQ(pod(other)->obj.tree["metadata"]["labels"][k], v) << name << "'s anti-affinity must select " << other;
      }
    }
    EXPECT_EQ(spec["containers"][0]["image"], "debian:bookworm") << name;
    const std::string script = spec["containers"][0]["args"][0].get<std::string>();
    EXPECT_NE(script.find("perftest ibverbs-providers iproute2"), std::string::npos) << name;
    EXPECT_NE(script.find("--report_gbits"), std::string::npos) << name;
  }
  EXPECT_NE(pod("ib-write-bw-client")
                ->obj.tree["spec"]["containers"][0]["args"][0]
                .get<std::string>()
                .find("ib-write-bw-server"),
            std::string::npos);
  auto object = [&](const std::string& kind, const std::string& name) {
    return std::any_of(catalog().others.begin(), catalog().others.end(),
                       [&](const Object& o) { return o.group == kExamplesGroup && o.kind == kind && o.name == name; });
  };
  EXPECT_TRUE(object("Service", "ib-write-bw-server"));
  EXPECT_TRUE(object("ConfigMap", "sriovdp-config"));
  EXPECT_TRUE(object("IPPool", "ib-pool"));
}

}  // namespace
}  // namespace ibcni::testing::examples
