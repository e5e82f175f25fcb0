// SPDX-License-Identifier: Apache-2.0
// sriov mode's guidPool: which VFs take their GUID from the pool (decided at resolve, changing
// nothing), the allocation written ahead in the record before it is made and undone by a failed
// ADD, and its release once DEL (GC, reconcile) has taken the GUID off the VF.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ibcni/cni/error.h"
#include "ibcni/config/guid_pool_conf.h"
#include "plugin/modes/attachment_mode.h"
#include "plugin/modes/record_ahead.h"
#include "plugin/modes/sriov_vf_lookup.h"

namespace ibcni::plugin {

/// The network's guidPool when it has a valid one (ADD and CHECK refuse a broken one when parsing).
[[nodiscard]] const config::GuidPoolConf* guidPoolOf(const config::NetConf& conf);

/// Whether a VF's GUID comes from `pool`, and which GUID is asked of it (none: the pool picks).
struct PoolGuidChoice {
  bool fromPool = false;
  std::optional<net::Guid> requested;
};

/// The pool's rule, for a VF whose GUID `requested` was asked for (none: not asked) and whose port
/// GUID is `currentPort` now: a requested GUID inside the pool's range is claimed there (outside it,
/// it is set as without a pool); with none requested, the pool assigns one when the VF has none
/// (all zeros or all ones) or with "assign": "always", and a VF's own GUID inside the pool's range
/// is claimed for the attachment (so that the pool never hands it to another VF while this one
/// carries it). sriov mode's ADD and ibcni-dra's Prepare both decide by it.
[[nodiscard]] PoolGuidChoice choosePoolGuid(const config::GuidPoolConf& pool, const std::optional<net::Guid>& requested,
                                            const std::optional<net::Guid>& currentPort);

/// Decides, for the VF in `device.vf`, whether its GUID comes from the pool (VfPlace::guidFromPool),
/// by the rule above.
/// @return error 2 when this program has no GUID pools.
[[nodiscard]] cni::Result<void> choosePoolGuid(const ModeContext& ctx, HostDevice& device);

/// ADD: the pool's GUID for the VF. Writes the pool and its store in the record first (so that a kill
/// at any later point leaves a record DEL and the node agent release it by), allocates, and registers
/// the release on `rollback`.
[[nodiscard]] cni::Result<net::Guid> takePoolGuid(const ModeContext& ctx, const VfPlace& vf, os::Rollback& rollback,
                                                  state::AttachmentRecord& record, RecordAhead& ahead);

/// The GUIDs to put back on DEL when the VF got a pool GUID: the ones it had, except that a GUID
/// inside the pool's range is not put back (the pool may hand it out again): the VF is left
/// without a GUID instead.
[[nodiscard]] VfGuids restorableOutsidePool(const VfGuids& had, const config::GuidPoolConf& pool);

/// The fix for a VF that is no member of its partition after it got GUID `guid` from pool `pool`: the
/// subnet manager has not admitted that GUID to the partition (yet).
[[nodiscard]] std::string pkeyFixForPoolGuid(const std::string& guid, const std::string& pool);

/// DEL: releases the record's pool GUID once the VF no longer carries it: when `errors` (of putting
/// the VF's settings back) is empty. Otherwise keeps it, so that a retried DEL releases it then.
void releasePoolGuid(const ModeContext& ctx, const state::AttachmentRecord& record, std::vector<cni::Error>& errors);

/// DEL without a record (it was never written, or is gone): releases what the attachment holds in
/// the configured pool.
[[nodiscard]] cni::Result<void> releaseConfiguredPoolGuid(const Invocation& inv, Deps& deps);

/// GC: releases the pool GUIDs of the network's attachments not in `keep`.
[[nodiscard]] cni::Result<void> gcPoolGuids(const Invocation& inv, Deps& deps, const std::vector<cni::AttachmentKey>& keep);

/// CHECK: the pool still holds the record's GUID for the attachment.
[[nodiscard]] cni::Result<void> checkPoolGuid(const ModeContext& ctx, const state::AttachmentRecord& record);

}  // namespace ibcni::plugin
