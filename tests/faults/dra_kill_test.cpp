// SPDX-License-Identifier: Apache-2.0
// ibcni-dra killed with SIGKILL after every step of Prepare and of Unprepare, and each step failed
// in turn (ibcni-dra-faulty: tests/support/fault/faulty_claim_effects.h), with the invariant
// "nothing outlives its claim": once the release ibcni-dra, started again on the same folders, has
// answered the kubelet's retried Prepare and then its Unprepare, no CDI spec and no record of the
// claim is left. The kubelet's side is a gRPC client of the DRAPlugin v1 service, as the kubelet
// calls it; the claim is in a real kube-apiserver.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <array>
#include <chrono>
#include <map>
#include <csignal>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fakes/fake_sysfs_tree.h"
#include "k8s.io/kubelet/pkg/apis/dra/v1/api.grpc.pb.h"
#include "ibcni/os/file_io.h"
#include "ipam/embedded_ipam_guids.h"
#include "plugin/dra/claim_checkpoint.h"
#include "support/control_plane.h"
#include "support/daemon_process.h"
#include "support/exec_program.h"
#include "support/temp_dir.h"
#include "unit/dra/dra_devices.h"

namespace ibcni::dra {
namespace {

namespace v1 = k8s::io::kubelet::pkg::apis::dra::v1;
using ::ibcni::testing::ControlPlane;
using ::ibcni::testing::DaemonProcess;
using nlohmann::json;

/// The kubelet's calls, over the driver's socket.
class KubeletCalls {
 public:
  explicit KubeletCalls(const std::string& socket)
      : stub_(v1::DRAPlugin::NewStub(grpc::CreateCustomChannel("unix://" + socket, grpc::InsecureChannelCredentials(),
                                                               fresh()))) {}

  /// NodePrepareResources of one claim: "" when it was prepared, else the error (the claim's, or
  /// the call's when the driver died).
  std::string prepare(const std::string& ns, const std::string& name, const std::string& uid) {
    v1::NodePrepareResourcesRequest request;
    fill(*request.add_claims(), ns, name, uid);
    v1::NodePrepareResourcesResponse response;
    return answer(stub_->NodePrepareResources(context().get(), request, &response), response, uid);
  }
  /// NodePrepareResources of several claims in one call, as the kubelet sends a pod's: each
  /// claim's error by uid ("" when prepared), or {"call", error} when the call failed.
  std::map<std::string, std::string> prepareAll(const std::vector<std::array<std::string, 3>>& claims) {
    v1::NodePrepareResourcesRequest request;
    for (const auto& [ns, name, uid] : claims) {
      fill(*request.add_claims(), ns, name, uid);
    }
    v1::NodePrepareResourcesResponse response;
    auto status = stub_->NodePrepareResources(context().get(), request, &response);
    if (!status.ok()) {
      return {{"call", status.error_message()}};
    }
    std::map<std::string, std::string> out;
    for (const auto& [uid, answer] : response.claims()) {
      out[uid] = answer.error();
    }
    return out;
  }
  std::string unprepare(const std::string& ns, const std::string& name, const std::string& uid) {
    v1::NodeUnprepareResourcesRequest request;
    fill(*request.add_claims(), ns, name, uid);
    v1::NodeUnprepareResourcesResponse response;
    return answer(stub_->NodeUnprepareResources(context().get(), request, &response), response, uid);
  }

 private:
  /// A connection of its own (gRPC shares one per target by default, with the backoff it keeps
  /// after the killed driver), retried quickly.
  static grpc::ChannelArguments fresh() {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
    return args;
  }
  static void fill(v1::Claim& c, const std::string& ns, const std::string& name, const std::string& uid) {
    c.set_namespace_(ns);
    c.set_name(name);
    c.set_uid(uid);
  }
  static std::unique_ptr<grpc::ClientContext> context() {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    c->set_wait_for_ready(true);  // the driver may still be binding its socket
    return c;
  }
  template <class Response>
  static std::string answer(const grpc::Status& status, const Response& response, const std::string& uid) {
    if (!status.ok()) {
      return "call failed: " + status.error_message();
    }
    auto it = response.claims().find(uid);
    return it == response.claims().end() ? "no answer for the claim" : it->second.error();
  }

