// SPDX-License-Identifier: Apache-2.0
// Decorators around the plugin's dependencies (plugin/deps.h) that number every mutating call and
// fail the planned one (fault_plan.h). Reads pass through unchanged and are not counted.
#pragma once

#ifndef IBCNI_FAULT_INJECTION_BUILD
#error "tests/support/fault/ is compiled into ibcni-faulty and tests only, never into the release ibcni"
#endif

#include <memory>
#include <optional>
#include <string>

#include "plugin/deps.h"
#include "fakes/forwarding_devices.h"
#include "support/fault/fault_plan.h"

namespace ibcni::fault {

/// Counted: setLinkUp, renameLink, setMtu, setAlias, setHwAddress, moveLink, addAddress,
/// deleteAddress, addRoute, deleteRoute, addRule, deleteRule, addIpoibChild, deleteLink, setVfGuids, setVfLinkState.
class FaultyNetlink final : public nl::Netlink {
 public:
  FaultyNetlink(nl::Netlink& real, FaultPlan& plan) : real_(real), plan_(plan) {}

  os::SysResult<nl::Link> linkByName(const os::Netns& ns, const std::string& name) override;
  os::SysResult<nl::Link> linkByIndex(const os::Netns& ns, int index) override;
  os::SysResult<void> setLinkUp(const os::Netns& ns, int index, bool up) override;
  os::SysResult<void> renameLink(const os::Netns& ns, int index, const std::string& newName) override;
  os::SysResult<void> setMtu(const os::Netns& ns, int index, std::uint32_t mtu) override;
  os::SysResult<void> setAlias(const os::Netns& ns, int index, const std::string& alias) override;
  os::SysResult<void> setHwAddress(const os::Netns& ns, int index, const net::HwAddress& mac) override;
  os::SysResult<void> moveLink(const os::Netns& from, int index, const os::Netns& to) override;
  os::SysResult<std::vector<nl::Address>> listAddresses(const os::Netns& ns, int index) override;
  os::SysResult<void> addAddress(const os::Netns& ns, int index, const net::IpPrefix& prefix) override;
  os::SysResult<void> deleteAddress(const os::Netns& ns, int index, const net::IpPrefix& prefix) override;
  os::SysResult<std::vector<nl::Route>> listRoutes(const os::Netns& ns, int index) override;
  os::SysResult<void> addRoute(const os::Netns& ns, const nl::Route& route) override;
  os::SysResult<void> deleteRoute(const os::Netns& ns, const nl::Route& route) override;
  os::SysResult<std::vector<nl::Rule>> listRules(const os::Netns& ns) override;
  os::SysResult<void> addRule(const os::Netns& ns, const nl::Rule& rule) override;
  os::SysResult<void> deleteRule(const os::Netns& ns, const nl::Rule& rule) override;
  os::SysResult<void> addIpoibChild(const os::Netns& ns, const nl::IpoibChildSpec& spec) override;
  os::SysResult<void> deleteLink(const os::Netns& ns, int index) override;
  os::SysResult<nl::VfInfo> vfInfo(const os::Netns& ns, int pfIndex, std::uint32_t vf) override;
  os::SysResult<void> setVfGuids(const os::Netns& ns, int pfIndex, std::uint32_t vf, const net::Guid& nodeGuid,
                                 const net::Guid& portGuid) override;
  os::SysResult<void> setVfLinkState(const os::Netns& ns, int pfIndex, std::uint32_t vf,
                                     nl::VfLinkState state) override;

 private:
  nl::Netlink& real_;
  FaultPlan& plan_;
};

/// Counted: moveDevice.
class FaultyRdmaNetlink final : public rdma::RdmaNetlink {
 public:
  FaultyRdmaNetlink(rdma::RdmaNetlink& real, FaultPlan& plan) : real_(real), plan_(plan) {}
  os::SysResult<rdma::NetnsMode> netnsMode(const os::Netns& ns) override { return real_.netnsMode(ns); }
  os::SysResult<std::vector<rdma::Port>> ports(const os::Netns& ns) override { return real_.ports(ns); }
  os::SysResult<void> moveDevice(const os::Netns& from, std::uint32_t deviceIndex, const os::Netns& to) override;

 private:
  rdma::RdmaNetlink& real_;
  FaultPlan& plan_;
};

/// Counted: rebind. The look-ups pass through (ForwardingDevices).
class FaultyDevices final : public ibcni::testing::ForwardingDevices {
 public:
  FaultyDevices(sysfs::Devices& real, FaultPlan& plan) : ForwardingDevices(real), plan_(plan) {}
  os::SysResult<void> rebind(const net::PciAddress& pci) override;

