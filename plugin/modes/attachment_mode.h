// SPDX-License-Identifier: Apache-2.0
// Each way of giving a pod an interface is a strategy behind this interface, registered in
// mode_table.cpp. The verbs (commands/) do what is common: netns, locks, IPAM, addresses, records.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <string>
#include <string_view>

#include "plugin/deps.h"
#include "ibcni/cni/error.h"
#include "ibcni/netlink/netlink.h"
#include "ibcni/os/netns.h"
#include "ibcni/os/rollback.h"
#include "ibcni/state/attachment_store.h"
#include "plugin/invocation.h"

namespace ibcni::plugin {

/// An SR-IOV VF's place on its PF, where its settings (GUIDs, link state) are made.
struct VfPlace {
  net::PciAddress pfPci;
  std::uint32_t vfIndex = 0;
  nl::Link pfLink;                ///< the PF's netdev in the host; index 0 when it has none
  std::optional<nl::VfInfo> info; ///< what the PF reports about the VF, when it does
  std::optional<net::Guid> guid;  ///< the GUID requested for it (requestedGuid), if any
  /// guidPool gives the VF its GUID: `guid` claimed in the pool, or a free one when `guid` is empty
  /// (choosePoolGuid).
  bool guidFromPool = false;
  std::string guidFrom;  ///< where `guid` came from, for messages: "runtimeConfig.infinibandGUID"
  /// The node and port GUID the VF had before an attachment whose pod died without a DEL set its
  /// own: what DEL restores, rather than the dead pod's GUID it finds (set when such a record holds
  /// the VF and says what it replaced).
  std::optional<std::pair<net::Guid, net::Guid>> guidsBeforeDeadHolder;
};

/// The RDMA device behind the netdev, and whether ADD moves it into the pod.
struct RdmaPlace {
  std::string name;             ///< e.g. "mlx5_3"
  std::uint32_t index = 0;      ///< RDMA netlink device index (0 is a valid index)
  bool visible = false;         ///< RDMA netlink shows it in the host (index is meaningful)
  std::uint32_t port = 1;
  bool isolate = false;         ///< move it into the pod's netns (rdmaIsolation)
};

/// The device a mode will attach, as found in the host before anything changed.
struct HostDevice {
  std::string deviceKey;   ///< lock name: "pci-<addr>" or "netdev-<name>"
  std::optional<net::PciAddress> pciAddress;  ///< none when the netdev has no PCI function
  nl::Link link;
  std::optional<VfPlace> vf;      ///< set when the PCI function is an SR-IOV VF
  std::optional<RdmaPlace> rdma;  ///< set when an RDMA device belongs to it
  std::optional<nl::IpoibChildSpec> ipoibChild;  ///< ipoib mode: the child to create (link is the parent)
};

/// A link name no real interface has: "ibc" and 8 random hex digits. Links travel between
/// namespaces under such a name, so they never clash with an interface of either side.
[[nodiscard]] std::string temporaryLinkName();

/// What every mode call sees.
struct ModeContext {
  const Invocation& inv;
  Deps& deps;
  const os::Netns& host;  ///< the namespace ibcni runs in
};

class AttachmentMode {
 public:
  virtual ~AttachmentMode() = default;

  /// Whether the pod gets a netdev (CNI_IFNAME) that the verbs give addresses and check. A VF
  /// given to a VM stays in the host: its pod gets none.
  [[nodiscard]] virtual bool givesPodNetdev() const { return true; }

  /// Finds the device in the host netns. Changes nothing.
  /// @return kDeviceNotFound naming the config field and value, or kInvalidConfig.
  [[nodiscard]] virtual cni::Result<HostDevice> resolve(const ModeContext& ctx) = 0;

  /// Puts the device into `pod` as CNI_IFNAME, up, with the configured MTU/MAC. Registers an undo
  /// on `rollback` right after each change, and fills the host/pod fields of `record`.
  /// @return the pod link.
  [[nodiscard]] virtual cni::Result<nl::Link> setUp(const ModeContext& ctx, const HostDevice& device,
                                                    const os::Netns& pod, os::Rollback& rollback,
                                                    state::AttachmentRecord& record) = 0;

  /// Returns the device to the host as it was. Succeeds when it is already back or gone.
  /// @param pod  null when the pod netns no longer exists
  [[nodiscard]] virtual cni::Result<void> tearDown(const ModeContext& ctx, const state::AttachmentRecord& record,
                                                   const os::Netns* pod) = 0;

  /// After tearDown, for `ibcni reconcile`: whether the device is still out of the host and may
  /// come back, so that its record must be kept (a PCI function whose netdev is in a namespace that
  /// lives on, held by a process after its path was removed: the kernel returns it when that
  /// namespace ends). A virtual device is destroyed with its namespace and never comes back.
  [[nodiscard]] virtual bool awaitsReturn(const ModeContext& ctx, const state::AttachmentRecord& record) = 0;

  /// CHECK's mode-specific part: the pod link is still what setUp made.
  /// @param podLink  CNI_IFNAME in the pod; an empty link when givesPodNetdev() is false
  [[nodiscard]] virtual cni::Result<void> check(const ModeContext& ctx, const state::AttachmentRecord& record,
                                                const os::Netns& pod, const nl::Link& podLink) = 0;

  /// The lock name of the device this configuration selects, for a DEL that finds no record: the
  /// key ADD took for the same configuration. Changes nothing.
  [[nodiscard]] virtual std::string deviceKeyFromConfig(const ModeContext& ctx) = 0;

  /// Rebuilds a partial record from what the device itself says (its alias), for a DEL that finds
  /// no record. nullopt when the pod link does not carry ibcni's mark.
  [[nodiscard]] virtual std::optional<state::AttachmentRecord> recover(const ModeContext& ctx,
                                                                       const nl::Link& podLink) = 0;
};

/// A record keyed by this invocation (network, container, ifname) with its netns and mode; the
/// mode fills in what it did.
[[nodiscard]] state::AttachmentRecord recordFor(const Invocation& inv);

/// The strategy for a mode.
[[nodiscard]] AttachmentMode& modeFor(config::Mode mode);

/// The strategy for this invocation's device: sriov mode takes a VF bound to vfio-pci (with
/// `vfio` "auto"; any device with `vfio` true) to a VM (SriovVfioMode), else the mode's strategy.
/// Reads the function's driver link, nothing more.
[[nodiscard]] AttachmentMode& modeFor(const ModeContext& ctx);

/// The strategy a record names ("sriov", "ipoib", "sriov-vfio"); null for a mode this build does
/// not know.
[[nodiscard]] AttachmentMode* modeByName(std::string_view name);

}  // namespace ibcni::plugin
