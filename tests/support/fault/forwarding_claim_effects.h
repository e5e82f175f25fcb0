// SPDX-License-Identifier: Apache-2.0
// A dra::ClaimEffects that passes every call to another: the base of the tests' decorators of
// ibcni-dra's changes (FaultyClaimEffects, the claim checker's planted bugs), each of which
// overrides only the calls it changes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plugin/dra/claim_effects.h"

namespace ibcni::fault {

class ForwardingClaimEffects : public dra::ClaimEffects {
 public:
  explicit ForwardingClaimEffects(dra::ClaimEffects& real) : real_(real) {}

  [[nodiscard]] os::SysResult<os::FileLock> lock() override { return real_.lock(); }
  [[nodiscard]] os::SysResult<dra::ClaimRecords> load() override { return real_.load(); }
  [[nodiscard]] os::SysResult<void> store(const dra::ClaimRecords& records) override { return real_.store(records); }
  [[nodiscard]] os::SysResult<void> writeSpec(const std::string& claimUid,
                                              const std::vector<dra::CdiDevice>& devices) override {
    return real_.writeSpec(claimUid, devices);
  }
  [[nodiscard]] os::SysResult<void> removeSpec(const std::string& claimUid) override {
    return real_.removeSpec(claimUid);
  }
  [[nodiscard]] os::SysResult<void> writeMetadata(const dra::ClaimRef& claim, const std::optional<std::string>& pod,
                                                  const std::vector<dra::RequestMetadata>& requests) override {
    return real_.writeMetadata(claim, pod, requests);
  }
  [[nodiscard]] os::SysResult<void> removeMetadata(const dra::ClaimRef& claim) override {
    return real_.removeMetadata(claim);
  }
  [[nodiscard]] os::SysResult<nl::VfInfo> vfInfo(const dra::VfRef& vf) override { return real_.vfInfo(vf); }
  [[nodiscard]] os::SysResult<void> setVfGuids(const dra::VfRef& vf, const net::Guid& node,
                                               const net::Guid& port) override {
    return real_.setVfGuids(vf, node, port);
  }
  [[nodiscard]] os::SysResult<void> rebind(const net::PciAddress& pci) override { return real_.rebind(pci); }
  [[nodiscard]] os::SysResult<void> setVfLinkState(const dra::VfRef& vf, nl::VfLinkState state) override {
    return real_.setVfLinkState(vf, state);
  }
  [[nodiscard]] cni::Result<ipam::GuidLease> allocateGuid(const ipam::GuidRequest& request) override {
    return real_.allocateGuid(request);
  }
  [[nodiscard]] cni::Result<bool> releaseGuid(const std::string& storeDir, const cni::AttachmentKey& key,
                                              const std::string& network) override {
    return real_.releaseGuid(storeDir, key, network);
  }
  [[nodiscard]] std::string guidStoreOf(const config::GuidPoolConf& pool) const override {
    return real_.guidStoreOf(pool);
  }

 protected:
  [[nodiscard]] dra::ClaimEffects& real() { return real_; }

 private:
  dra::ClaimEffects& real_;
};

}  // namespace ibcni::fault
