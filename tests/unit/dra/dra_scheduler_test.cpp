// SPDX-License-Identifier: Apache-2.0
// ibcni-dra's ResourceSlices and DeviceClasses (deploy/dra/) in a real control plane with the
// real kube-scheduler and kube-controller-manager (tests/support/control_plane.h, a private one):
// the scheduler's own allocator picks the VFs that claims' CEL selectors and matchAttribute
// constraints ask for, never a tainted one, and leaves an impossible claim unallocated; the
// controller-manager makes claims from the example ResourceClaimTemplates.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fakes/fake_sysfs_tree.h"
#include "plugin/dra/claim_config.h"
#include "plugin/dra/resource_slices.h"
#include "support/control_plane.h"
#include "support/exec_program.h"
#include "unit/dra/dra_devices.h"

namespace ibcni::dra {
namespace {

using ::ibcni::testing::ApiProxy;
using ::ibcni::testing::ControlPlane;
using ::ibcni::testing::FakeSysfsTree;
using nlohmann::json;

constexpr const char* kNode = "dra-sched-node";
// PF 0000:3b:00.0 sits on root pci0000:00 with two VFs, VF 1's port down; PF 0001:5e:00.0 on:
constexpr const char* kRootB = "pci0001:00";  // six VFs
constexpr const char* kTaintedVf = "0000:3b:00.3";

std::string vfPci(const char* bus, int n) {
  char text[24];
  std::snprintf(text, sizeof text, "%s:%02x.%x", bus, n / 8, 2 + n % 8);
  return text;
}

/// The node's sysfs: two PFs on two PCIe roots and their VFs, all with GUIDs.
std::vector<IbDevice> nodeDevices() {
  FakeSysfsTree sys;
  const struct {
    const char* pf;
    const char* bus;
    const char* rdma;
    int vfs;
  } pfs[] = {{"0000:3b:00.0", "0000:3b", "mlx5_0", 2}, {"0001:5e:00.0", "0001:5e", "mlx5_10", 6}};
  int next = 20;
  for (const auto& p : pfs) {
    sys.addPf(p.pf, std::string("ib_") + p.rdma, p.rdma, p.vfs)
        .setNodeGuid(p.rdma, "0002:c903:00a1:b2c2")
        .setRdmaPort(p.rdma, 1, "InfiniBand", "4: ACTIVE", "400 Gb/sec (4X NDR)",
                     "fe80:0000:0000:0000:0002:c903:00a1:b2c3");
    for (int n = 0; n < p.vfs; ++n) {
      const std::string rdma = "mlx5_" + std::to_string(next++);
      const std::string pci = vfPci(p.bus, n);
      sys.addVf(p.pf, n, pci, "", rdma)
          .setNodeGuid(rdma, "0200:0000:0000:0a" + std::to_string(next))
          .setRdmaPort(rdma, 1, "InfiniBand", pci == kTaintedVf ? "1: DOWN" : "4: ACTIVE", "400 Gb/sec (4X NDR)",
                       "fe80:0000:0000:0000:0200:0000:0000:0a" + std::to_string(next));
    }
  }
  EXPECT_TRUE(sys.ok()) << sys.error();
  return discoverIn(sys);
}

class DraSchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!ControlPlane::built()) {
      return;
    }
    cp_ = std::make_unique<ControlPlane>();
    api_ = std::make_unique<ApiProxy>();
    auto started = cp_->start("", "controller-manager,scheduler");
    if (started) {
      started = api_->start(*cp_);
    }
    if (started) {
      started = publishNode();
    }
    setUp_ = started ? "" : std::string(started.message());
  }

  static void TearDownTestSuite() {
    api_.reset();
    cp_.reset();
  }

  void SetUp() override {
    if (!ControlPlane::built()) {
      GTEST_SKIP() << ControlPlane::kNotBuilt;
    }
    ASSERT_EQ(setUp_, "");
    auto ns = api_->freshNamespace("dra-sched");
    ASSERT_TRUE(ns) << ns.error();
    ns_ = *ns;
    // Pods need the namespace's default ServiceAccount, which the controller-manager makes.
    ASSERT_TRUE(waitFor([&] { return api_->admin("GET", "/api/v1/namespaces/" + ns_ + "/serviceaccounts/default").first == 200; }));
  }

  void TearDown() override {
    if (!ns_.empty()) {
      (void)api_->admin("DELETE", "/api/v1/namespaces/" + ns_);
    }
  }

  /// The Node (with room for pods: no kubelet reports it), the device classes and the slices.
  static ::testing::AssertionResult publishNode() {
    if (auto r = api_->createNode(kNode); !r) {
      return r;
    }
    if (auto r = giveNodeRoom(); !r) {
      return r;
    }
    if (auto r = kubectl({"apply", "-f", std::string(IBCNI_SOURCE_DIR) + "/deploy/dra/deviceclasses.yaml"}); r.status != 0) {
      return ::testing::AssertionFailure() << r.describe();
    }
    SliceOptions options;
    options.nodeName = kNode;
    for (const auto& d : nodeDevices()) {
      rootOf_[d.name] = d.placement.pcieRoot;
    }
    for (const auto& s : buildSlices(nodeDevices(), options)) {
      if (auto [status, body] = api_->admin("POST", "/apis/resource.k8s.io/v1/resourceslices", s); status != 201) {
        return ::testing::AssertionFailure() << "POST slice: " << status << " " << body.dump();
      }
    }
    return ::testing::AssertionSuccess();
  }

  /// Capacity for pods in the Node's status (read, changed, written; again when the node lifecycle
  /// controller wrote it meanwhile).
  static ::testing::AssertionResult giveNodeRoom() {
    const std::string node = std::string("/api/v1/nodes/") + kNode;
    for (int attempt = 0; attempt < 20; ++attempt) {
      auto [got, obj] = api_->admin("GET", node);
      if (got != 200) {
        return ::testing::AssertionFailure() << "GET node: " << got << " " << obj.dump();
      }
      obj["status"]["capacity"] = obj["status"]["allocatable"] = {{"cpu", "8"}, {"memory", "16Gi"}, {"pods", "110"}};
      auto [put, body] = api_->admin("PUT", node + "/status", obj);
      if (put == 200) {
        return ::testing::AssertionSuccess();
      }
      if (put != 409) {
        return ::testing::AssertionFailure() << "PUT node status: " << put << " " << body.dump();
      }
    }
    return ::testing::AssertionFailure() << "PUT node status: 20 conflicts in a row";
  }

  static ::ibcni::testing::ProgramRun kubectl(std::vector<std::string> args) {
    args.insert(args.begin(), {cp_->kubectl(), "--kubeconfig", cp_->adminKubeconfig()});
    return ::ibcni::testing::runProgram(args, {::ibcni::testing::kPathEnv}, std::nullopt);
  }

  template <class F>
  static bool waitFor(F done, std::chrono::seconds limit = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) {
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return true;
  }

  std::string path(const std::string& resource, const std::string& name = "") const {
    const std::string base = resource == "pods" ? "/api/v1/namespaces/" + ns_ + "/pods"
                                                : "/apis/resource.k8s.io/v1/namespaces/" + ns_ + "/" + resource;
    return name.empty() ? base : base + "/" + name;
  }

  /// A claim of `requests` (and `constraints`), and a pod that uses it.
  void claimAndPod(const std::string& name, const json& requests, const json& constraints = json::array()) {
    json claim = {{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceClaim"}, {"metadata", {{"name", name}}},
                  {"spec", {{"devices", {{"requests", requests}}}}}};
    if (!constraints.empty()) {
      claim["spec"]["devices"]["constraints"] = constraints;
    }
    auto [status, body] = api_->admin("POST", path("resourceclaims"), claim);
    ASSERT_EQ(status, 201) << body.dump();
    pod(name, {{"name", "ib"}, {"resourceClaimName", name}});
  }

  /// A pod `name` with `claimSource` as its one resource claim, tolerating every taint (the node
  /// lifecycle controller taints a node no kubelet reports for).
  void pod(const std::string& name, const json& claimSource) {
    json p = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", name}}},
              {"spec",
               {{"tolerations", json::array({{{"operator", "Exists"}}})},
                {"resourceClaims", json::array({claimSource})},
                {"containers", json::array({{{"name", "c"}, {"image", "registry.k8s.io/pause:3.10"},
                                             {"resources", {{"claims", json::array({{{"name", "ib"}}})}}}}})}}}};
    auto [status, body] = api_->admin("POST", path("pods"), p);
    ASSERT_EQ(status, 201) << body.dump();
  }

  /// The devices allocated to claim `name` (waiting for the scheduler); empty when none came.
  std::vector<json> allocated(const std::string& name) {
    json results;
    waitFor([&] {
      auto [status, claim] = api_->admin("GET", path("resourceclaims", name));
      if (status == 200 && claim.contains("status") && claim["status"].contains("allocation")) {
        results = claim["status"]["allocation"]["devices"]["results"];
        return true;
      }
      return false;
    });
    return results.is_array() ? std::vector<json>(results.begin(), results.end()) : std::vector<json>{};
  }

  /// The claim the controller-manager made for pod `name` from its template ("" when none came).
  std::string claimMadeFor(const std::string& name) {
    std::string claim;
    (void)waitFor([&] {
      auto [status, p] = api_->admin("GET", path("pods", name));
      for (const auto& s : p.value("status", json::object()).value("resourceClaimStatuses", json::array())) {
        claim = s.value("resourceClaimName", "");
      }
      return !claim.empty();
    });
    return claim;
  }

  /// Whether the scheduler tried pod `name` and found no node for it.
  bool unschedulable(const std::string& name) {
    return waitFor([&] {
      auto [status, p] = api_->admin("GET", path("pods", name));
      for (const auto& c : p.value("status", json::object()).value("conditions", json::array())) {
        if (c.value("type", "") == "PodScheduled" && c.value("status", "") == "False" &&
            c.value("reason", "") == "Unschedulable") {
          return true;
        }
      }
      return false;
    });
  }

  static json vfRequest(const std::string& name, const std::string& cel = "") {
    json exactly = {{"deviceClassName", "vf.ibcni.io"}};
    if (!cel.empty()) {
      exactly["selectors"] = json::array({{{"cel", {{"expression", cel}}}}});
    }
    return {{"name", name}, {"exactly", exactly}};
  }

  static inline std::unique_ptr<ControlPlane> cp_;
  static inline std::unique_ptr<ApiProxy> api_;
  static inline std::string setUp_;
  static inline std::map<std::string, std::string> rootOf_;  // device name -> its PCIe root
  std::string ns_;
};

