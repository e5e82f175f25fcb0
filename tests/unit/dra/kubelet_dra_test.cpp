// SPDX-License-Identifier: Apache-2.0
// ibcni-dra driven by the kubelet's own DRA code: kubelet-dra (tests/upstream/kubelet/dra: the
// kubelet's plugin manager and DRA manager from k8s.io/kubernetes v1.36.3) finds the driver's
// registration socket, registers it, and prepares and unprepares the claims of pods read from a
// real kube-apiserver; ibcni-dra reads a FakeSysfsTree node. Shown: the registration handshake and
// the slices published after it, claims of 1 and 8 VFs with their CDI IDs and spec, a repeat, a
// device gone (the claim's error reaches the kubelet), a driver restart from its checkpoint, a
// rolling update (two drivers on sockets of their own, one checkpoint), SIGTERM, a claim deleted
// that the kubelet never unprepares (undone by the driver's loop after --gone-grace).
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fakes/fake_sysfs_tree.h"
#include "plugin/dra/cdi_spec.h"
#include "plugin/dra/resource_slices.h"
#include "plugin/state/file_attachment_store.h"
#include "support/control_plane.h"
#include "support/daemon_process.h"
#include "support/exec_program.h"
#include "support/temp_dir.h"
#include "unit/dra/dra_devices.h"

#ifndef IBCNI_DRA_BINARY
#error "IBCNI_DRA_BINARY (the ibcni-dra program) must be defined"
#endif

