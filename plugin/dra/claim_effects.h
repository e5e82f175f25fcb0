// SPDX-License-Identifier: Apache-2.0
// Every change Prepare and Unprepare make to the node, one call each, behind one interface: the
// claims' checkpoint (its lock, its records), their CDI specs and device metadata, the VFs' settings kept by their
// PF (GUIDs, link state), the driver rebind that applies a new GUID, and the GUID pools. The
// production implementation (NodeClaimEffects) writes files and talks netlink; the fault tier's
// build of ibcni-dra wraps it to fail or kill at each step in turn (tests/support/fault/), so that
// "nothing outlives its claim" is checked after every one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/cni/error.h"
#include "ibcni/ipam/guid_pool.h"
#include "ibcni/net/ip.h"
#include "ibcni/netlink/netlink.h"
#include "ibcni/os/file_lock.h"
#include "ibcni/os/netns.h"
#include "ibcni/os/sys_error.h"
#include "ibcni/sysfs/devices.h"
#include "plugin/dra/cdi_spec.h"
#include "plugin/dra/claim_checkpoint.h"
#include "plugin/dra/device_metadata.h"

namespace ibcni::dra {

/// A VF as its PF's netlink addresses it.
struct VfRef {
  std::string pfName;  ///< the PF's netdev (host namespace)
  std::uint32_t vf = 0;
};

class ClaimEffects {
 public:
  virtual ~ClaimEffects() = default;
  /// The checkpoint's lock, held across a whole Prepare or Unprepare.
  [[nodiscard]] virtual os::SysResult<os::FileLock> lock() = 0;
  [[nodiscard]] virtual os::SysResult<ClaimRecords> load() = 0;
  /// Replaces the checkpoint's records (a step).
  [[nodiscard]] virtual os::SysResult<void> store(const ClaimRecords& records) = 0;
  /// Writes claim `claimUid`'s CDI spec (a step).
  [[nodiscard]] virtual os::SysResult<void> writeSpec(const std::string& claimUid,
                                                      const std::vector<CdiDevice>& devices) = 0;
  /// Removes claim `claimUid`'s CDI spec; none is success (a step).
  [[nodiscard]] virtual os::SysResult<void> removeSpec(const std::string& claimUid) = 0;
  /// Writes the claim's device metadata files and their CDI specs (a step).
  [[nodiscard]] virtual os::SysResult<void> writeMetadata(const ClaimRef& claim,
                                                          const std::optional<std::string>& podClaimName,
                                                          const std::vector<RequestMetadata>& requests) = 0;
  /// Removes the claim's device metadata; none is success (a step).
  [[nodiscard]] virtual os::SysResult<void> removeMetadata(const ClaimRef& claim) = 0;

  /// The VF's GUIDs and link state as its PF reports them (reads only).
  [[nodiscard]] virtual os::SysResult<nl::VfInfo> vfInfo(const VfRef& vf) = 0;
  /// Sets the VF's node and port GUID (a step; mlx5 applies them at the next rebind).
  [[nodiscard]] virtual os::SysResult<void> setVfGuids(const VfRef& vf, const net::Guid& node,
                                                       const net::Guid& port) = 0;
  /// Unbinds and binds the VF's driver (a step).
  [[nodiscard]] virtual os::SysResult<void> rebind(const net::PciAddress& pci) = 0;
  /// Sets the VF's link state (a step).
  [[nodiscard]] virtual os::SysResult<void> setVfLinkState(const VfRef& vf, nl::VfLinkState state) = 0;
  /// A GUID from a pool (a step), as ipam::GuidPools::allocate.
  [[nodiscard]] virtual cni::Result<ipam::GuidLease> allocateGuid(const ipam::GuidRequest& request) = 0;
  /// Gives a pool GUID back (a step), as ipam::GuidPools::release.
  [[nodiscard]] virtual cni::Result<bool> releaseGuid(const std::string& storeDir, const cni::AttachmentKey& key,
                                                      const std::string& network) = 0;
  /// The store of `pool` on this node, where allocateGuid keeps its GUIDs (reads nothing).
  [[nodiscard]] virtual std::string guidStoreOf(const config::GuidPoolConf& pool) const = 0;
};

/// What NodeClaimEffects changes VFs through.
struct VfAccess {
  nl::Netlink& netlink;
  const os::Netns& host;   ///< the namespace of the PFs' netdevs
  sysfs::Devices& devices; ///< the rebind
  ipam::GuidPools& guids;
};

/// The checkpoint file, the CDI spec folder and the VFs' PFs.
class NodeClaimEffects final : public ClaimEffects {
 public:
  /// `files`: the CDI spec folder, and the plugin folder the device metadata goes in.
  NodeClaimEffects(ClaimCheckpoint checkpoint, MetadataPlace files, VfAccess vfs);

  [[nodiscard]] os::SysResult<os::FileLock> lock() override { return checkpoint_.lock(); }
  [[nodiscard]] os::SysResult<ClaimRecords> load() override { return checkpoint_.load(); }
  [[nodiscard]] os::SysResult<void> store(const ClaimRecords& records) override { return checkpoint_.store(records); }
  [[nodiscard]] os::SysResult<void> writeSpec(const std::string& claimUid,
                                              const std::vector<CdiDevice>& devices) override {
    return writeCdiSpec(files_.cdiDir, claimUid, devices);
  }
  [[nodiscard]] os::SysResult<void> removeSpec(const std::string& claimUid) override {
    return removeCdiSpec(files_.cdiDir, claimUid);
  }
  [[nodiscard]] os::SysResult<void> writeMetadata(const ClaimRef& claim, const std::optional<std::string>& podClaimName,
                                                  const std::vector<RequestMetadata>& requests) override {
    return writeDeviceMetadata(files_, claim, podClaimName, requests);
  }
  [[nodiscard]] os::SysResult<void> removeMetadata(const ClaimRef& claim) override {
    return removeDeviceMetadata(files_, claim);
  }
  [[nodiscard]] os::SysResult<nl::VfInfo> vfInfo(const VfRef& vf) override;
  [[nodiscard]] os::SysResult<void> setVfGuids(const VfRef& vf, const net::Guid& node, const net::Guid& port) override;
  [[nodiscard]] os::SysResult<void> rebind(const net::PciAddress& pci) override { return vfs_.devices.rebind(pci); }
  [[nodiscard]] os::SysResult<void> setVfLinkState(const VfRef& vf, nl::VfLinkState state) override;
  [[nodiscard]] cni::Result<ipam::GuidLease> allocateGuid(const ipam::GuidRequest& request) override {
    return vfs_.guids.allocate(request);
  }
  [[nodiscard]] cni::Result<bool> releaseGuid(const std::string& storeDir, const cni::AttachmentKey& key,
                                              const std::string& network) override {
    return vfs_.guids.release(storeDir, key, network);
  }
  [[nodiscard]] std::string guidStoreOf(const config::GuidPoolConf& pool) const override {
    return vfs_.guids.storeDirOf(pool);
  }

 private:
  /// The PF's link index in the host namespace.
  [[nodiscard]] os::SysResult<int> pfIndex(const VfRef& vf);

  ClaimCheckpoint checkpoint_;
  MetadataPlace files_;
  VfAccess vfs_;
};

}  // namespace ibcni::dra
