// SPDX-License-Identifier: Apache-2.0
// One simulated sriov node in process: fakes for netlink, namespaces, RDMA netlink and IPAM, a fake
// sysfs tree with one mlx5 PF and `vfs` VFs whose GUIDs are all zero (as an unconfigured mlx5 VF
// shows them), its own stateDir, dataDir and node name, and the embedded GUID pools over the
// backends given. run() drives plugin::dispatch as a runtime calls ibcni, for the pod of one VF.
//
// Header-only (the fakes are). The fakes are not thread-safe: one node is used by one thread at a
// time. plugin::dispatch sets the process's logger for each invocation (ibcni is one process per
// call), so two dispatch() calls of one process must not overlap either: lock dispatchLock().
//
//   VfNodeSim node(root + "/node-07", "node-07", 20, backends);
//   auto out = node.run("ADD", node.config(3, guidPool), 3);   // the pod of VF 3
//   node.vfGuids(3);                                            // {node GUID, port GUID}
#pragma once

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fakes/fake_ipam.h"
#include "fakes/fake_netlink.h"
#include "fakes/fake_netns.h"
#include "fakes/fake_rdma_netlink.h"
#include "fakes/fake_sysfs_tree.h"
#include "ipam/embedded_ipam_guids.h"
#include "plugin/deps.h"
#include "plugin/dispatch.h"
#include "plugin/state/file_attachment_store.h"
#include "plugin/sysfs/sysfs_devices.h"
#include "support/plugin_deps.h"

namespace ibcni::testing {

/// The lock every in-process dispatch() of a multi-threaded test holds (see the file comment).
inline std::mutex& dispatchLock() {
  static std::mutex m;
  return m;
}

class VfNodeSim {
 public:
  static constexpr const char* kPf = "0000:3b:00.0";
  static constexpr const char* kNetwork = "ibsim";

  /// Node `name` under `dir` (<dir>/state, <dir>/data), its PF with `vfs` VFs of GUID zero.
  VfNodeSim(const std::string& dir, std::string name, int vfs, ipam::BackendFactory backends)
      : name_(std::move(name)), stateDir_(dir + "/state"), dataDir_(dir + "/data"), guids_(options(backends)) {
    std::filesystem::create_directories(stateDir_);
    pfIndex_ = nl_.addLink(host_, fakeIbLink("ibp59s0", "02:00:00:00:00:00:00:01"));
    sysfs_.addPf(kPf, "ibp59s0", "mlx5_0", vfs, pfIndex_);
    rdma_.addDevice(host_, "mlx5_0", 0, "");
    std::vector<nl::VfInfo> table;
    for (int i = 0; i < vfs; ++i) {
      nl::Link vf = fakeIbLink(netdevOf(i), "02:00:00:00:00:00:aa:01");
      vf.mtu = 2044;
      const int index = nl_.addLink(host_, vf);
      nl_.setMtuRange(host_, index, 68, 4092);
      const std::string rdma = "mlx5_" + std::to_string(i + 1);
      sysfs_.addVf(kPf, i, vfPci(i), netdevOf(i), rdma, index);
      rdma_.addDevice(host_, rdma, 0, "");
      netns_.addNetns(netnsOf(i));
      nl::VfInfo v;
      v.vf = static_cast<std::uint32_t>(i);
      v.linkState = nl::VfLinkState::kAuto;
      v.nodeGuid = v.portGuid = net::Guid{0};
      table.push_back(v);
    }
    nl_.setVfs(host_, pfIndex_, table);
    deps_.guids = &guids_;
  }
  VfNodeSim(const VfNodeSim&) = delete;
  VfNodeSim& operator=(const VfNodeSim&) = delete;
  ~VfNodeSim() {
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::path(stateDir_).parent_path(), ec);
  }

