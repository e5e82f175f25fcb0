// SPDX-License-Identifier: Apache-2.0
// The fault decorators of ibcni-faulty (tests/support/fault/) around the unit tests' fakes, for
// what this machine's kernel cannot do: an IPoIB child (ipoib mode; no ib_ipoib here) and an
// InfiniBand SR-IOV VF with a GUID, a link state and its RDMA device isolated (mlx5's sysfs
// layout, the PF's VF table, RDMA netlink in exclusive mode). Every mutating step of ADD fails in turn: the node
// (links, addresses, VF settings on the PF, RDMA device's netns), the records and the IPAM
// allocations must be as before. Every step of DEL fails in turn: a second DEL must converge.
// No root needed (label `faults` only).
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <set>

#include "fakes/fake_net_sysctls.h"
#include "ipam/embedded_ipam_guids.h"
#include "support/fault/faulty_deps.h"
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

class FakeFaultSteps : public PluginTest {
 protected:
  /// Runs one verb with the fault plan around the fakes (dispatch() as PluginTest::run does).
  plugin::Outcome runFaulty(fault::FaultPlan& plan, const std::string& command, const json& conf) {
    fault::FaultyDeps faulty(deps_, plan);
    std::map<std::string, std::string> vars = {{"CNI_COMMAND", command},
                                               {"CNI_CONTAINERID", "c1"},
                                               {"CNI_NETNS", kPodPath},
                                               {"CNI_IFNAME", "net1"},
                                               {"CNI_PATH", "/opt/cni/bin"}};
    auto getenv = [&vars](const char* name) -> std::optional<std::string> {
      auto it = vars.find(name);
      return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    return plugin::dispatch(getenv, conf.dump(), true, faulty.deps());
  }

  /// What must survive a failed ADD or a completed DEL.
  virtual std::string nodeState() {
    std::string s = snapshot(host_) + snapshot(pod_);
    for (const auto& a : ipam_.allocations) {
      s += "ipam " + a.first + "/" + a.second + "\n";
    }
    for (const auto& r : records()) {
      s += "record " + r.containerId + "/" + r.ifName + "\n";
    }
    return s;
  }

  /// ADD failing at each step, then DEL failing at each step; returns "ADD n, DEL m" steps.
  std::string everyStep(const json& conf) {
    const std::string before = nodeState();
    fault::FaultPlan counting;
    auto ok = runFaulty(counting, "ADD", conf);
    EXPECT_EQ(ok.exitCode, 0) << ok.stdoutText;
    const unsigned addSteps = counting.steps();
    fault::FaultPlan countingDel;
    EXPECT_EQ(runFaulty(countingDel, "DEL", conf).exitCode, 0);
    const unsigned delSteps = countingDel.steps();
    EXPECT_EQ(nodeState(), before) << "a successful ADD and DEL";

    for (unsigned n = 1; n <= addSteps; ++n) {
      fault::FaultPlan plan(n, 0, "");
      auto out = runFaulty(plan, "ADD", conf);
      EXPECT_TRUE(plan.fired());
      EXPECT_EQ(out.exitCode, 1) << "ADD with a fault at step " << n;
      EXPECT_NE(out.stdoutText.find("fault injected at step " + std::to_string(n)), std::string::npos)
          << out.stdoutText;
      EXPECT_EQ(nodeState(), before) << "after ADD failed at step " << n << " of " << addSteps << ": "
                                     << out.stdoutText;
      EXPECT_EQ(run("DEL", conf).exitCode, 0);
      EXPECT_EQ(nodeState(), before) << "after the runtime's DEL";
    }
    for (unsigned n = 1; n <= delSteps; ++n) {
      EXPECT_EQ(run("ADD", conf).exitCode, 0) << "ADD before the DEL failing at step " << n;
      fault::FaultPlan plan(n, 0, "");
      auto out = runFaulty(plan, "DEL", conf);
      EXPECT_TRUE(plan.fired());
      if (out.exitCode != 0) {
        EXPECT_NE(out.stdoutText.find("fault injected at step " + std::to_string(n)), std::string::npos)
            << out.stdoutText;
        auto again = run("DEL", conf);
        EXPECT_EQ(again.exitCode, 0) << "the second DEL after a fault at step " << n << ": " << again.stdoutText;
      }
      EXPECT_EQ(nodeState(), before) << "DEL with a fault at step " << n << " of " << delSteps << " ("
                                     << (out.exitCode == 0 ? "succeeded" : "failed, then DEL again") << ")";
      EXPECT_EQ(run("DEL", conf).exitCode, 0);
    }
    return "ADD " + std::to_string(addSteps) + " steps, DEL " + std::to_string(delSteps);
  }

  /// The node as a process killed at some instant leaves it: the fakes' state and the records.
  struct World {
    FakeNetlink nl;
    FakeRdmaNetlink rdma;
    std::set<std::pair<std::string, std::string>> allocations;
    std::string stateCopy;
  };
  // The state directory as it is: symbolic links (an IPAM store's claims) copied as links.
  static constexpr auto kCopyTree =
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks;
  World capture() {
    World w{nl_, rdma_, ipam_.allocations, stateDir_ + ".killed"};
    std::filesystem::remove_all(w.stateCopy);
    std::filesystem::copy(stateDir_, w.stateCopy, kCopyTree);
    return w;
  }
  void restore(const World& w) {
    nl_ = w.nl;
    rdma_ = w.rdma;
    ipam_.allocations = w.allocations;
    std::filesystem::remove_all(stateDir_);
    std::filesystem::copy(w.stateCopy, stateDir_, kCopyTree);
    std::filesystem::remove_all(w.stateCopy);
  }

  /// SIGKILL right after each mutating step of ADD, then of DEL (the window between step n and
  /// n+1): the world is taken as the dead process left it, then the runtime's DEL (twice, as
  /// kubelet retries) must bring the node back to what it was before ADD. Returns the step counts.
  std::string everyKill(const json& conf) {
    const std::string before = nodeState();
    fault::FaultPlan countAdd;
    EXPECT_EQ(runFaulty(countAdd, "ADD", conf).exitCode, 0);
    const unsigned addSteps = countAdd.steps();
    fault::FaultPlan countDel;
    EXPECT_EQ(runFaulty(countDel, "DEL", conf).exitCode, 0);
    const unsigned delSteps = countDel.steps();
    EXPECT_EQ(nodeState(), before);

    for (int verb = 0; verb < 2; ++verb) {
      const bool killAdd = verb == 0;
      for (unsigned n = 1; n <= (killAdd ? addSteps : delSteps); ++n) {
        if (!killAdd) {
          EXPECT_EQ(run("ADD", conf).exitCode, 0) << "ADD before the DEL killed after step " << n;
        }
        std::optional<World> dead;
        fault::FaultPlan plan(0, 0, "", n);
        plan.onKill([&] { dead.emplace(capture()); });
        (void)runFaulty(plan, killAdd ? "ADD" : "DEL", conf);
        EXPECT_TRUE(dead.has_value()) << "no step " << n;
        if (!dead) {
          continue;
        }
        restore(*dead);
        auto first = run("DEL", conf);
        auto second = run("DEL", conf);
        EXPECT_EQ(second.exitCode, 0) << (killAdd ? "ADD" : "DEL") << " killed after step " << n
                                      << ": the second DEL failed: " << second.stdoutText
                                      << " (the first said: " << first.stdoutText << ")";
        EXPECT_EQ(nodeState(), before) << (killAdd ? "ADD" : "DEL") << " killed after step " << n << " of "
                                       << (killAdd ? addSteps : delSteps) << ", then DEL twice";
      }
    }
    return "ADD " + std::to_string(addSteps) + " kill points, DEL " + std::to_string(delSteps);
  }
};

// ---- ipoib mode ----

class IpoibFaultSteps : public FakeFaultSteps {
 protected:
  void SetUp() override {
    FakeFaultSteps::SetUp();
    nl::Link ib0 = fakeIbLink("ib0", "02:00:00:00:00:00:00:01", "ipoib");
    ib0.mtu = 2044;
    ib0.ipoib = nl::IpoibInfo{net::Pkey::fromWire(0xffff), nl::IpoibMode::kDatagram, false};
    ASSERT_TRUE(nl_.setLinkUp(host_, nl_.addLink(host_, ib0), true));
  }
  json ipoibConfig() const {
    json c = config();
    c.erase("device");
    c["mtu"] = 2000;
    c["mode"] = "ipoib";
    c["master"] = "ib0";
    return c;
  }
};

TEST_F(IpoibFaultSteps, EveryAddStepFailsCleanlyAndEveryDelStepConverges) {
  const std::string steps = everyStep(ipoibConfig());
  std::cout << "ipoib (fakes): " << steps << "\n";
}

TEST_F(IpoibFaultSteps, SigkillAfterEveryStepThenDelTwiceLeavesNothing) {
  const std::string points = everyKill(ipoibConfig());
  std::cout << "ipoib (fakes): " << points << "\n";
}

// ---- sriov mode on an InfiniBand VF: GUID, link state, RDMA isolation ----

class VfFaultSteps : public FakeFaultSteps {
 protected:
  void SetUp() override {
    FakeFaultSteps::SetUp();
    made_ = addIbPfWithVf(kPf, kVfNumber, kVf, kOldGuid);
    pfIndex_ = made_.pfIndex;
    sysfs_.setPkeys("mlx5_3", 1, {"0xffff", "0x8123", "0x0000"});
    ASSERT_TRUE(sysfs_.ok()) << sysfs_.error();
    rdma_.setMode(rdma::NetnsMode::kExclusive);
    nl_.clearCalls();
  }
  std::string nodeState() override {
    auto v = nl_.vf(host_, pfIndex_, kVfNumber).value_or(nl::VfInfo{});
    return FakeFaultSteps::nodeState() + "vf node=" + (v.nodeGuid ? v.nodeGuid->toString() : "-") +
           " port=" + (v.portGuid ? v.portGuid->toString() : "-") +
           " state=" + std::to_string(static_cast<int>(v.linkState.value_or(nl::VfLinkState::kAuto))) + " mlx5_3 in " +
           std::to_string(rdma_.nsOf("mlx5_3")) + "\n";
  }
  json vfConfig() const {
    json c = config();
    c.erase("device");
    c.erase("mtu");
    c["deviceID"] = kVf;
    c["linkState"] = "enable";
    c["rdmaIsolation"] = true;
    c["runtimeConfig"]["infinibandGUID"] = kNewGuid;
    return c;
  }
  IbVf made_;
  int pfIndex_ = 0;
};

TEST_F(VfFaultSteps, EveryAddStepFailsCleanlyAndEveryDelStepConverges) {
  const std::string steps = everyStep(vfConfig());
  std::cout << "sriov IB VF with GUID, linkState and rdmaIsolation (fakes): " << steps << "\n";
}

TEST_F(VfFaultSteps, SigkillAfterEveryStepThenDelTwiceLeavesNothing) {
  const std::string points = everyKill(vfConfig());
  std::cout << "sriov IB VF with GUID, linkState and rdmaIsolation (fakes): " << points << "\n";
}

// ---- sriov mode with guidPool: the VF's GUID from the embedded GUID pools ----

// A VF without a GUID takes one from a node-local guidPool (its store under the stateDir, so that a
// killed process leaves it as the records are left): every step of ADD failing or killed, then DEL,
// must leave the VF without a GUID and the pool holding none.
class GuidPoolVfFaultSteps : public VfFaultSteps {
 protected:
  void SetUp() override {
    VfFaultSteps::SetUp();
    std::vector<nl::VfInfo> vfs;
    for (std::uint32_t i = 0; i < 4; ++i) {
      nl::VfInfo v;
      v.vf = i;
      v.linkState = nl::VfLinkState::kAuto;
      v.nodeGuid = v.portGuid = net::Guid{~std::uint64_t{0}};  // mlx5's "no GUID", which DEL writes back
      vfs.push_back(v);
    }
    nl_.setVfs(host_, pfIndex_, vfs);
    deps_.guids = &guids_;
  }
  std::string storeDir() const { return stateDir_ + "/ipam/.guid/gpool"; }
  std::string nodeState() override {
    std::string s = VfFaultSteps::nodeState();
    auto held = guids_.held(storeDir(), {"c1", "net1"});
    s += "pool holds " + (!held ? "error " + held.error().msg : *held ? (*held)->toString() : std::string("none"));
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(storeDir() + "/ips", ec)) {
      s += " claim " + e.path().filename().string();
    }
    return s + "\n";
  }
  json poolConfig() const {
    json c = vfConfig();
    c["runtimeConfig"].erase("infinibandGUID");
    c["guidPool"] = {{"range", "02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:ff"},
                     {"blockSize", 256},
                     {"pool", "gpool"},
                     {"dataDir", stateDir_ + "/ipam"}};
    return c;
  }
  ipam::EmbeddedGuidPools guids_;
};

