// SPDX-License-Identifier: Apache-2.0
// What a claim asks of an allocated VF beyond the device itself: the opaque configuration of this
// driver in status.allocation.devices.config[] (the DeviceClass's entries first, then the claim's;
// a later entry's key wins), with the keys ibcni's NetworkAttachmentDefinition has where they make
// sense before the pod exists: `guid`, `guidPool`, `linkState`, `pkey`. They are read by the same
// parser as a NAD's, so that a value means the same in both places.
#pragma once

#include <expected>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ibcni/config/guid_pool_conf.h"
#include "ibcni/config/net_conf.h"
#include "ibcni/ipam/guid_pool.h"
#include "ibcni/net/ip.h"
#include "ibcni/net/pkey.h"

namespace ibcni::dra {

/// The settings for one VF; none set: the VF is prepared as it is.
struct VfSettings {
  std::optional<net::Guid> guid;                  ///< `guid`: the node and port GUID to set
  std::optional<config::GuidPoolConf> guidPool;   ///< `guidPool`: as in sriov mode's NAD
  std::optional<config::VfLinkState> linkState;   ///< `linkState`: "auto", "enable", "disable"
  std::optional<net::Pkey> pkey;                  ///< `pkey`: the VF's pkey table must hold it

  /// Whether Prepare changes the VF (the pkey is only checked).
  [[nodiscard]] bool changesVf() const { return guid || guidPool || linkState; }
};

/// The settings of request `request` (a result's request, "req" or "req/subreq") of the claim
/// `claim` (a ResourceClaim object) for driver `driver`, on the VF `vfPci`. An error names the
/// config entry, the key, the value and the fix.
[[nodiscard]] std::expected<VfSettings, std::string> vfSettingsFor(const nlohmann::json& claim, const std::string& driver,
                                                                   const std::string& request,
                                                                   const std::string& vfPci);

using ipam::kDraGuidNetwork;

}  // namespace ibcni::dra
