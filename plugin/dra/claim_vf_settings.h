// SPDX-License-Identifier: Apache-2.0
// Prepare's changes to a VF before the pod exists, as the claim's configuration asks (claim_config):
// a GUID from the request or from a GUID pool (the same pools and rule as sriov mode's guidPool),
// set as node and port GUID and applied by a driver rebind, and the link state. Each change is
// written ahead in the claim's record (VfChange) before it is made; undoVfChange puts back what the
// record names, from the record alone, and skips what is already so (a VF that no longer carries the
// claim's GUID, a PF that is gone), so that it can run again after a kill at any step.
#pragma once

#include <functional>
#include <string>

#include "ibcni/os/sys_error.h"
#include "plugin/dra/claim_config.h"
#include "plugin/dra/claim_effects.h"
#include "plugin/dra/claim_preparer.h"
#include "plugin/dra/ib_devices.h"

namespace ibcni::dra {

/// What the VF steps work through: the node's effects, and the record's store (writes the
/// checkpoint with `change` as it stands: the step ahead).
struct VfSteps {
  ClaimEffects& effects;
  std::function<os::SysResult<void>()> saveAhead;
};

/// Applies `settings` to VF `device` of claim `claim`, filling `change` (saved ahead of each step).
/// @return "" or what failed, naming the VF and the fix.
[[nodiscard]] std::string applyVfSettings(VfSteps& steps, const ClaimRef& claim, const IbDevice& device,
                                          const VfSettings& settings, VfChange& change);

/// Puts back what `change` records, clearing each part once it is undone: the link state, the
/// GUIDs (with a rebind) while the VF carries the claim's GUID, then the pool GUID, released only
/// once the VF no longer carries it. @return "" or the errors (the rest stays in `change`).
[[nodiscard]] std::string undoVfChange(ClaimEffects& effects, const std::string& claimUid, VfChange& change);

/// Whether `change` still names something to put back.
[[nodiscard]] bool pending(const VfChange& change);

}  // namespace ibcni::dra