namespace ibcni::dra {
namespace {

using ::ibcni::testing::ControlPlane;
using ::ibcni::testing::DaemonProcess;
using ::testing::HasSubstr;
using nlohmann::json;
using namespace std::chrono_literals;

template <class F>
bool waitFor(F done, std::chrono::milliseconds limit = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(100ms);
  }
  return true;
}

class KubeletDraTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto dir = testing::runProgram({IBCNI_SOURCE_DIR "/scripts/build-upstream.sh", "--dir", "kubelet"},
                                   {testing::kPathEnv}, std::nullopt);
    if (!ControlPlane::built() || dir.status != 0) {
      skipped_ = std::string(ControlPlane::kNotBuilt) + " " + dir.err;
      return;
    }
    kubeletDra_ = dir.out.substr(0, dir.out.find('\n')) + "/kubelet-dra";
    suite_.start();
  }
  static void TearDownTestSuite() { suite_.stop(); }

  void SetUp() override {
    ASSERT_EQ(suite_.failed, "");
    if (!suite_.cp) {
      GTEST_SKIP() << skipped_;
    }
    node_ = "kubelet-dra-" + std::to_string(::getpid()) + "-" + std::to_string(++count_);
    addEightVfs(sys_);
    ASSERT_TRUE(sys_.ok()) << sys_.error();
    auto ns = suite_.api->freshNamespace("kubelet-dra");
    ASSERT_TRUE(ns) << ns.error();
    ns_ = *ns;
    ASSERT_EQ(suite_.api->admin("POST", "/api/v1/namespaces/" + ns_ + "/serviceaccounts",
                          {{"metadata", {{"name", "default"}}}}).first, 201);
    ASSERT_TRUE(suite_.api->createNode(node_));
    for (const char* d : {"registry", "plugins", "cdi", "kubelet", "cni"}) {
      std::filesystem::create_directories(dir_.path() + "/" + d);
    }
  }
  void TearDown() override {
    kubelet_.reset();
    driver_.reset();
    if (!ns_.empty()) {
      (void)suite_.api->admin("DELETE", "/api/v1/namespaces/" + ns_);
      (void)suite_.api->deleteNode(node_);
    }
  }

  std::unique_ptr<DaemonProcess> startDriver(const std::string& log = "driver.log", const std::string& instance = "",
                                             const std::string& goneGrace = "60") {
    return std::make_unique<DaemonProcess>(
        std::vector<std::string>{IBCNI_DRA_BINARY, "--node", node_, "--kubeconfig", suite_.cp->adminKubeconfig(),
                                 "--registry-dir", dir_.path() + "/registry", "--plugins-dir", dir_.path() + "/plugins",
                                 "--cdi-dir", cdiDir(), "--sysfs", sys_.root(), "--interval", "1", "--instance-id",
                                 instance, "--cni-state-dir", dir_.path() + "/cni", "--gone-grace", goneGrace},
        dir_.path() + "/" + log);
  }
  void startKubelet() {
    kubelet_ = std::make_unique<DaemonProcess>(
        std::vector<std::string>{kubeletDra_, "--kubeconfig", suite_.cp->adminKubeconfig(), "--node", node_,
                                 "--registry-dir", dir_.path() + "/registry", "--state-dir", dir_.path() + "/kubelet"},
        dir_.path() + "/kubelet.log", true);
    ASSERT_TRUE(kubelet_->started());
  }
  std::string cdiDir() const { return dir_.path() + "/cdi"; }
  std::string logs() const {
    std::string out;
    for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
      if (e.path().extension() == ".log") {
        out += "\n" + e.path().filename().string() + ":\n" + testing::indentedTail(testing::readFile(e.path()), 20);
      }
    }
    return out;
  }
  std::string path(const std::string& kind, const std::string& name = "") const {
    const std::string group = kind == "pods" ? "/api/v1" : "/apis/resource.k8s.io/v1";
    return group + "/namespaces/" + ns_ + "/" + kind + (name.empty() ? "" : "/" + name);
  }

  /// Pod `pod` on this node with claim `claim` allocated `devices` of this node's pool and reserved
  /// for it, as the scheduler leaves them; the claim's uid.
  std::string podWithClaim(const std::string& pod, const std::string& claim, const std::vector<std::string>& devices) {
    json requests = json::array();
    json results = json::array();
    for (std::size_t i = 0; i < devices.size(); ++i) {
      const std::string r = "rail-" + std::to_string(i);
      requests.push_back({{"name", r}, {"exactly", {{"deviceClassName", "vf.ibcni.io"}}}});
      results.push_back({{"request", r}, {"driver", kDriverName}, {"pool", node_}, {"device", devices[i]}});
    }
    auto [cs, c] = suite_.api->admin("POST", path("resourceclaims"),
                               {{"metadata", {{"name", claim}}}, {"spec", {{"devices", {{"requests", requests}}}}}});
    EXPECT_EQ(cs, 201) << c.dump();
    auto [ps, p] = suite_.api->admin(
        "POST", path("pods"),
        {{"metadata", {{"name", pod}}},
         {"spec",
          {{"nodeName", node_},
           {"resourceClaims", {{{"name", "nics"}, {"resourceClaimName", claim}}}},
           {"containers", {{{"name", "app"}, {"image", "registry.invalid/app"}, {"resources", {{"claims", {{{"name", "nics"}}}}}}}}}}}});
    EXPECT_EQ(ps, 201) << p.dump();
    c["status"] = {{"allocation", {{"devices", {{"results", results}}}}},
                   {"reservedFor", {{{"resource", "pods"}, {"name", pod}, {"uid", p["metadata"]["uid"]}}}}};
    auto [ss, s] = suite_.api->admin("PUT", path("resourceclaims", claim) + "/status", c);
    EXPECT_EQ(ss, 200) << s.dump();
    return c["metadata"].value("uid", "");
  }

  std::vector<std::string> slicesOnServer() const {
    auto [status, list] = suite_.api->admin("GET", "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3D" + node_);
    std::vector<std::string> names;
    for (const auto& s : list.value("items", json::array())) {
      names.push_back(s["metadata"]["name"]);
    }
    return names;
  }

  static inline testing::SuiteApi suite_;
  static inline std::string kubeletDra_;
  static inline int count_ = 0;
  static inline std::string skipped_;
  testing::FakeSysfsTree sys_;
  testing::TempDir dir_{"ibcni-kubelet-dra-"};
  std::string node_;
  std::string ns_;
  std::unique_ptr<DaemonProcess> driver_;
  std::unique_ptr<DaemonProcess> kubelet_;
};

TEST_F(KubeletDraTest, TheKubeletRegistersTheDriverAndPreparesClaimsOfOneAndEightVfs) {
  driver_ = startDriver();
  startKubelet();
  ASSERT_EQ(kubelet_->ask("wait-registered ibcni.io 30"), json({{"ok", true}})) << logs();
  // The kubelet's manager wipes the node's slices when it starts; the registration brings them back.
  EXPECT_TRUE(waitFor([&] { return slicesOnServer().size() == 1; })) << logs();

  const std::string one = podWithClaim("one", "one-vf", {eightVfsName(2)});
  ASSERT_EQ(kubelet_->ask("prepare " + ns_ + " one"), json({{"ok", true}})) << logs();
  json cdi = kubelet_->ask("cdi " + ns_ + " one app");
  // The container gets the VF's devices and its request's device metadata (KEP-5304), as the kubelet's
  // DRA manager passes the driver's CDI IDs on to the runtime.
  EXPECT_EQ(cdi["cdiDevices"], json({"ibcni.io/vf=" + one + "-" + eightVfsName(2), "ibcni.io/metadata=" + one + "_rail-0"}))
      << cdi.dump();
  json spec = json::parse(testing::readFile(cdiSpecPath(cdiDir(), one)), nullptr, false);
  ASSERT_TRUE(spec.is_object()) << logs();
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"], "/dev/infiniband/uverbs3");

  // The node's eight VFs for one claim: VF 2 too, once the first claim is unprepared (a VF is
  // prepared for one claim at a time).
  std::vector<std::string> all;
  for (int n = 0; n < 8; ++n) {
    all.push_back(eightVfsName(n));
  }
  const std::string eight = podWithClaim("eight", "eight-vfs", all);
  ASSERT_EQ(kubelet_->ask("unprepare " + ns_ + " one"), json({{"ok", true}})) << logs();
  EXPECT_FALSE(std::filesystem::exists(cdiSpecPath(cdiDir(), one)));
  ASSERT_EQ(kubelet_->ask("prepare " + ns_ + " eight"), json({{"ok", true}})) << logs();
  EXPECT_EQ(kubelet_->ask("cdi " + ns_ + " eight app")["cdiDevices"].size(), 16U);  // 8 VFs, 8 requests' metadata
  EXPECT_EQ(kubelet_->ask("prepare " + ns_ + " eight"), json({{"ok", true}}));  // a repeat
  EXPECT_TRUE(std::filesystem::exists(cdiSpecPath(cdiDir(), eight)));
}