TEST_F(DraSchedulerTest, ASelectorOnThePcieRootGetsAVfBelowIt) {
  claimAndPod("near-gpu", json::array({vfRequest(
                              "vf", std::string(R"(device.attributes["resource.kubernetes.io"].pcieRoot == ")") + kRootB + "\"")}));
  auto results = allocated("near-gpu");
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0]["driver"], "ibcni.io");
  EXPECT_EQ(results[0]["pool"], kNode);
  EXPECT_EQ(rootOf_[results[0]["device"]], kRootB) << results[0].dump();
  EXPECT_THAT(results[0]["device"].get<std::string>(), ::testing::StartsWith("vf-"));
}

TEST_F(DraSchedulerTest, TwoVfsWithMatchAttributeShareTheirPcieRoot) {
  // Root A has one VF that can serve (the other's port is down): the pair must come from root B.
  claimAndPod("two-rails", json::array({vfRequest("rail0"), vfRequest("rail1")}),
              json::array({{{"requests", {"rail0", "rail1"}}, {"matchAttribute", "resource.kubernetes.io/pcieRoot"}}}));
  auto results = allocated("two-rails");
  ASSERT_EQ(results.size(), 2U);
  EXPECT_NE(results[0]["device"], results[1]["device"]);
  EXPECT_EQ(rootOf_[results[0]["device"]], kRootB);
  EXPECT_EQ(rootOf_[results[1]["device"]], kRootB);
}

