// SPDX-License-Identifier: Apache-2.0
// sriov mode on a VF bound to vfio-pci, for a VM (KubeVirt): the mlx5 layout of the fakes with the
// VF's netdev and RDMA device gone (vfio-pci makes neither). ADD sets the GUIDs and link state
// through the PF by VF index, rebinds nothing, moves nothing into the pod and allocates no address;
// the result names the VF's PCI address; DEL puts the settings back and leaves the VF bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "fakes/fake_guid_pools.h"
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class SriovVfioTest : public PluginTest {
 protected:
  void SetUp() override {
    PluginTest::SetUp();
    const IbVf made = addIbPfWithVf(kPf, kVfNumber, kVf, kOldGuid);
    pfIndex_ = made.pfIndex;
    bindVfToVfio(made, kVf);
    nl_.clearCalls();
  }

  /// A network for VMs as KubeVirt users write it: no ipam, no mtu; Multus injects deviceID.
  json vmConfig(const std::string& version = "1.1.0") const {
    json c = config(version);
    c.erase("device");
    c.erase("mtu");
    c.erase("ipam");
    c["deviceID"] = kVf;
    return c;
  }
  static json withGuid(json c, const std::string& g = kNewGuid) {
    c["runtimeConfig"]["infinibandGUID"] = g;
    return c;
  }

  nl::VfInfo vfState() { return nl_.vf(host_, pfIndex_, kVfNumber).value_or(nl::VfInfo{}); }
  std::string driverOfVf() {
    auto d = sysfs::SysfsDevices(sysfs_.root()).driverOf(*net::PciAddress::parse(kVf));
    return d ? *d : "error " + d.error().describe();
  }
  /// Everything a VFIO attachment may touch: links of both namespaces, the VF's settings on the
  /// PF, its driver and every bind/unbind written.
  std::string nodeState() {
    auto v = vfState();
    return snapshot(host_) + snapshot(pod_) + "vf node=" + (v.nodeGuid ? v.nodeGuid->toString() : "-") +
           " port=" + (v.portGuid ? v.portGuid->toString() : "-") +
           " state=" + std::to_string(static_cast<int>(v.linkState.value_or(nl::VfLinkState::kAuto))) +
           " driver=" + driverOfVf() + " binds=" + sysfs_.driverWrites("vfio-pci", "unbind") +
           sysfs_.driverWrites("mlx5_core", "unbind") + " records=" + std::to_string(records().size());
  }
  int countOps(FakeNetlink::Op op) {
    auto ops = nl_.callOps();
    return static_cast<int>(std::count(ops.begin(), ops.end(), op));
  }
  std::string msgOf(const plugin::Outcome& out) { return errorOf(out).value("msg", std::string()); }

  int pfIndex_ = 0;
};