TEST_F(KubeletDraTest, TheClaimsStatusShowsItsVfAndOnceTheCniAttachedItItsInterfaceAndIps) {
  driver_ = startDriver();
  startKubelet();
  ASSERT_EQ(kubelet_->ask("wait-registered ibcni.io 30"), json({{"ok", true}})) << logs();
  (void)podWithClaim("net", "net-vf", {eightVfsName(5)});
  ASSERT_EQ(kubelet_->ask("prepare " + ns_ + " net"), json({{"ok", true}})) << logs();
  auto devices = [&] { return suite_.api->admin("GET", path("resourceclaims", "net-vf")).second["status"].value("devices", json::array()); };
  ASSERT_TRUE(waitFor([&] { return devices().size() == 1; })) << logs();
  EXPECT_EQ(devices()[0]["conditions"][0]["reason"], "Prepared");

  // ibcni's ADD of the VF in sriov mode, as its attachment record says (written by ibcni's own store).
  state::AttachmentRecord a;
  a.network = "rails";
  a.containerId = "c0ffee";
  a.ifName = "net1";
  a.mode = "sriov";
  a.pciAddress = net::PciAddress::parse("0000:3b:01.5").value();
  cni::Interface pod;
  pod.name = "net1";
  pod.mac = "80:00:00:48:fe:80:00:00:00:00:00:00:02:00:00:00:00:00:0a:05";
  pod.sandbox = "/var/run/netns/net";
  a.result.interfaces.push_back(pod);
  a.result.ips.push_back({net::IpPrefix::parse("192.168.50.7/24").value(), std::nullopt, 0});
  ASSERT_TRUE(state::FileAttachmentStore(dir_.path() + "/cni").save(a));
  ASSERT_TRUE(waitFor([&] { return devices()[0].contains("networkData"); })) << logs();
  const json d = devices()[0];
  EXPECT_EQ(d["driver"], "ibcni.io");
  EXPECT_EQ(d["device"], eightVfsName(5));
  EXPECT_EQ(d["conditions"][0]["reason"], "Attached");
  EXPECT_EQ(d["networkData"], json({{"interfaceName", "net1"}, {"ips", {"192.168.50.7/24"}},
                                    {"hardwareAddress", "80:00:00:48:fe:80:00:00:00:00:00:00:02:00:00:00:00:00:0a:05"}}));
}

TEST_F(KubeletDraTest, AClaimWhoseDeviceIsGoneFailsWithTheDriversReason) {
  driver_ = startDriver();
  startKubelet();
  ASSERT_EQ(kubelet_->ask("wait-registered ibcni.io 30"), json({{"ok", true}})) << logs();
  (void)podWithClaim("lost", "lost-vf", {"vf-0000-3b-02-7"});
  json answer = kubelet_->ask("prepare " + ns_ + " lost");
  EXPECT_EQ(answer["ok"], false);
  EXPECT_THAT(answer.value("error", ""), HasSubstr("device vf-0000-3b-02-7 (request rail-0) is not on this node"));
}

