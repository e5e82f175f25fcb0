// SPDX-License-Identifier: Apache-2.0
// The CNI verbs, one file each. They receive a validated Invocation and the dependencies.
#pragma once

#include "plugin/deps.h"
#include "ibcni/cni/error.h"
#include "ibcni/cni/result.h"
#include "plugin/invocation.h"

namespace ibcni::plugin {

/// ADD: attach the device, run IPAM, configure addresses and routes, record what was done.
/// Any failure undoes every step taken (device, IPAM, addresses, record).
[[nodiscard]] cni::Result<cni::AddResult> cmdAdd(const Invocation& inv, Deps& deps);

/// DEL: put the device back and release IPAM. Succeeds when everything is already gone.
[[nodiscard]] cni::Result<void> cmdDel(const Invocation& inv, Deps& deps);

/// CHECK: verify the attachment against prevResult, ibcni's record and the IPAM plugin.
[[nodiscard]] cni::Result<void> cmdCheck(const Invocation& inv, Deps& deps);

/// GC: release every attachment of this network that is not in cni.dev/valid-attachments, then
/// pass GC on to the IPAM plugin.
[[nodiscard]] cni::Result<void> cmdGc(const Invocation& inv, Deps& deps);

/// STATUS: can ADD be serviced? Errors 50/51 when not.
[[nodiscard]] cni::Result<void> cmdStatus(const Invocation& inv, Deps& deps);

}  // namespace ibcni::plugin