TEST_F(SriovVfioTest, AddSetsGuidAndLinkStateThroughThePfWithoutARebindOrAMoveAndDelRestoresThem) {
  json c = withGuid(vmConfig());
  c["linkState"] = "enable";
  const std::string podBefore = snapshot(pod_);
  const json result = add(c);

  EXPECT_EQ(vfState().nodeGuid, guid(kNewGuid));
  EXPECT_EQ(vfState().portGuid, guid(kNewGuid));
  EXPECT_EQ(vfState().linkState, nl::VfLinkState::kEnable);
  EXPECT_EQ(sysfs_.driverWrites("vfio-pci", "unbind"), "") << "no rebind: the guest reads the GUID at boot";
  EXPECT_EQ(sysfs_.driverWrites("mlx5_core", "unbind"), "");
  EXPECT_EQ(driverOfVf(), "vfio-pci");
  EXPECT_EQ(snapshot(pod_), podBefore) << "nothing moves into the pod";
  EXPECT_EQ(countOps(FakeNetlink::Op::kMoveLink), 0);
  EXPECT_TRUE(ipam_.calls.empty()) << "no IPAM";
  // The calls went to the PF by VF index.
  for (const auto& call : nl_.calls()) {
    if (call.op == FakeNetlink::Op::kSetVfGuids || call.op == FakeNetlink::Op::kSetVfLinkState) {
      EXPECT_TRUE(call.args.starts_with(std::to_string(pfIndex_) + ", vf " + std::to_string(kVfNumber) + ","))
          << call.toString();
    }
  }

  ASSERT_EQ(result["interfaces"].size(), 1u) << result.dump();
  const json& iface = result["interfaces"][0];
  EXPECT_EQ(iface["name"], "net1");
  EXPECT_EQ(iface["sandbox"], kPodPath) << "Multus reports only interfaces with a sandbox";
  EXPECT_EQ(iface["pciID"], kVf) << "KubeVirt matches the VF by its PCI address";
  EXPECT_FALSE(iface.contains("mac"));
  EXPECT_FALSE(iface.contains("mtu"));
  EXPECT_FALSE(result.contains("ips") && !result["ips"].empty());
  ASSERT_EQ(records().size(), 1u);
  EXPECT_EQ(records()[0].mode, "sriov-vfio");
  EXPECT_EQ(records()[0].oldPortGuid, kOldGuid);

  ASSERT_EQ(run("DEL", c).exitCode, 0);
  EXPECT_EQ(vfState().nodeGuid, guid(kOldGuid));
  EXPECT_EQ(vfState().portGuid, guid(kOldGuid));
  EXPECT_EQ(vfState().linkState, nl::VfLinkState::kAuto);
  EXPECT_EQ(sysfs_.driverWrites("vfio-pci", "unbind"), "") << "DEL leaves the VF bound to vfio-pci";
  EXPECT_EQ(driverOfVf(), "vfio-pci");
  EXPECT_TRUE(records().empty());
  EXPECT_EQ(run("DEL", c).exitCode, 0) << "DEL twice";
}

TEST_F(SriovVfioTest, TheResultAt100HasNoPciIdAndAVfThatKeepsItsGuidChangesNothing) {
  const std::string before = nodeState();
  const json result = add(vmConfig("1.0.0"));
  EXPECT_FALSE(result["interfaces"][0].contains("pciID")) << result.dump();
  EXPECT_EQ(result["interfaces"][0]["sandbox"], kPodPath);
  EXPECT_EQ(countOps(FakeNetlink::Op::kSetVfGuids), 0) << "the VF keeps the GUID it has";
  ASSERT_EQ(run("DEL", vmConfig("1.0.0")).exitCode, 0);
  EXPECT_EQ(nodeState(), before);
}

TEST_F(SriovVfioTest, AVariantDriverOfVfioPciIsTakenAsVfio) {
  sysfs_.setDriver(kVf, "mlx5_vfio_pci");
  add(withGuid(vmConfig()));
  EXPECT_EQ(vfState().portGuid, guid(kNewGuid));
  EXPECT_EQ(sysfs_.driverWrites("mlx5_vfio_pci", "unbind"), "");
  ASSERT_EQ(run("DEL", vmConfig()).exitCode, 0);
  EXPECT_EQ(vfState().portGuid, guid(kOldGuid));
}

TEST_F(SriovVfioTest, WhatOnlyAPodsNetdevCanTakeIsError7NamingTheFieldAndChangesNothing) {
  const std::string before = nodeState();
  struct Case {
    std::string field;
    json conf;
    std::string wants;
  };
  json withIpam = vmConfig();
  withIpam["ipam"] = {{"type", "fake"}};
  json withMtu = vmConfig();
  withMtu["mtu"] = 2000;
  json isolated = vmConfig();
  isolated["rdmaIsolation"] = true;
  json required = vmConfig();
  required["verbsCheck"] = {{"mode", "require"}};
  json mac = vmConfig();
  mac["runtimeConfig"]["mac"] = "02:00:00:00:00:01";
  json routed = vmConfig();
  routed["policyRouting"] = true;
  for (const auto& k : {Case{"ipam", withGuid(withIpam), "cloud-init"}, Case{"mtu", withMtu, "remove mtu"},
                        Case{"rdmaIsolation", isolated, "rdmaIsolation"}, Case{"verbsCheck", required, "warn"},
                        Case{"mac", mac, "mac"}, Case{"policyRouting", routed, "remove policyRouting"}}) {
    auto out = run("ADD", k.conf);
    EXPECT_EQ(errorOf(out)["code"], 7) << k.field << ": " << out.stdoutText;
    const std::string msg = msgOf(out);
    EXPECT_NE(msg.find(k.field == "mac" ? "MAC" : k.field), std::string::npos) << msg;
    EXPECT_NE(msg.find("vfio-pci"), std::string::npos) << msg;
    EXPECT_NE(msg.find(k.wants), std::string::npos) << msg;
    EXPECT_EQ(nodeState(), before) << k.field;
    EXPECT_TRUE(ipam_.allocations.empty()) << k.field;
  }
}

