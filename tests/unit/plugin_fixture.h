// SPDX-License-Identifier: Apache-2.0
// Drives dispatch() as a runtime would (environment + stdin), over fakes for netlink, namespaces
// and IPAM, a fake sysfs tree and the real file store in a temporary directory.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "plugin/deps.h"
#include "plugin/dispatch.h"
#include "fakes/fake_ipam.h"
#include "fakes/fake_netlink.h"
#include "fakes/fake_netns.h"
#include "fakes/fake_rdma_netlink.h"
#include "fakes/fake_sysfs_tree.h"
#include "ibcni/os/file_lock.h"
#include "plugin/state/file_attachment_store.h"
#include "plugin/state/file_device_info.h"
#include "plugin/sysfs/sysfs_devices.h"
#include "support/plugin_deps.h"

namespace ibcni::testing {

using nlohmann::json;

/// The InfiniBand PF and its VF 2 that most suites add (addIbPfWithVf): the VF's PCI address and
/// its GUID before ADD, and a GUID a pod asks for.
inline constexpr const char* kPf = "0000:3b:00.0";
inline constexpr const char* kVf = "0000:3b:00.3";
inline constexpr std::uint32_t kVfNumber = 2;
inline constexpr const char* kOldGuid = "02:00:00:00:00:00:aa:01";
inline constexpr const char* kNewGuid = "c2:11:22:33:44:55:66:77";
inline net::Guid guid(const char* text) { return *net::Guid::parse(text); }

class PluginTest : public ::testing::Test {
 protected:
  static constexpr const char* kPodPath = "/var/run/netns/pod1";

  void SetUp() override {
    char tmpl[] = "/tmp/ibcni-plugin-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    stateDir_ = tmpl;
    // Device-info files are written only under <stateDir>/devinfo/ here (the node's
    // /var/run/k8s.cni.cncf.io/devinfo/ in production).
    deviceInfo_ = std::make_unique<state::FileDeviceInfoFiles>(std::vector<std::string>{devinfoRoot()});
    deps_.deviceInfo = deviceInfo_.get();
    deps_.ipamUpkeep = &ipam_;
    pod_ = netns_.addNetns(kPodPath);
    nl::Link vf;
    vf.name = "vf0";
    vf.mtu = 1500;
    vf.alias = "admin note";
    vfIndex_ = nl_.addLink(host_, vf);
    ASSERT_TRUE(nl_.setLinkUp(host_, vfIndex_, true));
    nl_.clearCalls();
  }
  void TearDown() override { std::filesystem::remove_all(stateDir_); }

  /// The base network config: the vf0 netdev, the fake IPAM, this test's stateDir.
  json config(const std::string& version = "1.0.0") const {
    return json{{"cniVersion", version}, {"name", "ibnet"}, {"type", "ibcni"},   {"mode", "sriov"},
                {"device", "vf0"},       {"mtu", 4000},    {"stateDir", stateDir_}, {"ipam", {{"type", "fake"}}}};
  }

  /// Runs one verb. `env` overrides the defaults (an empty value unsets the variable).
  plugin::Outcome run(const std::string& command, const json& conf, std::map<std::string, std::string> env = {}) {
    std::map<std::string, std::string> vars = {{"CNI_COMMAND", command},
                                               {"CNI_CONTAINERID", "c1"},
                                               {"CNI_NETNS", kPodPath},
                                               {"CNI_IFNAME", "net1"},
                                               {"CNI_PATH", "/opt/cni/bin"}};
    for (auto& [k, v] : env) {
      vars[k] = v;
    }
    auto getenv = [&vars](const char* name) -> std::optional<std::string> {
      auto it = vars.find(name);
      if (it == vars.end() || it->second.empty()) {
        return std::nullopt;
      }
      return it->second;
    };
    return plugin::dispatch(getenv, conf.dump(), true, deps_);
  }

  /// ADD, asserting success; returns the parsed result.
  json add(const json& conf, std::map<std::string, std::string> env = {}) {
    auto out = run("ADD", conf, std::move(env));
    EXPECT_EQ(out.exitCode, 0) << out.stdoutText;
    return json::parse(out.stdoutText, nullptr, false);
  }

  static json errorOf(const plugin::Outcome& out) { return json::parse(out.stdoutText, nullptr, false); }

  /// What a test compares to prove nothing changed: every link of a namespace with its name,
  /// MTU, state, alias and MAC, plus its addresses.
  std::string snapshot(const os::Netns& ns) {
    std::string s;
    for (const auto& l : nl_.links(ns)) {
      s += l.name + " mtu=" + std::to_string(l.mtu) + (l.adminUp ? " up" : " down") + " alias=" + l.alias +
           " mac=" + l.mac.text + "\n";
    }
    for (const auto& a : nl_.addresses(ns)) {
      s += "addr " + std::to_string(a.ifIndex) + " " + a.prefix.toString() + "\n";
    }
    return s;
  }

