// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>

#include "plugin/modes/attachment_mode.h"

namespace ibcni::plugin {

/// sriov mode for a VF given to a VM (KubeVirt's `sriov` interfaces): the VF stays in the host,
/// bound to vfio-pci, for the VM's launcher to pass through. ADD sets its node and port GUID and
/// its link state through the PF by VF index, without a rebind (the guest's driver reads them when
/// the VM boots), moves nothing into the pod's netns and allocates no address; the result names the
/// interface and the VF's PCI address. DEL puts the GUIDs and link state back and leaves the VF
/// bound to vfio-pci. A PF bound to vfio-pci (passed through whole) is taken as it is.
class SriovVfioMode final : public AttachmentMode {
 public:
  /// vfio-pci, or a vendor's variant driver built on it (mlx5_vfio_pci, ...).
  [[nodiscard]] static bool isVfioDriver(std::string_view driver);

  bool givesPodNetdev() const override { return false; }
  cni::Result<HostDevice> resolve(const ModeContext& ctx) override;
  /// @return an empty link: the pod gets no netdev.
  cni::Result<nl::Link> setUp(const ModeContext& ctx, const HostDevice& device, const os::Netns& pod,
                              os::Rollback& rollback, state::AttachmentRecord& record) override;
  cni::Result<void> tearDown(const ModeContext& ctx, const state::AttachmentRecord& record,
                             const os::Netns* pod) override;
  /// Never: the VF never left the host.
  bool awaitsReturn(const ModeContext& ctx, const state::AttachmentRecord& record) override;
  /// The function is still bound to vfio-pci, and the VF still has the GUID ADD set.
  cni::Result<void> check(const ModeContext& ctx, const state::AttachmentRecord& record, const os::Netns& pod,
                          const nl::Link& podLink) override;
  /// Nothing: nothing in the pod carries ibcni's mark.
  std::optional<state::AttachmentRecord> recover(const ModeContext& ctx, const nl::Link& podLink) override;
  /// "pci-<deviceID>", the key the netdev path takes for the same function.
  std::string deviceKeyFromConfig(const ModeContext& ctx) override;
};

}  // namespace ibcni::plugin