  std::unique_ptr<v1::DRAPlugin::Stub> stub_;
};

class DraKillTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { suite_.start(); }
  static void TearDownTestSuite() { suite_.stop(); }

  void SetUp() override {
    ASSERT_EQ(suite_.failed, "");
    if (!suite_.cp) {
      GTEST_SKIP() << ControlPlane::kNotBuilt;
    }
    addEightVfs(sys_);
    ASSERT_TRUE(sys_.ok()) << sys_.error();
    auto ns = suite_.api->freshNamespace("dra-kill");
    ASSERT_TRUE(ns) << ns.error();
    ns_ = *ns;
    // A claim of two VFs, allocated on this node as the scheduler leaves it.
    uid_ = makeClaim("rails", json::array());
    std::filesystem::create_directories(dir_.path() + "/cdi");
  }

  /// Claim `name` of VFs 1 and 6 (requests rail-1, rail-6), allocated on this node with the opaque
  /// configuration `config` (status.allocation.devices.config); its uid, "" on failure.
  std::string makeClaim(const std::string& name, const json& config) {
    json results = json::array();
    for (int n : {1, 6}) {
      results.push_back({{"request", "rail-" + std::to_string(n)}, {"driver", "ibcni.io"}, {"pool", kNode},
                         {"device", eightVfsName(n)}});
    }
    const std::string claims = "/apis/resource.k8s.io/v1/namespaces/" + ns_ + "/resourceclaims";
    auto [cs, c] = suite_.api->admin(
        "POST", claims,
        {{"metadata", {{"name", name}}},
         {"spec", {{"devices", {{"requests", {{{"name", "rail-1"}, {"exactly", {{"deviceClassName", "vf.ibcni.io"}}}},
                                               {{"name", "rail-6"}, {"exactly", {{"deviceClassName", "vf.ibcni.io"}}}}}}}}}}});
    EXPECT_EQ(cs, 201) << c.dump();
    c["status"] = {{"allocation", {{"devices", {{"results", results}, {"config", config}}}}}};
    auto [ss, s] = suite_.api->admin("PUT", claims + "/" + name + "/status", c);
    EXPECT_EQ(ss, 200) << s.dump();
    return c["metadata"].value("uid", "");
  }
  void TearDown() override {
    if (!ns_.empty()) {
      (void)suite_.api->admin("DELETE", "/api/v1/namespaces/" + ns_);
    }
  }