  /// What addIbPfWithVf made.
  struct IbVf {
    int pfIndex = 0;
    int vfLink = 0;            ///< the VF's netdev ibp59s0v2 in the host
    std::uint32_t vfRdma = 0;  ///< RDMA netlink index of mlx5_3
  };
  /// The mlx5 layout the InfiniBand VF tests share: PF `pfPci` (netdev ibp59s0, RDMA device mlx5_0,
  /// 4 VFs) and its VF `vfNumber` at `vfPci` (netdev ibp59s0v2, MTU 2044 of at most 4092, port GUID
  /// `guid`; RDMA device mlx5_3), in the host. The PF's VF table lists VFs 0-3 with link state auto
  /// and node and port GUID `guid`. More VFs can be added to the tree afterwards (sysfs_.addVf).
  IbVf addIbPfWithVf(const std::string& pfPci, std::uint32_t vfNumber, const std::string& vfPci,
                     const std::string& guid) {
    IbVf made;
    made.pfIndex = nl_.addLink(host_, fakeIbLink("ibp59s0", "02:00:00:00:00:00:00:01"));
    nl::Link vf = fakeIbLink("ibp59s0v2", guid);
    vf.mtu = 2044;
    made.vfLink = nl_.addLink(host_, vf);
    nl_.setMtuRange(host_, made.vfLink, 68, 4092);
    sysfs_.addPf(pfPci, "ibp59s0", "mlx5_0", 4, made.pfIndex)
        .addVf(pfPci, vfNumber, vfPci, "ibp59s0v2", "mlx5_3", made.vfLink);
    std::vector<nl::VfInfo> vfs;
    for (std::uint32_t i = 0; i < 4; ++i) {
      nl::VfInfo v;
      v.vf = i;
      v.linkState = nl::VfLinkState::kAuto;
      v.nodeGuid = net::Guid::parse(guid);
      v.portGuid = net::Guid::parse(guid);
      vfs.push_back(v);
    }
    nl_.setVfs(host_, made.pfIndex, vfs);
    rdma_.addDevice(host_, "mlx5_0", 0, "");
    made.vfRdma = rdma_.addDevice(host_, "mlx5_3", 0, "");
    return made;
  }
  /// addIbPfWithVf's VF as vfio-pci takes it for a VM: its netdev and RDMA device gone from the host.
  void bindVfToVfio(const IbVf& made, const std::string& vfPci) {
    ASSERT_TRUE(nl_.removeLink(host_, made.vfLink));
    rdma_.removeDevice("mlx5_3");
    sysfs_.removeNetdev("ibp59s0v2").removeRdmaDevice(vfPci, "mlx5_3").setDriver(vfPci, "vfio-pci");
    ASSERT_TRUE(sysfs_.ok()) << sysfs_.error();
  }

  /// An IPoIB parent `name` in the host, up (MTU 2044, pkey 0xffff, datagram), the netdev of the
  /// PCI function `pci` whose RDMA device is `rdmaDevice` (no VFs). @return its link index.
  int addIpoibParent(const std::string& name, const std::string& pci, const std::string& rdmaDevice) {
    nl::Link ib = fakeIbLink(name, "02:00:00:00:00:00:bb:01", "ipoib");
    ib.mtu = 2044;
    ib.ipoib = nl::IpoibInfo{net::Pkey::fromWire(0xffff), nl::IpoibMode::kDatagram, false};
    const int index = nl_.addLink(host_, ib);
    EXPECT_TRUE(nl_.setLinkUp(host_, index, true));
    sysfs_.addPf(pci, name, rdmaDevice, 0, index);
    EXPECT_TRUE(sysfs_.ok()) << sysfs_.error();
    return index;
  }

  /// The device-info tree of this test (Multus' /var/run/k8s.cni.cncf.io/devinfo/).
  std::string devinfoRoot() const { return stateDir_ + "/devinfo/"; }

  std::vector<state::AttachmentRecord> records() {
    state::FileAttachmentStore store(stateDir_);
    return store.list("").value_or(std::vector<state::AttachmentRecord>{});
  }

  FakeNetlink nl_;
  FakeNetnsProvider netns_;
  FakeSysfsTree sysfs_;
  sysfs::SysfsDevices devices_{sysfs_.root()};
  FakeIpam ipam_;
  FakeRdmaNetlink rdma_;
  std::string bootId_ = "boot-1";
  std::string stateDir_;
  std::unique_ptr<state::FileDeviceInfoFiles> deviceInfo_;
  os::Netns host_ = netns_.host();
  os::Netns pod_;
  int vfIndex_ = 0;
  plugin::Deps deps_{nl_,
                     netns_,
                     devices_,
                     rdma_,
                     ipam_,
                     fileAttachmentStores(),
                     std::chrono::milliseconds(100),
                     fixedNow,
                     [this] { return bootId_; },
                     std::chrono::milliseconds(200)};
};

}  // namespace ibcni::testing
