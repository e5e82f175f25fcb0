// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "modes/attachment_mode.h"

namespace ibcni::plugin {

/// ipoib mode: creates an IPoIB pkey child of an IPoIB parent (named by `master`, or by
/// `rdmaDevice` + `port`) under a temporary name in the host, moves it into the pod, names it
/// CNI_IFNAME there and brings it up. The child exists only while it is ibcni's: every failure
/// deletes it wherever it is, and DEL deletes it in the pod (a child dies with its namespace).
class IpoibChildMode final : public AttachmentMode {
 public:
  cni::Result<HostDevice> resolve(const ModeContext& ctx) override;
  cni::Result<nl::Link> setUp(const ModeContext& ctx, const HostDevice& device, const os::Netns& pod,
                              os::Rollback& rollback, state::AttachmentRecord& record) override;
  cni::Result<void> tearDown(const ModeContext& ctx, const state::AttachmentRecord& record,
                             const os::Netns* pod) override;
  cni::Result<void> check(const ModeContext& ctx, const state::AttachmentRecord& record, const os::Netns& pod,
                          const nl::Link& podLink) override;
  std::optional<state::AttachmentRecord> recover(const ModeContext& ctx, const nl::Link& podLink) override;
};

}  // namespace ibcni::plugin