constexpr const char* kGuidPoolVf = "sriov IB VF with a guidPool GUID, linkState and rdmaIsolation (fakes): ";

TEST_F(GuidPoolVfFaultSteps, EveryAddStepFailsCleanlyAndEveryDelStepConverges) {
  std::cout << kGuidPoolVf << everyStep(poolConfig()) << "\n";
}

TEST_F(GuidPoolVfFaultSteps, SigkillAfterEveryStepThenDelTwiceLeavesNothing) {
  std::cout << kGuidPoolVf << everyKill(poolConfig()) << "\n";
}

// ---- sriov mode on a VF bound to vfio-pci, for a VM ----

// The VF given to a VM: GUID and link state through the PF without a rebind, nothing in the pod.
// The node's state includes the VF's driver and every bind or unbind written, so a rebind anywhere
// (ADD, an undo, DEL) shows as a difference.
class VfioVfFaultSteps : public VfFaultSteps {
 protected:
  void SetUp() override {
    VfFaultSteps::SetUp();
    bindVfToVfio(made_, kVf);
    nl_.clearCalls();
  }
  std::string nodeState() override {
    auto driver = sysfs::SysfsDevices(sysfs_.root()).driverOf(*net::PciAddress::parse(kVf));
    return VfFaultSteps::nodeState() + "driver " + (driver ? *driver : driver.error().describe()) + " binds [" +
           sysfs_.driverWrites("vfio-pci", "unbind") + sysfs_.driverWrites("vfio-pci", "bind") + "]\n";
  }
  json vmConfig() const {
    json c = vfConfig();
    c.erase("ipam");
    c.erase("rdmaIsolation");
    return c;
  }
};

