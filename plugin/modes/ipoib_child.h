// SPDX-License-Identifier: Apache-2.0
#pragma once

#include "plugin/modes/attachment_mode.h"

namespace ibcni::plugin {

/// ipoib mode: creates an IPoIB pkey child of an IPoIB parent (named by `master`, or by
/// `rdmaDevice` + `port`) under a temporary name in the host, moves it into the pod, names it
/// CNI_IFNAME there and brings it up. The child exists only while it is ibcni's: every failure
/// deletes it wherever it is, and DEL deletes it in the pod (a child dies with its namespace).
/// The IPoIB parent netdev of port `port` of RDMA device `rdmaDevice`, in `host`: the first netdev
/// of that port (sysfs, sorted by name) that is ARPHRD_INFINIBAND and not itself a pkey child.
/// Children are listed in sysfs under their parent's device and port, and their names may sort
/// first (ibcni's temporary "ibc…" names sort before "ibp…" ones), so they are skipped.
/// @return error 100 naming rdmaDevice and port: no such RDMA device, or no IPoIB parent netdev
///         on that port in `host`.
[[nodiscard]] cni::Result<nl::Link> ipoibPortParent(Deps& deps, const os::Netns& host, const std::string& rdmaDevice,
                                                    std::uint32_t port);

class IpoibChildMode final : public AttachmentMode {
 public:
  cni::Result<HostDevice> resolve(const ModeContext& ctx) override;
  cni::Result<nl::Link> setUp(const ModeContext& ctx, const HostDevice& device, const os::Netns& pod,
                              os::Rollback& rollback, state::AttachmentRecord& record) override;
  cni::Result<void> tearDown(const ModeContext& ctx, const state::AttachmentRecord& record,
                             const os::Netns* pod) override;
  bool awaitsReturn(const ModeContext& ctx, const state::AttachmentRecord& record) override;
  cni::Result<void> check(const ModeContext& ctx, const state::AttachmentRecord& record, const os::Netns& pod,
                          const nl::Link& podLink) override;
  std::optional<state::AttachmentRecord> recover(const ModeContext& ctx, const nl::Link& podLink) override;
  /// "ipoib-<parent netdev>", as ADD locks the parent it resolved; with rdmaDevice + port and no
  /// parent left, "ipoib-<rdmaDevice>-<port>" (nothing of this device is left to protect then).
  std::string deviceKeyFromConfig(const ModeContext& ctx) override;
};

}  // namespace ibcni::plugin