TEST_F(DraSchedulerTest, AnImpossibleClaimStaysUnallocated) {
  claimAndPod("nowhere", json::array({vfRequest(
                             "vf", R"(device.attributes["resource.kubernetes.io"].pcieRoot == "pci00ff:00")")}));
  ASSERT_TRUE(unschedulable("nowhere"));
  auto [status, claim] = api_->admin("GET", path("resourceclaims", "nowhere"));
  ASSERT_EQ(status, 200);
  EXPECT_FALSE(claim.value("status", json::object()).contains("allocation")) << claim.dump();
}

TEST_F(DraSchedulerTest, AVfWhosePortIsDownIsNeverAllocated) {
  claimAndPod("down", json::array({vfRequest(
                          "vf", std::string(R"(device.attributes["resource.kubernetes.io"].pciBusID == ")") + kTaintedVf + "\"")}));
  ASSERT_TRUE(unschedulable("down"));
  auto [status, claim] = api_->admin("GET", path("resourceclaims", "down"));
  EXPECT_FALSE(claim.value("status", json::object()).contains("allocation")) << claim.dump();
}

TEST_F(DraSchedulerTest, TheControllerManagerMakesTheClaimFromTheExampleTemplate) {
  auto r = kubectl({"apply", "-n", ns_, "-f", std::string(IBCNI_SOURCE_DIR) + "/deploy/dra/claim-templates.yaml"});
  ASSERT_EQ(r.status, 0) << r.describe();
  pod("from-template", {{"name", "ib"}, {"resourceClaimTemplateName", "ib-two-vfs-one-root"}});
  const std::string claimName = claimMadeFor("from-template");
  ASSERT_FALSE(claimName.empty());
  auto results = allocated(claimName);
  ASSERT_EQ(results.size(), 2U);
  EXPECT_EQ(rootOf_[results[0]["device"]], rootOf_[results[1]["device"]]);

  // The template with a configuration: the scheduler copies it into the allocation, where
  // Prepare reads it with the NAD's own parser.
  pod("pool-guid", {{"name", "ib"}, {"resourceClaimTemplateName", "ib-vf-pool-guid"}});
  const std::string configured = claimMadeFor("pool-guid");
  ASSERT_FALSE(configured.empty());
  ASSERT_EQ(allocated(configured).size(), 1U);
  auto [cs, claim] = api_->admin("GET", path("resourceclaims", configured));
  ASSERT_EQ(cs, 200);
  auto settings = vfSettingsFor(claim, kDriverName, "vf", "0000:3b:01.0");
  ASSERT_TRUE(settings) << settings.error() << "\n" << claim.dump();
  ASSERT_TRUE(settings->guidPool);
  EXPECT_EQ(settings->guidPool->pool, "rail0");
  EXPECT_EQ(settings->guidPool->assign, config::GuidAssign::kAlways);
  EXPECT_EQ(settings->linkState, config::VfLinkState::kEnable);
  EXPECT_EQ(settings->pkey->hex(), "0x0001");
}

}  // namespace
}  // namespace ibcni::dra