  /// ibcni-dra (or the faulty one with `faultEnv`) on this test's folders.
  std::unique_ptr<DaemonProcess> start(const std::string& binary, const std::vector<std::string>& faultEnv,
                                       const std::string& log) {
    std::vector<std::string> args = {"/usr/bin/env"};
    args.insert(args.end(), faultEnv.begin(), faultEnv.end());
    args.insert(args.end(), {binary, "--node", kNode, "--kubeconfig", suite_.cp->adminKubeconfig(), "--registry-dir",
                             dir_.path() + "/registry", "--plugins-dir", dir_.path() + "/plugins", "--cdi-dir",
                             dir_.path() + "/cdi", "--sysfs", sys_.root(), "--instance-id", ""});
    auto d = std::make_unique<DaemonProcess>(args, dir_.path() + "/" + log);
    // Dialled once it is there: gRPC's reconnection backoff would otherwise cost seconds.
    for (int i = 0; i < 200 && !std::filesystem::exists(socket()); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return d;
  }
  std::string socket() const { return dir_.path() + "/plugins/ibcni.io/dra.sock"; }

  /// What the claim left on the node: its CDI specs (of its VFs, of its metadata), its device
  /// metadata, its record.
  std::vector<std::string> leftOver() const { return leftOver(uid_); }
  std::vector<std::string> leftOver(const std::string& uid) const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir_.path() + "/cdi")) {
      out.push_back("cdi/" + e.path().filename().string());
    }
    if (std::filesystem::exists(dir_.path() + "/plugins/ibcni.io/dra-device-metadata")) {
      for (const auto& e : std::filesystem::directory_iterator(dir_.path() + "/plugins/ibcni.io/dra-device-metadata")) {
        out.push_back("metadata " + e.path().filename().string());
      }
    }
    auto records = ClaimCheckpoint(dir_.path() + "/plugins/ibcni.io/claims.json").load();
    if (!records) {
      out.push_back("checkpoint unreadable: " + records.error().describe());
    } else if (records->count(uid) != 0) {
      out.push_back("record of the claim");
    }
    return out;
  }

  /// The steps one Prepare and one Unprepare of claim `name` take, counted by the faulty build's
  /// trace (`env`: more of its environment).
  unsigned stepsOfOneClaim(const std::string& name, const std::string& uid, std::vector<std::string> env = {}) {
    const std::string trace = dir_.path() + "/trace";
    env.push_back("IBCNI_FAULT_TRACE=" + trace);
    auto d = start(IBCNI_DRA_FAULTY_BINARY, env, "count.log");
    {
      KubeletCalls kubelet(socket());
      EXPECT_EQ(kubelet.prepare(ns_, name, uid), "");
      EXPECT_EQ(kubelet.unprepare(ns_, name, uid), "");
    }
    (void)d->stop(SIGTERM);
    const std::string text = testing::readFile(trace);
    return static_cast<unsigned>(std::count(text.begin(), text.end(), '\n'));
  }

  static constexpr const char* kNode = "dra-kill-node";
  static inline testing::SuiteApi suite_;
  testing::FakeSysfsTree sys_;
  testing::TempDir dir_{"ibcni-dra-kill-"};
  std::string ns_;
  std::string uid_;
};

TEST_F(DraKillTest, NothingOutlivesItsClaimWhateverStepTheDriverDiesAfterOrFails) {
  const unsigned steps = stepsOfOneClaim("rails", uid_);
  // Prepare: record ahead, CDI spec, device metadata, record prepared; Unprepare: record marked
  // incomplete, metadata and spec removed, record dropped.
  ASSERT_EQ(steps, 8U) << testing::readFile(dir_.path() + "/trace");
  ASSERT_THAT(leftOver(), ::testing::IsEmpty());
  for (unsigned step = 1; step <= steps; ++step) {
    for (const char* fault : {"IBCNI_FAULT_KILL_AFTER=", "IBCNI_FAULT_STEP="}) {
      SCOPED_TRACE(std::string(fault) + std::to_string(step));
      {
        auto faulty = start(IBCNI_DRA_FAULTY_BINARY, {fault + std::to_string(step)}, "faulty.log");
        {
          KubeletCalls kubelet(socket());
          if (kubelet.prepare(ns_, "rails", uid_).empty()) {
            (void)kubelet.unprepare(ns_, "rails", uid_);
          }
        }  // disconnected first: a connected client holds the driver's stop for its 1 s grace
        (void)faulty->stop(SIGTERM);  // dead already after a kill
      }
      // The release driver, started again: the kubelet retries Prepare until it succeeds, and
      // unprepares when the pod goes.
      auto driver = start(IBCNI_DRA_BINARY, {}, "driver.log");
      {
        KubeletCalls kubelet(socket());
        EXPECT_EQ(kubelet.prepare(ns_, "rails", uid_), "");
        EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/cdi/ibcni.io-vf-" + uid_ + ".json"));
        EXPECT_EQ(kubelet.unprepare(ns_, "rails", uid_), "");
      }
      EXPECT_THAT(leftOver(), ::testing::IsEmpty()) << testing::readFile(dir_.path() + "/faulty.log");
      (void)driver->stop(SIGTERM);
    }
  }
}

