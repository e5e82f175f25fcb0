// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>

#include "plugin/modes/attachment_mode.h"

namespace ibcni::plugin {

/// sriov mode: moves an existing netdev (an SR-IOV VF chosen by deviceID, or any host netdev named
/// by `device`) into the pod and back, the way host-device does it, with every step undone on
/// failure and the host state restored on DEL.
class SriovNetdevMode final : public AttachmentMode {
 public:
  /// The link alias ibcni sets while a device is in a pod: this prefix and the host name. It lets
  /// DEL find and restore a device even without a record.
  static constexpr std::string_view kAliasPrefix = "ibcni:";

  cni::Result<HostDevice> resolve(const ModeContext& ctx) override;
  cni::Result<nl::Link> setUp(const ModeContext& ctx, const HostDevice& device, const os::Netns& pod,
                              os::Rollback& rollback, state::AttachmentRecord& record) override;
  cni::Result<void> tearDown(const ModeContext& ctx, const state::AttachmentRecord& record,
                             const os::Netns* pod) override;
  bool awaitsReturn(const ModeContext& ctx, const state::AttachmentRecord& record) override;
  cni::Result<void> check(const ModeContext& ctx, const state::AttachmentRecord& record, const os::Netns& pod,
                          const nl::Link& podLink) override;
  std::optional<state::AttachmentRecord> recover(const ModeContext& ctx, const nl::Link& podLink) override;
  /// "pci-<deviceID>", or "netdev-<device>".
  std::string deviceKeyFromConfig(const ModeContext& ctx) override;
};

}  // namespace ibcni::plugin