TEST_F(KubeletDraTest, ARestartedDriverUnpreparesFromItsCheckpointAndSigtermRemovesItsSockets) {
  driver_ = startDriver();
  startKubelet();
  ASSERT_EQ(kubelet_->ask("wait-registered ibcni.io 30"), json({{"ok", true}})) << logs();
  const std::string uid = podWithClaim("p", "c", {eightVfsName(0), eightVfsName(1)});
  ASSERT_EQ(kubelet_->ask("prepare " + ns_ + " p"), json({{"ok", true}})) << logs();

  const std::string reg = dir_.path() + "/registry/ibcni.io-reg.sock";
  const std::string sock = dir_.path() + "/plugins/ibcni.io/dra.sock";
  const int status = driver_->stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << logs();
  EXPECT_FALSE(std::filesystem::exists(reg));
  EXPECT_FALSE(std::filesystem::exists(sock));

  driver_ = startDriver("driver2.log");
  ASSERT_TRUE(waitFor([&] { return std::filesystem::exists(reg); })) << logs();
  ASSERT_EQ(kubelet_->ask("wait-registered ibcni.io 30"), json({{"ok", true}})) << logs();
  ASSERT_EQ(kubelet_->askUntilOk("unprepare " + ns_ + " p"), json({{"ok", true}})) << logs();
  EXPECT_FALSE(std::filesystem::exists(cdiSpecPath(cdiDir(), uid)));
}

// The pod and its claim deleted from the API server, the kubelet never unpreparing the claim (it lost
// the pod): the driver's loop undoes it once it has been gone for --gone-grace, not before.
TEST_F(KubeletDraTest, AClaimDeletedThatTheKubeletNeverUnpreparesIsUndoneByTheDriverAfterItsGrace) {
  driver_ = startDriver("driver.log", "", "3");
  startKubelet();
  ASSERT_EQ(kubelet_->ask("wait-registered ibcni.io 30"), json({{"ok", true}})) << logs();
  const std::string uid = podWithClaim("lost", "lost-pod", {eightVfsName(6)});
  ASSERT_EQ(kubelet_->ask("prepare " + ns_ + " lost"), json({{"ok", true}})) << logs();
  ASSERT_TRUE(std::filesystem::exists(cdiSpecPath(cdiDir(), uid)));
  EXPECT_EQ(suite_.api->admin("DELETE", path("pods", "lost") + "?gracePeriodSeconds=0").first, 200);
  EXPECT_EQ(suite_.api->admin("DELETE", path("resourceclaims", "lost-pod")).first, 200);
  std::this_thread::sleep_for(1s);
  EXPECT_TRUE(std::filesystem::exists(cdiSpecPath(cdiDir(), uid))) << "undone within its grace" << logs();
  // The line is logged once the undo is whole (the spec goes before the checkpoint's record does).
  EXPECT_TRUE(waitFor([&] {
    return testing::readFile(dir_.path() + "/driver.log").find("is gone from the API server") != std::string::npos;
  })) << logs();
  EXPECT_FALSE(std::filesystem::exists(cdiSpecPath(cdiDir(), uid)));
  const json records = json::parse(testing::readFile(dir_.path() + "/plugins/ibcni.io/claims.json"), nullptr, false);
  EXPECT_EQ(records.dump().find(uid), std::string::npos) << records.dump();
  // (A late Unprepare then finds no record and succeeds: dra_test. kubelet-dra cannot send it here,
  // as it finds a pod's claims through the pod, which is gone.)
}

TEST_F(KubeletDraTest, InARollingUpdateTheNewDriverServesOnItsOwnSocketsWhileTheOldOneLeaves) {
  driver_ = startDriver("driver-old.log", "pod-old");
  startKubelet();
  ASSERT_EQ(kubelet_->ask("wait-registered ibcni.io 30"), json({{"ok", true}})) << logs();
  const std::string before = podWithClaim("before", "before-update", {eightVfsName(3)});
  ASSERT_EQ(kubelet_->ask("prepare " + ns_ + " before"), json({{"ok", true}})) << logs();
  const std::string reg = dir_.path() + "/registry/ibcni.io-pod-new-reg.sock";
  auto next = startDriver("driver-new.log", "pod-new");
  ASSERT_TRUE(waitFor([&] { return std::filesystem::exists(reg); })) << logs();
  const int status = driver_->stop(SIGTERM);  // the old pod goes, its sockets with it
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/registry/ibcni.io-pod-old-reg.sock"));
  EXPECT_TRUE(std::filesystem::exists(reg));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/plugins/ibcni.io/dra-pod-new.sock"));
  driver_ = std::move(next);
  // The kubelet talks to the new one, which also unprepares what the old one prepared (one checkpoint).
  const std::string after = podWithClaim("after", "after-update", {eightVfsName(4)});
  ASSERT_EQ(kubelet_->askUntilOk("prepare " + ns_ + " after"), json({{"ok", true}})) << logs();
  EXPECT_TRUE(std::filesystem::exists(cdiSpecPath(cdiDir(), after)));
  ASSERT_EQ(kubelet_->askUntilOk("unprepare " + ns_ + " before"), json({{"ok", true}})) << logs();
  EXPECT_FALSE(std::filesystem::exists(cdiSpecPath(cdiDir(), before)));
}

}  // namespace
}  // namespace ibcni::dra