TEST_F(DraKillTest, AClaimKilledInPrepareIsUndoneByUnprepareAlone) {
  // The pod goes before the kubelet's retry: Unprepare alone, from the record written ahead.
  for (unsigned step = 1; step <= 2; ++step) {
    SCOPED_TRACE("killed after step " + std::to_string(step));
    {
      auto faulty = start(IBCNI_DRA_FAULTY_BINARY, {"IBCNI_FAULT_KILL_AFTER=" + std::to_string(step)}, "faulty.log");
      KubeletCalls kubelet(socket());
      EXPECT_THAT(kubelet.prepare(ns_, "rails", uid_), ::testing::HasSubstr("call failed"));
      (void)faulty->stop(SIGTERM);
    }
    EXPECT_THAT(leftOver(), ::testing::Not(::testing::IsEmpty()));  // what the kill left
    auto driver = start(IBCNI_DRA_BINARY, {}, "driver.log");
    KubeletCalls kubelet(socket());
    EXPECT_EQ(kubelet.unprepare(ns_, "rails", uid_), "");
    EXPECT_THAT(leftOver(), ::testing::IsEmpty());
    (void)driver->stop(SIGTERM);
  }
}

TEST_F(DraKillTest, OneCallOfTwoClaimsAnswersEachAndAnUnknownClaimUnpreparesAsSuccess) {
  auto driver = start(IBCNI_DRA_BINARY, {}, "driver.log");
  KubeletCalls kubelet(socket());
  // The kubelet's call for a pod of two claims, one of which the API server does not have.
  auto answers = kubelet.prepareAll({{{ns_, "rails", uid_}, {ns_, "no-such-claim", "7e57ab1e-0000-4000-8000-000000000001"}}});
  ASSERT_EQ(answers.count("call"), 0U) << answers["call"];
  EXPECT_EQ(answers[uid_], "");
  EXPECT_THAT(answers["7e57ab1e-0000-4000-8000-000000000001"], ::testing::HasSubstr("404"));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() + "/cdi/ibcni.io-vf-" + uid_ + ".json"));
  // Unprepare of a claim this driver never prepared (a uid it does not know) succeeds and changes nothing.
  EXPECT_EQ(kubelet.unprepare(ns_, "no-such-claim", "7e57ab1e-0000-4000-8000-000000000001"), "");
  EXPECT_EQ(kubelet.unprepare(ns_, "rails", uid_), "");
  EXPECT_THAT(leftOver(), ::testing::IsEmpty());
  (void)driver->stop(SIGTERM);
}

/// The VFs of the faulty build's table (IBCNI_FAULT_VF_TABLE), without its rebind counts: what
/// their PF keeps.
json vfSettings(const std::string& table) {
  json j = json::parse(testing::readFile(table), nullptr, false);
  for (auto& [k, v] : j.items()) {
    v.erase("rebinds");
  }
  return j;
}