 private:
  FaultPlan& plan_;
};

/// Counted: set (EPERM, as /proc/sys refuses a write it does not take).
class FaultyNetSysctls final : public sysfs::NetSysctls {
 public:
  FaultyNetSysctls(sysfs::NetSysctls& real, FaultPlan& plan) : real_(real), plan_(plan) {}
  os::SysResult<std::string> get(const os::Netns& ns, std::string_view family, const std::string& ifName,
                                 const std::string& key) override {
    return real_.get(ns, family, ifName, key);
  }
  os::SysResult<void> set(const os::Netns& ns, std::string_view family, const std::string& ifName,
                          const std::string& key, const std::string& value) override;

 private:
  sysfs::NetSysctls& real_;
  FaultPlan& plan_;
};

/// Counted: save and saveVolatile (ENOSPC by default), remove (EIO by default).
class FaultyAttachmentStore final : public state::AttachmentStore {
 public:
  FaultyAttachmentStore(std::unique_ptr<state::AttachmentStore> real, FaultPlan& plan)
      : real_(std::move(real)), plan_(plan) {}
  os::SysResult<void> save(const state::AttachmentRecord& record) override;
  os::SysResult<void> saveVolatile(const state::AttachmentRecord& record) override;
  os::SysResult<std::optional<state::AttachmentRecord>> load(const std::string& network, const std::string& containerId,
                                                             const std::string& ifName) override {
    return real_->load(network, containerId, ifName);
  }
  os::SysResult<void> remove(const std::string& network, const std::string& containerId,
                             const std::string& ifName) override;
  os::SysResult<std::vector<state::AttachmentRecord>> list(const std::string& network) override {
    return real_->list(network);
  }

 private:
  std::unique_ptr<state::AttachmentStore> real_;
  FaultPlan& plan_;
};

/// Counted: add (allocate), del (release), gc. An injected failure is what an IPAM plugin whose
/// store is not writable reports: error 5 with the errno in details.
class FaultyIpam final : public ipam::Ipam {
 public:
  FaultyIpam(ipam::Ipam& real, FaultPlan& plan) : real_(real), plan_(plan) {}
  cni::Result<cni::AddResult> add(const ipam::Request& request) override;
  cni::Result<void> del(const ipam::Request& request) override;
  cni::Result<void> check(const ipam::Request& request) override { return real_.check(request); }
  cni::Result<void> gc(const ipam::Request& request) override;
  cni::Result<void> status(const ipam::Request& request) override { return real_.status(request); }

 private:
  ipam::Ipam& real_;
  FaultPlan& plan_;
};

/// Counted: allocate, release, gc, maintain. An injected failure is what a store that is not
/// writable reports: error 5 with the errno in details.
class FaultyGuidPools final : public ipam::GuidPools {
 public:
  FaultyGuidPools(ipam::GuidPools* real, FaultPlan& plan) : real_(real), plan_(plan) {}
  std::string storeDirOf(const config::GuidPoolConf& pool) const override { return real_->storeDirOf(pool); }
  cni::Result<ipam::GuidLease> allocate(const ipam::GuidRequest& request) override;
  cni::Result<bool> release(const std::string& storeDir, const cni::AttachmentKey& key,
                            const std::string& network) override;
  cni::Result<std::optional<net::Guid>> held(const std::string& storeDir, const cni::AttachmentKey& key) override {
    return real_->held(storeDir, key);
  }
  cni::Result<std::vector<ipam::ReleasedAllocation>> gc(const config::GuidPoolConf& pool, const std::string& network,
                                                        const std::vector<cni::AttachmentKey>& keep) override;
  cni::Result<ipam::ReclaimOutcome> maintain(
      const std::string& storeDir, bool dryRun,
      const std::function<bool(const std::string&, const cni::AttachmentKey&)>& recorded) override;

 private:
  ipam::GuidPools* real_;
  FaultPlan& plan_;
};

/// `real` with its netlink, RDMA netlink, sysfs devices, IPAM, GUID pools, attachment stores and
/// sysctls wrapped. Namespaces, clocks, the verbs probe and the timeouts are `real`'s.
class FaultyDeps {
 public:
  FaultyDeps(plugin::Deps& real, FaultPlan& plan);
  FaultyDeps(const FaultyDeps&) = delete;
  FaultyDeps& operator=(const FaultyDeps&) = delete;

  [[nodiscard]] plugin::Deps& deps() { return deps_; }

 private:
  FaultyNetlink netlink_;
  FaultyRdmaNetlink rdma_;
  FaultyDevices devices_;
  FaultyIpam ipam_;
  FaultyGuidPools guids_;
  std::optional<FaultyNetSysctls> sysctls_;
  plugin::Deps deps_;
};

}  // namespace ibcni::fault