  [[nodiscard]] bool ok() const { return sysfs_.ok(); }
  [[nodiscard]] std::string error() const { return sysfs_.error(); }
  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] const std::string& dataDir() const { return dataDir_; }
  [[nodiscard]] ipam::EmbeddedGuidPools& guids() { return guids_; }
  /// The store of GUID pool `pool` on this node.
  [[nodiscard]] std::string storeDir(const std::string& pool) const { return dataDir_ + "/.guid/" + pool; }

  static std::string vfPci(int vf) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0000:3b:%02x.%x", (1 + vf / 8) & 0x1f, vf % 8);
    return buf;
  }
  std::string containerId(int vf) const { return name_ + "-pod-" + std::to_string(vf); }

  /// The network configuration of the pod on VF `vf`, with `guidPool` (its dataDir this node's).
  [[nodiscard]] nlohmann::json config(int vf, nlohmann::json guidPool) const {
    guidPool["dataDir"] = dataDir_;
    return {{"cniVersion", "1.0.0"}, {"name", kNetwork},    {"type", "ibcni"},          {"mode", "sriov"},
            {"deviceID", vfPci(vf)}, {"stateDir", stateDir_}, {"ipam", {{"type", "fake"}}}, {"guidPool", guidPool}};
  }

  /// One verb for the pod on VF `vf` (containerID containerId(vf), ifname net1), under dispatchLock().
  plugin::Outcome run(const std::string& command, const nlohmann::json& conf, int vf) {
    const std::map<std::string, std::string> vars = {{"CNI_COMMAND", command},
                                                     {"CNI_CONTAINERID", containerId(vf)},
                                                     {"CNI_NETNS", netnsOf(vf)},
                                                     {"CNI_IFNAME", "net1"},
                                                     {"CNI_PATH", "/opt/cni/bin"}};
    auto getenv = [&vars](const char* n) -> std::optional<std::string> {
      auto it = vars.find(n);
      return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    const std::string text = conf.dump();
    std::lock_guard lock(dispatchLock());
    return plugin::dispatch(getenv, text, true, deps_);
  }

  /// VF `vf`'s node and port GUID in the PF's VF table (0 when not reported).
  [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> vfGuids(int vf) {
    auto v = nl_.vf(host_, pfIndex_, static_cast<std::uint32_t>(vf));
    if (!v) {
      return {0, 0};
    }
    return {v->nodeGuid ? v->nodeGuid->value : 0, v->portGuid ? v->portGuid->value : 0};
  }
  /// The attachment records in this node's stateDir.
  [[nodiscard]] std::size_t records() {
    state::FileAttachmentStore store(stateDir_);
    return store.list("").value_or(std::vector<state::AttachmentRecord>{}).size();
  }

 private:
  static std::string netdevOf(int vf) { return "ibp59s0v" + std::to_string(vf); }
  std::string netnsOf(int vf) const { return "/var/run/netns/" + containerId(vf); }
  ipam::EmbeddedIpamOptions options(ipam::BackendFactory backends) const {
    ipam::EmbeddedIpamOptions o;
    o.defaultDataDir = dataDir_;
    o.nodeNameFile = "";
    o.lockTimeout = std::chrono::seconds(10);
    o.backends = std::move(backends);
    return o;
  }

  std::string name_;
  std::string stateDir_;
  std::string dataDir_;
  ipam::EmbeddedGuidPools guids_;
  FakeNetlink nl_;
  FakeRdmaNetlink rdma_;
  FakeIpam ipam_;
  FakeNetnsProvider netns_;
  os::Netns host_ = netns_.host();
  FakeSysfsTree sysfs_;
  sysfs::SysfsDevices devices_{sysfs_.root()};
  int pfIndex_ = 0;
  // Waits as a node's ibcni would, but a rebound fake VF is back at once (the settle timeout is short).
  plugin::Deps deps_{nl_, netns_, devices_, rdma_, ipam_, fileAttachmentStores(), std::chrono::seconds(10), fixedNow,
                     [] { return std::string("boot-1"); }, std::chrono::milliseconds(200)};
};

}  // namespace ibcni::testing