TEST_F(DraKillTest, AClaimsGuidsAndLinkStateOutliveNoKillOrFailureAtAnyStep) {
  // rail-1: a GUID from a node-local pool (assign always: it replaces the VF's own) and linkState
  // enable; rail-6: a GUID of the claim's own. The VFs are the faulty build's file (this machine has
  // no SR-IOV PF); the pool is the production one, in this test's folder.
  const std::string table = dir_.path() + "/vfs.json";
  const json original = {
      {"ib0/1", {{"node", "02:00:00:00:00:00:a0:01"}, {"port", "02:00:00:00:00:00:a0:01"}, {"linkState", 0},
                 {"pci", "0000:3b:01.1"}}},
      {"ib0/6", {{"node", "02:00:00:00:00:00:a0:06"}, {"port", "02:00:00:00:00:00:a0:06"}, {"linkState", 0},
                 {"pci", "0000:3b:01.6"}}}};
  ASSERT_TRUE(os::writeFileAtomic(table, original.dump()));
  const json pool = {{"range", "02:00:00:00:00:b0:00:00-02:00:00:00:00:b0:00:ff"}, {"blockSize", 16},
                     {"assign", "always"}, {"dataDir", dir_.path() + "/ipam"}};
  const std::string uid = makeClaim(
      "tuned", json::array({{{"source", "FromClaim"}, {"requests", {"rail-1"}},
                             {"opaque", {{"driver", "ibcni.io"}, {"parameters", {{"guidPool", pool}, {"linkState", "enable"}}}}}},
                            {{"source", "FromClaim"}, {"requests", {"rail-6"}},
                             {"opaque", {{"driver", "ibcni.io"}, {"parameters", {{"guid", "02:00:00:00:00:00:0c:06"}}}}}}}));
  ASSERT_FALSE(uid.empty());
  const std::string vfEnv = "IBCNI_FAULT_VF_TABLE=" + table;
  ipam::EmbeddedGuidPools guids;
  const std::string store = dir_.path() + "/ipam/.guid/ibcni-dra";
  auto poolHolds = [&] { return guids.holders(store).value_or(std::vector<ipam::ReleasedAllocation>{{}}).size(); };
  const unsigned steps = stepsOfOneClaim("tuned", uid, {vfEnv});
  // Prepare: record ahead; rail-1: pool ahead, GUID allocated, GUID ahead, set, rebind, link state
  // ahead, set; rail-6: GUID ahead, set, rebind; CDI spec; metadata; prepared. Unprepare: incomplete;
  // rail-6: GUIDs back, rebind; rail-1: link state back, GUIDs back, rebind, GUID released; metadata;
  // spec; dropped.
  ASSERT_EQ(steps, 24U) << testing::readFile(dir_.path() + "/trace");
  ASSERT_EQ(vfSettings(table), original);
  for (unsigned step = 1; step <= steps; ++step) {
    for (const char* fault : {"IBCNI_FAULT_KILL_AFTER=", "IBCNI_FAULT_STEP="}) {
      SCOPED_TRACE(std::string(fault) + std::to_string(step));
      {
        auto faulty = start(IBCNI_DRA_FAULTY_BINARY, {vfEnv, fault + std::to_string(step)}, "faulty.log");
        {
          KubeletCalls kubelet(socket());
          if (kubelet.prepare(ns_, "tuned", uid).empty()) {
            (void)kubelet.unprepare(ns_, "tuned", uid);
          }
        }
        (void)faulty->stop(SIGTERM);
      }
      // The driver started again (the faulty build without a fault: the same code, over the same
      // VF table): the kubelet's retried Prepare, then Unprepare.
      auto driver = start(IBCNI_DRA_FAULTY_BINARY, {vfEnv}, "driver.log");
      {
        KubeletCalls kubelet(socket());
        EXPECT_EQ(kubelet.prepare(ns_, "tuned", uid), "");
        const json prepared = vfSettings(table);
        EXPECT_EQ(prepared["ib0/6"]["node"], "02:00:00:00:00:00:0c:06");
        EXPECT_THAT(prepared["ib0/1"]["node"].get<std::string>(), ::testing::StartsWith("02:00:00:00:00:b0:00:"));
        EXPECT_EQ(prepared["ib0/1"]["linkState"], 1);
        EXPECT_EQ(poolHolds(), 1U);
        EXPECT_EQ(kubelet.unprepare(ns_, "tuned", uid), "");
      }
      // Nothing outlives the claim: the VFs as they were, the pool's GUID back, no spec, no record.
      EXPECT_EQ(vfSettings(table), original) << testing::readFile(dir_.path() + "/faulty.log");
      EXPECT_EQ(poolHolds(), 0U);
      EXPECT_THAT(leftOver(uid), ::testing::IsEmpty()) << testing::readFile(dir_.path() + "/faulty.log");
      (void)driver->stop(SIGTERM);
    }
  }
}

}  // namespace
}  // namespace ibcni::dra
