// SPDX-License-Identifier: Apache-2.0
#include "support/fault/faulty_deps.h"

#include <cerrno>

namespace ibcni::fault {

namespace {

std::string in(const os::Netns& ns) { return " ns=" + (ns.path().empty() ? std::string("?") : ns.path()); }

std::string describeRoute(const nl::Route& route) { return " route=" + nl::describe(route); }

// The error an IPAM plugin reports when its store cannot be written.
cni::Error ipamError(const os::SysError& err) {
  return cni::Error{cni::Errc::kIoFailure, "IPAM store not writable", err.describe()};
}

}  // namespace

// ---- Netlink ----

os::SysResult<nl::Link> FaultyNetlink::linkByName(const os::Netns& ns, const std::string& name) {
  return real_.linkByName(ns, name);
}

os::SysResult<nl::Link> FaultyNetlink::linkByIndex(const os::Netns& ns, int index) {
  return real_.linkByIndex(ns, index);
}

os::SysResult<void> FaultyNetlink::setLinkUp(const os::Netns& ns, int index, bool up) {
  return plan_.run("setLinkUp" + in(ns) + " index=" + std::to_string(index) + (up ? " up" : " down"), EBUSY,
                   [&] { return real_.setLinkUp(ns, index, up); });
}

os::SysResult<void> FaultyNetlink::renameLink(const os::Netns& ns, int index, const std::string& newName) {
  return plan_.run("renameLink" + in(ns) + " index=" + std::to_string(index) + " name=" + newName, EBUSY,
                   [&] { return real_.renameLink(ns, index, newName); });
}

os::SysResult<void> FaultyNetlink::setMtu(const os::Netns& ns, int index, std::uint32_t mtu) {
  return plan_.run("setMtu" + in(ns) + " index=" + std::to_string(index) + " mtu=" + std::to_string(mtu), EBUSY,
                   [&] { return real_.setMtu(ns, index, mtu); });
}

os::SysResult<void> FaultyNetlink::setAlias(const os::Netns& ns, int index, const std::string& alias) {
  return plan_.run("setAlias" + in(ns) + " index=" + std::to_string(index) + " alias=" + alias, EBUSY,
                   [&] { return real_.setAlias(ns, index, alias); });
}

os::SysResult<void> FaultyNetlink::setHwAddress(const os::Netns& ns, int index, const net::HwAddress& mac) {
  return plan_.run("setHwAddress" + in(ns) + " index=" + std::to_string(index) + " mac=" + mac.text, EBUSY,
                   [&] { return real_.setHwAddress(ns, index, mac); });
}

os::SysResult<void> FaultyNetlink::moveLink(const os::Netns& from, int index, const os::Netns& to) {
  return plan_.run("moveLink" + in(from) + " index=" + std::to_string(index) + " to=" + to.path(), EBUSY,
                   [&] { return real_.moveLink(from, index, to); });
}

os::SysResult<std::vector<nl::Address>> FaultyNetlink::listAddresses(const os::Netns& ns, int index) {
  return real_.listAddresses(ns, index);
}

os::SysResult<void> FaultyNetlink::addAddress(const os::Netns& ns, int index, const net::IpPrefix& prefix) {
  return plan_.run("addAddress" + in(ns) + " index=" + std::to_string(index) + " addr=" + prefix.toString(), EBUSY,
                   [&] { return real_.addAddress(ns, index, prefix); });
}

os::SysResult<void> FaultyNetlink::deleteAddress(const os::Netns& ns, int index, const net::IpPrefix& prefix) {
  return plan_.run("deleteAddress" + in(ns) + " index=" + std::to_string(index) + " addr=" + prefix.toString(), EBUSY,
                   [&] { return real_.deleteAddress(ns, index, prefix); });
}

os::SysResult<std::vector<nl::Route>> FaultyNetlink::listRoutes(const os::Netns& ns, int index) {
  return real_.listRoutes(ns, index);
}

os::SysResult<void> FaultyNetlink::addRoute(const os::Netns& ns, const nl::Route& route) {
  return plan_.run("addRoute" + in(ns) + describeRoute(route), EBUSY, [&] { return real_.addRoute(ns, route); });
}

os::SysResult<void> FaultyNetlink::deleteRoute(const os::Netns& ns, const nl::Route& route) {
  return plan_.run("deleteRoute" + in(ns) + describeRoute(route), EBUSY, [&] { return real_.deleteRoute(ns, route); });
}

os::SysResult<std::vector<nl::Rule>> FaultyNetlink::listRules(const os::Netns& ns) { return real_.listRules(ns); }

os::SysResult<void> FaultyNetlink::addRule(const os::Netns& ns, const nl::Rule& rule) {
  return plan_.run("addRule" + in(ns) + " " + nl::describe(rule), EBUSY, [&] { return real_.addRule(ns, rule); });
}

os::SysResult<void> FaultyNetlink::deleteRule(const os::Netns& ns, const nl::Rule& rule) {
  return plan_.run("deleteRule" + in(ns) + " " + nl::describe(rule), EBUSY, [&] { return real_.deleteRule(ns, rule); });
}

os::SysResult<void> FaultyNetlink::addIpoibChild(const os::Netns& ns, const nl::IpoibChildSpec& spec) {
  return plan_.run("addIpoibChild" + in(ns) + " parent=" + std::to_string(spec.parentIndex) +
                       " pkey=" + std::to_string(spec.pkey.wire()),
                   EBUSY, [&] { return real_.addIpoibChild(ns, spec); });
}

os::SysResult<void> FaultyNetlink::deleteLink(const os::Netns& ns, int index) {
  return plan_.run("deleteLink" + in(ns) + " index=" + std::to_string(index), EBUSY,
                   [&] { return real_.deleteLink(ns, index); });
}

os::SysResult<nl::VfInfo> FaultyNetlink::vfInfo(const os::Netns& ns, int pfIndex, std::uint32_t vf) {
  return real_.vfInfo(ns, pfIndex, vf);
}

os::SysResult<void> FaultyNetlink::setVfGuids(const os::Netns& ns, int pfIndex, std::uint32_t vf,
                                              const net::Guid& nodeGuid, const net::Guid& portGuid) {
  return plan_.run("setVfGuids" + in(ns) + " pf=" + std::to_string(pfIndex) + " vf=" + std::to_string(vf) +
                       " node=" + nodeGuid.toString() + " port=" + portGuid.toString(),
                   EBUSY, [&] { return real_.setVfGuids(ns, pfIndex, vf, nodeGuid, portGuid); });
}

os::SysResult<void> FaultyNetlink::setVfLinkState(const os::Netns& ns, int pfIndex, std::uint32_t vf,
                                                  nl::VfLinkState state) {
  return plan_.run("setVfLinkState" + in(ns) + " pf=" + std::to_string(pfIndex) + " vf=" + std::to_string(vf) +
                       " state=" + std::to_string(static_cast<std::uint32_t>(state)),
                   EBUSY, [&] { return real_.setVfLinkState(ns, pfIndex, vf, state); });
}

// ---- RDMA netlink, sysfs ----

os::SysResult<void> FaultyRdmaNetlink::moveDevice(const os::Netns& from, std::uint32_t deviceIndex,
                                                  const os::Netns& to) {
  return plan_.run("rdmaMoveDevice" + in(from) + " device=" + std::to_string(deviceIndex) + " to=" + to.path(), EBUSY,
                   [&] { return real_.moveDevice(from, deviceIndex, to); });
}

os::SysResult<void> FaultyDevices::rebind(const net::PciAddress& pci) {
  return plan_.run("rebind pci=" + pci.text, EBUSY, [&] { return inner_.rebind(pci); });
}

// ---- Attachment records ----

os::SysResult<void> FaultyAttachmentStore::save(const state::AttachmentRecord& record) {
  return plan_.run("recordSave " + record.network + "/" + record.containerId + "/" + record.ifName, ENOSPC,
                   [&] { return real_->save(record); });
}

os::SysResult<void> FaultyAttachmentStore::saveVolatile(const state::AttachmentRecord& record) {
  return plan_.run("recordSaveVolatile " + record.network + "/" + record.containerId + "/" + record.ifName, ENOSPC,
                   [&] { return real_->saveVolatile(record); });
}

os::SysResult<void> FaultyAttachmentStore::remove(const std::string& network, const std::string& containerId,
                                                  const std::string& ifName) {
  return plan_.run("recordRemove " + network + "/" + containerId + "/" + ifName, EIO,
                   [&] { return real_->remove(network, containerId, ifName); });
}

// ---- IPAM ----

namespace {

template <class T, class F>
cni::Result<T> countIpam(FaultPlan& plan, const std::string& what, F&& real) {
  if (auto injected = plan.next(what, EROFS)) {
    return std::unexpected(ipamError(*injected));
  }
  auto r = std::forward<F>(real)();
  plan.trace(r ? std::string("ok") : "error code " + std::to_string(static_cast<unsigned>(r.error().code)));
  return r;
}

std::string ipamWhat(const char* verb, const ipam::Request& request) {
  return std::string(verb) + " type=" + std::string(request.ipamType) + " container=" + request.args.containerId +
         " ifname=" + request.args.ifName;
}

}  // namespace

cni::Result<cni::AddResult> FaultyIpam::add(const ipam::Request& request) {
  return countIpam<cni::AddResult>(plan_, ipamWhat("ipamAdd", request), [&] { return real_.add(request); });
}

cni::Result<void> FaultyIpam::del(const ipam::Request& request) {
  return countIpam<void>(plan_, ipamWhat("ipamDel", request), [&] { return real_.del(request); });
}

cni::Result<void> FaultyIpam::gc(const ipam::Request& request) {
  return countIpam<void>(plan_, ipamWhat("ipamGc", request), [&] { return real_.gc(request); });
}

// ---- GUID pools ----

cni::Result<ipam::GuidLease> FaultyGuidPools::allocate(const ipam::GuidRequest& request) {
  return countIpam<ipam::GuidLease>(
      plan_, "guidAllocate pool=" + request.pool.pool + " container=" + request.args.containerId + " ifname=" +
                 request.args.ifName,
      [&] { return real_->allocate(request); });
}

cni::Result<bool> FaultyGuidPools::release(const std::string& storeDir, const cni::AttachmentKey& key,
                                           const std::string& network) {
  return countIpam<bool>(plan_, "guidRelease dir=" + storeDir + " " + key.toString(),
                         [&] { return real_->release(storeDir, key, network); });
}

cni::Result<std::vector<ipam::ReleasedAllocation>> FaultyGuidPools::gc(const config::GuidPoolConf& pool,
                                                                       const std::string& network,
                                                                       const std::vector<cni::AttachmentKey>& keep) {
  return countIpam<std::vector<ipam::ReleasedAllocation>>(plan_, "guidGc pool=" + pool.pool + " network=" + network,
                                                          [&] { return real_->gc(pool, network, keep); });
}

cni::Result<ipam::ReclaimOutcome> FaultyGuidPools::maintain(
    const std::string& storeDir, bool dryRun,
    const std::function<bool(const std::string&, const cni::AttachmentKey&)>& recorded) {
  return countIpam<ipam::ReclaimOutcome>(plan_, "guidMaintain dir=" + storeDir,
                                         [&] { return real_->maintain(storeDir, dryRun, recorded); });
}

// ---- sysctls ----

os::SysResult<void> FaultyNetSysctls::set(const os::Netns& ns, std::string_view family, const std::string& ifName,
                                          const std::string& key, const std::string& value) {
  return plan_.run("setSysctl" + in(ns) + " " + std::string(family) + "/" + ifName + "/" + key + "=" + value, EPERM,
                   [&] { return real_.set(ns, family, ifName, key, value); });
}

// ---- Deps ----

FaultyDeps::FaultyDeps(plugin::Deps& real, FaultPlan& plan)
    : netlink_(real.netlink, plan),
      rdma_(real.rdma, plan),
      devices_(real.devices, plan),
      ipam_(real.ipam, plan),
      guids_(real.guids, plan),
      deps_{netlink_,
            real.netns,
            devices_,
            rdma_,
            ipam_,
            [makeStore = real.makeStore, &plan](const std::string& dir) -> std::unique_ptr<state::AttachmentStore> {
              return std::make_unique<FaultyAttachmentStore>(makeStore(dir), plan);
            },
            real.lockTimeout,
            real.now,
            real.bootId,
            real.settleTimeout,
            real.verbs,
            real.deviceInfo,
            real.ipamUpkeep,
            real.guids != nullptr ? &guids_ : nullptr} {
  if (real.sysctls != nullptr) {
    sysctls_.emplace(*real.sysctls, plan);
    deps_.sysctls = &*sysctls_;
  }
}

}  // namespace ibcni::fault
