// SPDX-License-Identifier: Apache-2.0
// The InfiniBand SR-IOV part of sriov mode: what sits around the netdev move. The VF's GUIDs and
// link state are set through its PF, its RDMA device moves into the pod's netns when isolation is
// on, and DEL (or a failed ADD) puts each back.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/cni/error.h"
#include "ibcni/net/pkey.h"
#include "plugin/modes/attachment_mode.h"
#include "plugin/modes/record_ahead.h"

namespace ibcni::plugin {

/// The field a requested GUID came from: "runtimeConfig.infinibandGUID", "args.cni.guid" or "CNI_ARGS GUID".
[[nodiscard]] const char* requestedGuidField(const Invocation& inv);

/// The GUID requested for the VF: runtimeConfig.infinibandGUID, else args.cni.guid, else CNI_ARGS
/// GUID. @return error 7 for a CNI_ARGS GUID that is malformed, all zeros or all ones.
[[nodiscard]] cni::Result<std::optional<net::Guid>> requestedGuid(const Invocation& inv);

/// The port GUID inside an IPoIB hardware address (its last 8 of 20 bytes).
[[nodiscard]] std::optional<net::Guid> guidOfIpoibAddress(const net::HwAddress& mac);

/// resolveVf for a function bound to vfio-pci, given to a VM: a VF's place on its PF and its GUID
/// (requested, from guidPool, or the one it has, refused when unusable); a function that is no VF
/// (a PF passed through whole) takes no VF settings. Changes nothing.
[[nodiscard]] cni::Result<void> resolveVfioFunction(const ModeContext& ctx, const sysfs::PciFunction& fn,
                                                    HostDevice& device);

/// Fills `device.vf` and `device.rdma` for the PCI function `fn` and validates what was asked
/// against them, changing nothing: a VF of a non-InfiniBand PF, VF settings on a function that is
/// no VF, an all-zero GUID with none requested, an MTU above the device's maximum, rdmaIsolation
/// true on a node in shared mode or without an RDMA device are refused with the fix.
/// @param fn  null when the netdev has no PCI function (selected by `device`)
[[nodiscard]] cni::Result<void> resolveVf(const ModeContext& ctx, const sysfs::PciFunction* fn, HostDevice& device);

/// Waits (up to deps.settleTimeout) for PCI function `pci` to have a netdev in the host again,
/// preferring the name `preferName` (udev may rename a new netdev right after it appears).
[[nodiscard]] cni::Result<nl::Link> waitForNetdev(const ModeContext& ctx, const net::PciAddress& pci,
                                                  const std::string& preferName);

/// The VF's RDMA port `rdma` has partition `pkey` (without the membership bit) in its pkey table.
/// ADD checks it after setting the GUID (the subnet manager assigns partitions by GUID).
/// @return error 7 listing the table and saying partitions are the SM's job; 100 when unreadable.
/// @param fix  what to do, when the caller knows better than the general advice (a GUID from guidPool)
[[nodiscard]] cni::Result<void> checkVfPkey(const ModeContext& ctx, const RdmaPlace& rdma, net::Pkey pkey,
                                            const std::optional<net::PciAddress>& pci, const std::string& fix = {});

/// ADD's VF steps before the netdev moves: GUIDs (then a driver rebind), link state, pkey check,
/// RDMA device move. Each change is written to `record` with the value it replaces and saved
/// through `ahead` before it is made, and registers its undo on `rollback` after.
/// @return the VF's netdev as it is now (a rebind or an RDMA move makes it anew).
[[nodiscard]] cni::Result<nl::Link> applyVfSettings(const ModeContext& ctx, const HostDevice& device,
                                                    const os::Netns& pod, os::Rollback& rollback,
                                                    state::AttachmentRecord& record, RecordAhead& ahead);

/// The mode the record of a VF given to a VM names: DEL, GC and `ibcni reconcile` find its strategy
/// (SriovVfioMode) by it, DEL restores its GUIDs without a rebind, and an ibcni that does not know it
/// refuses the record rather than rebind a VF from under a VM.
inline constexpr std::string_view kVfioRecordMode = "sriov-vfio";

/// ADD's steps for a VF given to a VM, bound to vfio-pci: its GUIDs (without a rebind: the guest's
/// driver reads them when the VM boots) and link state through the PF, each written to `record`
/// with the value it replaces and saved through `ahead` before it is made, its undo on `rollback`.
[[nodiscard]] cni::Result<void> applyVfioVfSettings(const ModeContext& ctx, const HostDevice& device,
                                                   os::Rollback& rollback, state::AttachmentRecord& record,
                                                   RecordAhead& ahead);

/// DEL's VF steps after the netdev is back: the RDMA device back to the host, the link state and
/// GUIDs as they were (with a rebind). Skips what is already so; skips the PF settings when the
/// node rebooted since ADD (they were reset) or another attachment holds the VF now.
/// @param pod  null when the pod's netns is gone (the kernel gave the RDMA device back)
/// @return the failures; empty when everything is restored.
[[nodiscard]] std::vector<cni::Error> restoreVfSettings(const ModeContext& ctx, const state::AttachmentRecord& record,
                                                        const os::Netns* pod);

/// CHECK's VF part: the pod interface still has the GUID ADD set, and the RDMA device ADD moved is
/// still in the pod's netns.
[[nodiscard]] cni::Result<void> checkVf(const ModeContext& ctx, const state::AttachmentRecord& record,
                                        const os::Netns& pod, const nl::Link& podLink);

}  // namespace ibcni::plugin
