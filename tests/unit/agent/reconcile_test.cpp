// SPDX-License-Identifier: Apache-2.0
// `ibcni reconcile` in the fake world: what a pod that died without a DEL left is undone as its
// DEL would have; a live attachment, one whose netns cannot be checked and one whose device lock
// is held are left alone; ADD's busy answer names only live holders.
#include <fcntl.h>

#include <filesystem>
#include <fstream>

#include "plugin/agent/reconcile.h"
#include "unit/plugin_fixture.h"

namespace ibcni::testing {
namespace {

class ReconcileTest : public PluginTest {
 protected:
  plugin::ReconcileReport pass(bool dryRun = false, std::vector<std::string> dataDirs = {}) {
    plugin::ReconcileOptions o;
    o.stateDirs = {stateDir_};
    o.ipamDataDirs = std::move(dataDirs);
    o.dryRun = dryRun;
    o.lockWait = std::chrono::milliseconds(50);
    return plugin::reconcile(o, deps_);
  }
  static std::string actions(const plugin::ReconcileReport& r) {
    std::string s;
    for (const auto& a : r.attachments) {
      s += (s.empty() ? "" : ",") + a.containerId + ":" + a.action;
    }
    return s;
  }
  // The pod's namespace is destroyed: the kernel moves a physical device back to the host under
  // its pod name; the path stops resolving.
  void podDiesReturningTheDevice() {
    ASSERT_TRUE(nl_.moveLink(pod_, nl_.findLink(pod_, "net1")->index, host_));
    netns_.removeNetns(kPodPath);
  }
};

TEST_F(ReconcileTest, AnAttachmentWhoseNetnsIsGoneIsUndoneAsItsDelWouldHaveBeen) {
  const auto host = snapshot(host_);
  add(config());
  podDiesReturningTheDevice();
  ASSERT_NE(snapshot(host_), host) << "the device came back under the pod's name";
  auto r = pass();
  EXPECT_EQ(actions(r), "c1:undone");
  EXPECT_FALSE(r.failed());
  EXPECT_EQ(snapshot(host_), host) << "name, MTU, MAC, alias and state restored";
  EXPECT_TRUE(ipam_.allocations.empty()) << "released with the configuration ADD was given";
  EXPECT_EQ(ipam_.calls.back(), "DEL c1 net1");
  EXPECT_TRUE(records().empty());
  EXPECT_EQ(actions(pass()), "") << "a second pass finds nothing";
}

// A VF given to a VM (bound to vfio-pci, left in the host) whose pod died without a DEL gets its
// GUID and link state back through the PF, and stays bound to vfio-pci: nothing is rebound.
TEST_F(ReconcileTest, AVmsVfWhosePodDiedGetsItsGuidAndLinkStateBackAndStaysBoundToVfio) {
  const IbVf made = addIbPfWithVf(kPf, kVfNumber, kVf, kOldGuid);
  bindVfToVfio(made, kVf);
  json c = config("1.1.0");
  c.erase("device");
  c.erase("mtu");
  c.erase("ipam");
  c["deviceID"] = kVf;
  c["linkState"] = "enable";
  c["runtimeConfig"]["infinibandGUID"] = kNewGuid;
  add(c);
  auto vf = [&] { return nl_.vf(host_, made.pfIndex, kVfNumber).value_or(nl::VfInfo{}); };
  ASSERT_EQ(vf().portGuid, guid(kNewGuid));
  EXPECT_EQ(actions(pass()), "c1:alive") << "the VM's pod is alive";
  ASSERT_EQ(vf().portGuid, guid(kNewGuid));

  netns_.removeNetns(kPodPath);
  auto r = pass();
  EXPECT_EQ(actions(r), "c1:undone");
  EXPECT_FALSE(r.failed());
  EXPECT_EQ(vf().nodeGuid, guid(kOldGuid));
  EXPECT_EQ(vf().portGuid, guid(kOldGuid));
  EXPECT_EQ(vf().linkState, nl::VfLinkState::kAuto);
  EXPECT_EQ(sysfs_.driverWrites("vfio-pci", "unbind"), "");
  EXPECT_EQ(*sysfs::SysfsDevices(sysfs_.root()).driverOf(*net::PciAddress::parse(kVf)), "vfio-pci");
  EXPECT_TRUE(records().empty());
}

TEST_F(ReconcileTest, AVirtualDeviceDestroyedWithItsNamespaceLeavesNoRecord) {
  add(config());
  nl_.removeLink(pod_, nl_.findLink(pod_, "net1")->index);
  netns_.removeNetns(kPodPath);
  EXPECT_EQ(actions(pass()), "c1:undone");
  EXPECT_TRUE(records().empty());
  EXPECT_TRUE(ipam_.allocations.empty());
}

TEST_F(ReconcileTest, ALiveAttachmentIsNeverTouched) {
  add(config());
  const auto pod = snapshot(pod_);
  const auto calls = ipam_.calls.size();
  EXPECT_EQ(actions(pass()), "c1:alive");
  EXPECT_EQ(snapshot(pod_), pod);
  EXPECT_EQ(records().size(), 1u);
  EXPECT_EQ(ipam_.calls.size(), calls) << "no IPAM call for a live pod";
}

TEST_F(ReconcileTest, ANetnsThatCannotBeCheckedIsLeftAlone) {
  add(config());
  const auto pod = snapshot(pod_);
  // Its directory is not visible from where reconcile runs (another mount namespace).
  netns_.removeNetns(kPodPath);
  netns_.hideDirectory("/var/run/netns");
  EXPECT_EQ(actions(pass()), "c1:unknown");
  EXPECT_EQ(snapshot(pod_), pod);
  EXPECT_EQ(records().size(), 1u);
  EXPECT_EQ(ipam_.allocations.size(), 1u);
}

TEST_F(ReconcileTest, APermissionErrorOnTheNetnsIsLeftAlone) {
  add(config());
  const auto pod = snapshot(pod_);
  netns_.failOpen(kPodPath, EACCES);
  auto r = pass();
  EXPECT_EQ(actions(r), "c1:unknown");
  EXPECT_FALSE(r.failed());
  EXPECT_EQ(snapshot(pod_), pod);
  EXPECT_EQ(records().size(), 1u);
}

TEST_F(ReconcileTest, APathNowNamingAnotherNamespaceIsGoneAndThatNamespaceIsNotTouched) {
  add(config());
  nl_.removeLink(pod_, nl_.findLink(pod_, "net1")->index);
  netns_.removeNetns(kPodPath);
  // A later pod's namespace at the same path (another inode), with a net1 of its own.
  os::Netns later = netns_.addNetns(kPodPath);
  nl::Link other;
  other.name = "net1";
  other.alias = "ibcni:vf0";  // even one that looks like ours
  nl_.addLink(later, other);
  const auto laterBefore = snapshot(later);
  EXPECT_EQ(actions(pass()), "c1:undone");
  EXPECT_EQ(snapshot(later), laterBefore) << "the later pod's namespace was left alone";
  EXPECT_TRUE(records().empty());
}

TEST_F(ReconcileTest, DryRunChangesNothing) {
  add(config());
  podDiesReturningTheDevice();
  const auto host = snapshot(host_);
  const auto calls = ipam_.calls.size();
  EXPECT_EQ(actions(pass(/*dryRun=*/true)), "c1:would-undo");
  EXPECT_EQ(snapshot(host_), host);
  EXPECT_EQ(records().size(), 1u);
  EXPECT_EQ(ipam_.calls.size(), calls);
}

TEST_F(ReconcileTest, AnAttachmentWhoseDeviceLockIsHeldIsLeftForTheNextPass) {
  add(config());
  podDiesReturningTheDevice();
  // An ADD in progress: its record is written ahead (no createdAt yet) and it holds the lock.
  state::FileAttachmentStore store(stateDir_);
  auto rec = **store.load("ibnet", "c1", "net1");
  rec.createdAt.clear();
  ASSERT_TRUE(store.save(rec));
  {
    auto held = os::FileLock::acquire(stateDir_ + "/locks/" + rec.deviceKey + ".lock", std::chrono::seconds(1));
    ASSERT_TRUE(held);
    auto r = pass();
    ASSERT_EQ(actions(r), "c1:busy");
    EXPECT_NE(r.attachments[0].detail.find("ADD of this attachment is in progress"), std::string::npos)
        << r.attachments[0].detail;
    EXPECT_EQ(records().size(), 1u);
  }
  // Released without finishing (the ADD died): the next pass undoes it.
  EXPECT_EQ(actions(pass()), "c1:undone");
  EXPECT_TRUE(records().empty());
}

TEST_F(ReconcileTest, APhysicalDeviceNotYetBackKeepsItsRecordUntilItReturns) {
  nl::Link vf;
  vf.name = "ib2";
  vf.mtu = 1500;
  const int idx = nl_.addLink(host_, vf);
  sysfs_.addPciNetdev("0000:af:06.1", "ib2", idx);
  auto conf = config();
  conf.erase("device");
  conf["deviceID"] = "0000:af:06.1";
  const auto host = snapshot(host_);
  add(conf);
  // The path is gone but a process keeps the namespace (and the device in it) alive.
  netns_.removeNetns(kPodPath);
  auto r = pass();
  ASSERT_EQ(actions(r), "c1:device-missing");
  EXPECT_NE(r.attachments[0].detail.find("0000:af:06.1"), std::string::npos) << r.attachments[0].detail;
  EXPECT_EQ(records().size(), 1u) << "kept: the kernel returns the device when the namespace ends";
  EXPECT_TRUE(ipam_.allocations.empty()) << "the address is released at once";
  // The namespace ends: the kernel returns the device under its pod name; the next pass renames it.
  ASSERT_TRUE(nl_.moveLink(pod_, nl_.findLink(pod_, "net1")->index, host_));
  EXPECT_EQ(actions(pass()), "c1:undone");
  EXPECT_EQ(snapshot(host_), host);
  EXPECT_TRUE(records().empty());
}

TEST_F(ReconcileTest, ADeviceTakenSinceByALivePodIsLeftToItAndRestoredAfterIt) {
  const std::string pci = "0000:af:06.1";
  nl::Link vf;
  vf.name = "ib2";
  vf.mtu = 1500;
  const int idx = nl_.addLink(host_, vf);
  sysfs_.addPciNetdev(pci, "ib2", idx);
  auto conf = config();
  conf.erase("device");
  conf["deviceID"] = pci;
  const auto host = snapshot(host_);
  add(conf);
  // c1's pod dies: the kernel returns the VF under its pod name, and c2's ADD takes it from there.
  podDiesReturningTheDevice();
  sysfs_.removeNetdev("ib2").addPciNetdev(pci, "net1", idx);
  os::Netns pod2 = netns_.addNetns("/var/run/netns/pod2");
  const std::map<std::string, std::string> c2 = {{"CNI_CONTAINERID", "c2"}, {"CNI_NETNS", "/var/run/netns/pod2"}};
  add(conf, c2);
  const auto inPod2 = snapshot(pod2);
  auto r = pass();
  std::map<std::string, std::string> seen;
  for (const auto& a : r.attachments) {
    seen[a.containerId] = a.action;
  }
  EXPECT_EQ(seen["c1"], "superseded");
  EXPECT_EQ(seen["c2"], "alive");
  EXPECT_EQ(snapshot(pod2), inPod2) << "the live pod's device was not touched";
  EXPECT_EQ(records().size(), 2u);
  // c2 ends: its DEL returns the VF under the name it found; the next pass restores what c1 found.
  ASSERT_EQ(run("DEL", conf, c2).exitCode, 0);
  EXPECT_EQ(actions(pass()), "c1:undone");
  EXPECT_EQ(snapshot(host_), host);
  EXPECT_TRUE(records().empty());
}

TEST_F(ReconcileTest, AnIpamFailureKeepsTheRecordAndIsReported) {
  add(config());
  podDiesReturningTheDevice();
  ipam_.failures["DEL"] = cni::Error{cni::Errc::kTryAgainLater, "ipam down", ""};
  auto r = pass();
  EXPECT_EQ(actions(r), "c1:failed");
  EXPECT_TRUE(r.failed());
  EXPECT_EQ(records().size(), 1u) << "kept for the next pass";
  ipam_.failures.clear();
  EXPECT_EQ(actions(pass()), "c1:undone");
  EXPECT_TRUE(ipam_.allocations.empty());
}

TEST_F(ReconcileTest, EachPoolThatKeepsItsConfigurationIsReclaimed) {
  const std::string data = stateDir_ + "/ipam";
  std::filesystem::create_directories(data + "/poolnet");
  std::filesystem::create_directories(data + "/no-config");
  std::ofstream(data + "/poolnet/network.json")
      << R"({"cniVersion":"1.0.0","name":"poolnet","ipam":{"type":"ibcni-ipam","ranges":[[{"subnet":"10.7.0.0/24"}]],"dataDir":"/elsewhere"}})";
  ipam_.reclaimed = {{"dead", "net1", "", "/var/run/netns/dead", {"10.7.0.2"}}};
  auto r = pass(false, {data});
  ASSERT_EQ(r.allocations.size(), 1u);
  EXPECT_EQ(r.allocations[0].action, "released");
  EXPECT_EQ(r.allocations[0].network, "poolnet");
  EXPECT_EQ(r.allocations[0].addresses, std::vector<std::string>{"10.7.0.2"});
  EXPECT_EQ(ipam_.calls.back(), "RECLAIM poolnet " + data) << "the pool found here, not the file's dataDir";
  EXPECT_FALSE(r.failed());
  auto dry = pass(true, {data});
  EXPECT_EQ(ipam_.calls.back(), "RECLAIM poolnet " + data + " dry");
  EXPECT_EQ(dry.allocations.at(0).action, "would-release");
}

TEST_F(ReconcileTest, WithoutAnEmbeddedIpamNoPoolIsTouchedAndTheReportSaysWhy) {
  const std::string data = stateDir_ + "/ipam";
  std::filesystem::create_directories(data + "/poolnet");
  std::ofstream(data + "/poolnet/network.json")
      << R"({"cniVersion":"1.0.0","name":"poolnet","ipam":{"type":"ibcni-ipam","ranges":[[{"subnet":"10.7.0.0/24"}]]}})";
  deps_.ipamUpkeep = nullptr;
  const auto calls = ipam_.calls.size();
  auto r = pass(false, {data});
  EXPECT_EQ(ipam_.calls.size(), calls) << "no IPAM call";
  EXPECT_TRUE(r.failed());
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("no embedded IPAM"), std::string::npos) << r.errors[0];
}

TEST_F(ReconcileTest, AMissingStateOrDataDirectoryIsNothingToDo) {
  plugin::ReconcileOptions o;
  o.stateDirs = {stateDir_ + "/none"};
  o.ipamDataDirs = {stateDir_ + "/none-either"};
  auto r = plugin::reconcile(o, deps_);
  EXPECT_FALSE(r.failed());
  EXPECT_TRUE(r.attachments.empty());
}

// --- ADD's answer when the device is missing from the host ----------------------------------

TEST_F(ReconcileTest, ADeviceLastHeldByADeadPodIs100SayingWhereItWasLastSeen) {
  add(config());
  nl_.removeLink(pod_, nl_.findLink(pod_, "net1")->index);  // a veth dies with its namespace
  netns_.removeNetns(kPodPath);
  netns_.addNetns("/var/run/netns/pod2");
  auto e = errorOf(run("ADD", config(), {{"CNI_CONTAINERID", "c2"}, {"CNI_NETNS", "/var/run/netns/pod2"}}));
  EXPECT_EQ(e["code"], 100) << e;
  const auto msg = e["msg"].get<std::string>();
  EXPECT_NE(msg.find("device = \"vf0\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("last seen attached to container c1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ibcni reconcile"), std::string::npos) << msg;
}

TEST_F(ReconcileTest, With101OnlyALiveHolderIsNamedNeverAStaleRecord) {
  // Stale records of dead pods naming vf0, around the live one in directory order.
  state::FileAttachmentStore store(stateDir_);
  add(config());
  auto live = **store.load("ibnet", "c1", "net1");
  for (const std::string id : {"a-dead", "b-dead", "z-dead"}) {
    auto stale = live;
    stale.containerId = id;
    stale.netns = "/var/run/netns/" + id;
    ASSERT_TRUE(store.save(stale));
  }
  netns_.addNetns("/var/run/netns/pod2");
  auto e = errorOf(run("ADD", config(), {{"CNI_CONTAINERID", "c2"}, {"CNI_NETNS", "/var/run/netns/pod2"}}));
  EXPECT_EQ(e["code"], 101) << e;
  const auto msg = e["msg"].get<std::string>();
  EXPECT_NE(msg.find("attached to container c1 "), std::string::npos) << msg;
  EXPECT_EQ(msg.find("-dead"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ibcni::testing
