// SPDX-License-Identifier: Apache-2.0
// ibcni-dra-faulty's decorator: every change Prepare and Unprepare make (the checkpoint's records,
// the CDI specs, the VFs' GUIDs, rebinds and link state, the pool GUIDs: dra::ClaimEffects) is one
// numbered step of a FaultPlan, failed or followed by SIGKILL as the plan says (IBCNI_FAULT_STEP,
// IBCNI_FAULT_KILL_AFTER; in process: FaultPlan::onKill). The lock and the reads pass through
// uncounted. With a FileVfTable (IBCNI_FAULT_VF_TABLE), the VFs are that file's, not the kernel's:
// this machine has no SR-IOV.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "support/fault/fault_plan.h"
#include "support/fault/forwarding_claim_effects.h"
#include "support/fault/file_vf_table.h"

namespace ibcni::fault {

class FaultyClaimEffects final : public ForwardingClaimEffects {
 public:
  FaultyClaimEffects(dra::ClaimEffects& real, FaultPlan& plan, FileVfTable* vfs = nullptr)
      : ForwardingClaimEffects(real), plan_(plan), vfs_(vfs) {}

  [[nodiscard]] os::SysResult<void> store(const dra::ClaimRecords& records) override {
    return plan_.run("storeClaims records=" + std::to_string(records.size()), ENOSPC,
                     [&] { return real().store(records); });
  }
  [[nodiscard]] os::SysResult<void> writeSpec(const std::string& claimUid,
                                              const std::vector<dra::CdiDevice>& devices) override {
    return plan_.run("writeCdiSpec claim=" + claimUid + " devices=" + std::to_string(devices.size()), ENOSPC,
                     [&] { return real().writeSpec(claimUid, devices); });
  }
  [[nodiscard]] os::SysResult<void> removeSpec(const std::string& claimUid) override {
    return plan_.run("removeCdiSpec claim=" + claimUid, EIO, [&] { return real().removeSpec(claimUid); });
  }
  [[nodiscard]] os::SysResult<void> writeMetadata(const dra::ClaimRef& claim, const std::optional<std::string>& pod,
                                                  const std::vector<dra::RequestMetadata>& requests) override {
    return plan_.run("writeDeviceMetadata claim=" + claim.uid + " requests=" + std::to_string(requests.size()), ENOSPC,
                     [&] { return real().writeMetadata(claim, pod, requests); });
  }
  [[nodiscard]] os::SysResult<void> removeMetadata(const dra::ClaimRef& claim) override {
    return plan_.run("removeDeviceMetadata claim=" + claim.uid, EIO, [&] { return real().removeMetadata(claim); });
  }
  [[nodiscard]] os::SysResult<nl::VfInfo> vfInfo(const dra::VfRef& vf) override {
    return vfs_ != nullptr ? vfs_->info(vf) : real().vfInfo(vf);
  }
  [[nodiscard]] os::SysResult<void> setVfGuids(const dra::VfRef& vf, const net::Guid& node,
                                               const net::Guid& port) override {
    return plan_.run("setVfGuids " + FileVfTable::key(vf) + " " + node.toString(), EIO, [&] {
      return vfs_ != nullptr ? vfs_->setGuids(vf, node, port) : real().setVfGuids(vf, node, port);
    });
  }
  [[nodiscard]] os::SysResult<void> rebind(const net::PciAddress& pci) override {
    return plan_.run("rebind " + pci.text, EIO,
                     [&] { return vfs_ != nullptr ? vfs_->rebind(pci) : real().rebind(pci); });
  }
  [[nodiscard]] os::SysResult<void> setVfLinkState(const dra::VfRef& vf, nl::VfLinkState state) override {
    return plan_.run("setVfLinkState " + FileVfTable::key(vf), EIO, [&] {
      return vfs_ != nullptr ? vfs_->setLinkState(vf, state) : real().setVfLinkState(vf, state);
    });
  }
  [[nodiscard]] cni::Result<ipam::GuidLease> allocateGuid(const ipam::GuidRequest& request) override {
    std::optional<cni::Result<ipam::GuidLease>> out;
    auto step = plan_.run("allocateGuid " + request.args.containerId + "/" + request.args.ifName, ENOSPC,
                          [&]() -> os::SysResult<void> {
                            out = real().allocateGuid(request);
                            return *out ? os::SysResult<void>{} : os::sysFail(EIO, out->error().msg);
                          });
    if (!out) {  // the injected failure: the pool was not asked
      return cni::fail(cni::Errc::kIoFailure, step.error().describe());
    }
    return *out;
  }
  [[nodiscard]] cni::Result<bool> releaseGuid(const std::string& storeDir, const cni::AttachmentKey& key,
                                              const std::string& network) override {
    std::optional<cni::Result<bool>> out;
    auto step = plan_.run("releaseGuid " + key.containerId + "/" + key.ifName, EIO, [&]() -> os::SysResult<void> {
      out = real().releaseGuid(storeDir, key, network);
      return *out ? os::SysResult<void>{} : os::sysFail(EIO, out->error().msg);
    });
    if (!out) {  // the injected failure: the pool was not asked
      return cni::fail(cni::Errc::kIoFailure, step.error().describe());
    }
    return *out;
  }

 private:
  FaultPlan& plan_;
  FileVfTable* vfs_;
};

}  // namespace ibcni::fault
