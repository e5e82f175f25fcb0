// SPDX-License-Identifier: Apache-2.0
// `ibcni doctor --config` on a sriov config with guidPool: the pool, its cluster object, and each VF
// of this node that carries one of its GUIDs.
#pragma once

#include "plugin/doctor/config_check.h"
#include "plugin/invocation.h"

namespace ibcni::doctor {

/// The network's guidPool, if it has one: the pool (range, block size, assign, this node's store)
/// in r.ok; guidPool.cluster checked as ipam.cluster is (node name, libcurl, backend, the pool's
/// blocks by the backend and by this node's ledger, the lease); and for each record of the network
/// with a pool GUID, that the VF's port GUID is the recorded one and the pool's store holds it for
/// that attachment (a problem naming the VF, both GUIDs and the fix otherwise).
void checkGuidPool(const ConfigCheckInputs& in, const plugin::Invocation& inv, ConfigReport& r);

}  // namespace ibcni::doctor