TEST_F(SriovVfioTest, AVfWithoutAGuidAndNoneRequestedIsRefusedWithTheHowTo) {
  std::vector<nl::VfInfo> vfs;
  for (std::uint32_t i = 0; i < 4; ++i) {
    nl::VfInfo v;
    v.vf = i;
    v.linkState = nl::VfLinkState::kAuto;
    v.nodeGuid = v.portGuid = net::Guid{0};
    vfs.push_back(v);
  }
  nl_.setVfs(host_, pfIndex_, vfs);
  auto out = run("ADD", vmConfig());
  EXPECT_EQ(errorOf(out)["code"], 7) << out.stdoutText;
  EXPECT_NE(msgOf(out).find("infinibandGUID"), std::string::npos) << out.stdoutText;
  EXPECT_TRUE(records().empty());
  add(withGuid(vmConfig()));
  EXPECT_EQ(vfState().portGuid, guid(kNewGuid));
  ASSERT_EQ(run("DEL", vmConfig()).exitCode, 0);
  EXPECT_EQ(vfState().portGuid, net::Guid{~std::uint64_t{0}}) << "no GUID is written back as all ones";
}

TEST_F(SriovVfioTest, VfioTrueRefusesAVfUnderItsNetdevDriverAndFalseRefusesAVfioVf) {
  json vmOnly = withGuid(vmConfig());
  vmOnly["vfio"] = true;
  sysfs_.setDriver(kVf, "mlx5_core");
  auto out = run("ADD", vmOnly);
  EXPECT_EQ(errorOf(out)["code"], 100) << out.stdoutText;
  EXPECT_NE(msgOf(out).find("mlx5_core"), std::string::npos) << out.stdoutText;
  EXPECT_NE(msgOf(out).find("\"vfio\": true"), std::string::npos) << out.stdoutText;

  sysfs_.setDriver(kVf, "vfio-pci");
  json podOnly = withGuid(vmConfig());
  podOnly["vfio"] = false;
  out = run("ADD", podOnly);
  EXPECT_EQ(errorOf(out)["code"], 100) << out.stdoutText;
  EXPECT_NE(msgOf(out).find("vfio-pci"), std::string::npos) << out.stdoutText;
  EXPECT_NE(msgOf(out).find("\"vfio\": false"), std::string::npos) << out.stdoutText;
  EXPECT_EQ(countOps(FakeNetlink::Op::kSetVfGuids), 0);

  json badValue = vmConfig();
  badValue["vfio"] = "yes";
  out = run("ADD", badValue);
  EXPECT_EQ(errorOf(out)["code"], 7) << out.stdoutText;
  EXPECT_NE(msgOf(out).find("vfio"), std::string::npos) << out.stdoutText;
  EXPECT_TRUE(records().empty());
}

TEST_F(SriovVfioTest, CheckPassesThenFailsWhenTheVfLeavesVfioPciOrLosesItsGuid) {
  json c = withGuid(vmConfig());
  const json result = add(c);
  json checked = c;
  checked["prevResult"] = result;
  auto out = run("CHECK", checked);
  EXPECT_EQ(out.exitCode, 0) << out.stdoutText;

  ASSERT_TRUE(nl_.setVfGuids(host_, pfIndex_, kVfNumber, guid(kOldGuid), guid(kOldGuid)));
  out = run("CHECK", checked);
  EXPECT_EQ(errorOf(out)["code"], static_cast<int>(cni::Errc::kCheckFailed)) << out.stdoutText;
  EXPECT_NE(msgOf(out).find(kOldGuid), std::string::npos) << out.stdoutText;
  ASSERT_TRUE(nl_.setVfGuids(host_, pfIndex_, kVfNumber, guid(kNewGuid), guid(kNewGuid)));

  sysfs_.setDriver(kVf, "mlx5_core");
  out = run("CHECK", checked);
  EXPECT_EQ(errorOf(out)["code"], static_cast<int>(cni::Errc::kCheckFailed)) << out.stdoutText;
  EXPECT_NE(msgOf(out).find("mlx5_core"), std::string::npos) << out.stdoutText;
  sysfs_.setDriver(kVf, "vfio-pci");
  ASSERT_EQ(run("DEL", c).exitCode, 0);
}