TEST_F(VfioVfFaultSteps, EveryAddStepFailsCleanlyAndEveryDelStepConverges) {
  std::cout << "sriov IB VF bound to vfio-pci with GUID and linkState (fakes): " << everyStep(vmConfig()) << "\n";
}

TEST_F(VfioVfFaultSteps, SigkillAfterEveryStepThenDelTwiceLeavesNothing) {
  std::cout << "sriov IB VF bound to vfio-pci with GUID and linkState (fakes): " << everyKill(vmConfig()) << "\n";
}

// ---- policyRouting: the interface's sysctls, table routes and rules ----

class PolicyRoutingFaultSteps : public FakeFaultSteps {
 protected:
  void SetUp() override {
    FakeFaultSteps::SetUp();
    deps_.sysctls = &sysctls_;
  }
  json policyConfig() const {
    json c = config("1.1.0");
    c["policyRouting"] = true;
    return c;
  }
  /// The node, and the pod's rules: none of the attachment's may outlive it.
  std::string nodeState() override {
    std::string s = FakeFaultSteps::nodeState();
    for (const auto& rule : nl_.listRules(pod_).value_or(std::vector<nl::Rule>{})) {
      s += "rule " + nl::describe(rule) + "\n";
    }
    return s;
  }
  FakeNetSysctls sysctls_{nl_};
};

TEST_F(PolicyRoutingFaultSteps, EveryAddStepFailsCleanlyAndEveryDelStepConverges) {
  const std::string steps = everyStep(policyConfig());
  std::cout << "policyRouting (fakes): " << steps << "\n";
}

TEST_F(PolicyRoutingFaultSteps, SigkillAfterEveryStepThenDelTwiceLeavesNothing) {
  const std::string points = everyKill(policyConfig());
  std::cout << "policyRouting (fakes): " << points << "\n";
}

}  // namespace
}  // namespace ibcni::testing
