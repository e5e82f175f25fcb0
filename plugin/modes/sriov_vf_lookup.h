// SPDX-License-Identifier: Apache-2.0
// What the host says of an SR-IOV VF, read and never changed: its name in messages, its GUIDs now,
// its PF's netdev, its RDMA device. Shared by the VF's resolve (sriov_vf_resolve.cpp) and its steps
// of ADD, DEL and CHECK (sriov_vf.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "plugin/modes/attachment_mode.h"

namespace ibcni::plugin {

/// The GUID value a VF shows for "no GUID" (mlx5), and the one ibcni writes for an all-zero GUID.
inline constexpr std::uint64_t kAllOnesGuid = ~std::uint64_t{0};

/// A GUID no subnet manager brings a port up with: all zeros (no GUID), or all ones (mlx5's "none").
[[nodiscard]] inline bool unusableGuid(const net::Guid& g) { return g.value == 0 || g.value == kAllOnesGuid; }
/// A VF's GUID as the kernel takes it back: none or all zeros is written as all ones (the kernel
/// refuses zero; all ones is what mlx5 shows for "no GUID"), as ib-sriov-cni does.
[[nodiscard]] inline net::Guid writableGuid(const std::optional<net::Guid>& g) {
  return g && g->value != 0 ? *g : net::Guid{kAllOnesGuid};
}

/// "VF 3 of PF 0000:3b:00.0 (ibp59s0)", without the parenthesis when `pfName` is empty.
[[nodiscard]] std::string vfName(const net::PciAddress& pfPci, std::uint32_t vf, const std::string& pfName);

/// A VF's node and port GUID.
/// linkState as the PF's netlink takes it (IFLA_VF_LINK_STATE).
[[nodiscard]] nl::VfLinkState toNl(config::VfLinkState s);

struct VfGuids {
  std::optional<net::Guid> node;
  std::optional<net::Guid> port;
};

/// The VF's GUIDs now: as the PF reports them, else the port GUID from the netdev's address.
[[nodiscard]] VfGuids currentGuids(const HostDevice& d);

/// The RDMA device of `link`: RDMA netlink's own netdev mapping first (RoCE and rxe ports report
/// their netdev), then the PCI function's infiniband/ directory in sysfs (IPoIB ports of an HCA do
/// not report the IPoIB netdev).
/// @param fn  null when the netdev has no PCI function
[[nodiscard]] std::optional<RdmaPlace> findRdma(const ModeContext& ctx, const sysfs::PciFunction* fn,
                                                const nl::Link& link);

/// The PCI function `deviceId` names, as sysfs describes it.
/// @return kDeviceNotFound naming deviceID: no such function on this node (the device plugin's
///         resource handed out a wrong one), or sysfs unreadable.
[[nodiscard]] cni::Result<sysfs::PciFunction> deviceIdFunction(const ModeContext& ctx, const net::PciAddress& deviceId);

/// The PF's netdev in the host, found from its PCI address.
[[nodiscard]] std::optional<nl::Link> pfLinkOf(const ModeContext& ctx, const net::PciAddress& pfPci);

}  // namespace ibcni::plugin