TEST_F(SriovVfioTest, DelSucceedsWhenTheVfOrThePfOrTheRecordIsGoneAndAfterARebootLeavesTheVfAlone) {
  json c = withGuid(vmConfig());
  c["linkState"] = "enable";
  add(c);
  bootId_ = "boot-2";
  nl_.clearCalls();
  ASSERT_EQ(run("DEL", c).exitCode, 0);
  EXPECT_EQ(countOps(FakeNetlink::Op::kSetVfGuids), 0) << "a reboot reset the VF";
  EXPECT_EQ(countOps(FakeNetlink::Op::kSetVfLinkState), 0);
  bootId_ = "boot-1";

  add(c);
  nl_.removeLink(host_, pfIndex_);
  sysfs_.removeNetdev("ibp59s0");
  EXPECT_EQ(run("DEL", c).exitCode, 0) << "the PF's netdev is gone";
  EXPECT_TRUE(records().empty());
  EXPECT_EQ(run("DEL", c).exitCode, 0) << "no record";
}

// A VF given to a VM stays in the host bound to vfio-pci: only the records say it is taken.
TEST_F(SriovVfioTest, AVfHeldByALiveVmIs101AndOneWhosePodDiedIsTakenWithoutLosingItsNewGuidToTheOldDel) {
  add(withGuid(vmConfig()));
  netns_.addNetns("/var/run/netns/pod2");
  const std::map<std::string, std::string> second = {{"CNI_CONTAINERID", "c2"}, {"CNI_NETNS", "/var/run/netns/pod2"}};
  auto out = run("ADD", withGuid(vmConfig(), "c2:00:00:00:00:00:00:02"), second);
  EXPECT_EQ(errorOf(out)["code"], 101) << out.stdoutText;
  EXPECT_NE(msgOf(out).find("container c1"), std::string::npos) << out.stdoutText;
  EXPECT_EQ(vfState().portGuid, guid(kNewGuid));

  netns_.removeNetns(kPodPath);  // c1's pod died without a DEL
  add(withGuid(vmConfig(), "c2:00:00:00:00:00:00:02"), second);
  EXPECT_EQ(vfState().portGuid, guid("c2:00:00:00:00:00:00:02"));
  ASSERT_EQ(run("DEL", vmConfig()).exitCode, 0) << "c1's late DEL";
  EXPECT_EQ(vfState().portGuid, guid("c2:00:00:00:00:00:00:02")) << "c1's DEL leaves c2's GUID alone";
  ASSERT_EQ(run("DEL", vmConfig(), second).exitCode, 0);
  EXPECT_EQ(vfState().portGuid, guid(kOldGuid)) << "c2 restores the GUID c1 replaced, not c1's";
  EXPECT_EQ(vfState().nodeGuid, guid(kOldGuid));
}

TEST_F(SriovVfioTest, GcOfAVmsAttachmentThatIsNoLongerListedRestoresTheVf) {
  json c = withGuid(vmConfig());
  add(c);
  json gc = vmConfig();
  gc["cni.dev/valid-attachments"] = json::array();
  auto out = run("GC", gc, {{"CNI_CONTAINERID", ""}, {"CNI_NETNS", ""}, {"CNI_IFNAME", ""}});
  EXPECT_EQ(out.exitCode, 0) << out.stdoutText;
  EXPECT_EQ(vfState().portGuid, guid(kOldGuid));
  EXPECT_TRUE(records().empty());
  EXPECT_EQ(driverOfVf(), "vfio-pci");
}

TEST_F(SriovVfioTest, StatusOfANetworkForVmsIsReady) {
  json c = vmConfig();
  c["vfio"] = true;
  auto out = run("STATUS", c, {{"CNI_CONTAINERID", ""}, {"CNI_NETNS", ""}, {"CNI_IFNAME", ""}});
  EXPECT_EQ(out.exitCode, 0) << out.stdoutText;
}

TEST_F(SriovVfioTest, ThePciAddressReachesMultusThroughTheDeviceInfoFileWhenItIsAbsent) {
  const std::string path = devinfoRoot() + "cni/default-ibnet-c1_net1";
  json c = withGuid(vmConfig());
  c["capabilities"] = {{"deviceID", true}, {"CNIDeviceInfoFile", true}};
  c["runtimeConfig"]["CNIDeviceInfoFile"] = path;
  add(c);
  ASSERT_TRUE(std::filesystem::is_regular_file(path));
  const json doc = json::parse(slurp(path), nullptr, false);
  EXPECT_EQ(doc["type"], "pci") << doc.dump();
  EXPECT_EQ(doc["pci"]["pci-address"], kVf);
  EXPECT_EQ(doc["pci"]["pf-pci-address"], kPf);
  EXPECT_FALSE(doc["pci"].contains("rdma-device")) << "the host has no RDMA device of a VM's VF";
  ASSERT_EQ(run("DEL", c).exitCode, 0);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(SriovVfioTest, AGuidFromTheGuidPoolIsSetWithoutARebindAndReleasedOnDel) {
  FakeGuidPools pools;
  deps_.guids = &pools;
  json c = vmConfig();
  c["guidPool"] = {{"range", "02:00:00:00:00:00:01:00-02:00:00:00:00:00:01:ff"},
                   {"blockSize", 256},
                   {"pool", "gpool"},
                   {"assign", "always"},
                   {"dataDir", stateDir_ + "/ipam"}};
  add(c);
  ASSERT_TRUE(vfState().portGuid);
  EXPECT_EQ(vfState().portGuid->toString().substr(0, 18), "02:00:00:00:00:00:") << vfState().portGuid->toString();
  EXPECT_EQ(pools.count(), 1u);
  EXPECT_EQ(sysfs_.driverWrites("vfio-pci", "unbind"), "");
  ASSERT_EQ(run("DEL", c).exitCode, 0);
  EXPECT_EQ(vfState().portGuid, guid(kOldGuid));
  EXPECT_EQ(pools.count(), 0u);
}

// A PF bound to vfio-pci is passed through whole: taken as it is, with nothing to set (a PF's GUIDs
// are its firmware's), and GUID or link state settings are refused.
TEST_F(SriovVfioTest, APfPassedThroughWholeIsTakenAsItIsAndRefusesVfSettings) {
  constexpr const char* kLonePf = "0000:5e:00.0";
  sysfs_.addPciFunction(kLonePf).setDriver(kLonePf, "vfio-pci");
  ASSERT_TRUE(sysfs_.ok()) << sysfs_.error();
  json c = vmConfig();
  c["deviceID"] = kLonePf;
  const std::string before = nodeState();
  const json result = add(c);
  EXPECT_EQ(result["interfaces"][0]["pciID"], kLonePf);
  EXPECT_EQ(countOps(FakeNetlink::Op::kSetVfGuids), 0);
  ASSERT_EQ(run("DEL", c).exitCode, 0);
  EXPECT_EQ(nodeState(), before);

  auto out = run("ADD", withGuid(c));
  EXPECT_EQ(errorOf(out)["code"], 7) << out.stdoutText;
  EXPECT_NE(msgOf(out).find("no SR-IOV VF"), std::string::npos) << out.stdoutText;

  sysfs_.setDriver(kPf, "vfio-pci");
  c["deviceID"] = kPf;
  out = run("ADD", c);
  EXPECT_EQ(errorOf(out)["code"], 7) << out.stdoutText;
  EXPECT_NE(msgOf(out).find("every VF"), std::string::npos) << out.stdoutText;
}

}  // namespace
}  // namespace ibcni::testing
