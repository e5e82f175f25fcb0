// SPDX-License-Identifier: Apache-2.0
#include "plugin/modes/sriov_vf_guid_pool.h"

#include <cerrno>

#include "lib/log/log.h"
#include "plugin/modes/sriov_vf.h"

namespace ibcni::plugin {

namespace {

using cni::Errc;

bool inPool(const config::GuidPoolConf& pool, const net::Guid& g) {
  return g.value >= pool.first.value && g.value <= pool.last.value;
}

cni::AttachmentKey keyOf(const state::AttachmentRecord& record) { return {record.containerId, record.ifName}; }

}  // namespace

const config::GuidPoolConf* guidPoolOf(const config::NetConf& conf) {
  return conf.guidPool && *conf.guidPool ? &**conf.guidPool : nullptr;
}

PoolGuidChoice choosePoolGuid(const config::GuidPoolConf& pool, const std::optional<net::Guid>& requested,
                              const std::optional<net::Guid>& currentPort) {
  if (requested) {
    return {inPool(pool, *requested), requested};
  }
  if (pool.assign == config::GuidAssign::kAlways || !currentPort || unusableGuid(*currentPort)) {
    return {true, std::nullopt};
  }
  if (inPool(pool, *currentPort)) {
    // The VF carries a GUID of the pool that no attachment of this node was known to hold (a lost
    // record, a hand-set GUID): it is claimed for this attachment, so that it is never handed out
    // twice, and DEL leaves the VF without it.
    return {true, currentPort};
  }
  return {};
}

cni::Result<void> choosePoolGuid(const ModeContext& ctx, HostDevice& device) {
  const config::GuidPoolConf* pool = guidPoolOf(ctx.inv.conf);
  if (pool == nullptr) {
    return {};
  }
  if (ctx.deps.guids == nullptr) {
    return cni::fail(Errc::kUnsupportedField,
                     "guidPool is set, but this program assigns no VF GUIDs: run ibcni itself (not a build "
                     "without GUID pools), or remove guidPool");
  }
  VfPlace& vf = *device.vf;
  const bool requested = vf.guid.has_value();
  const PoolGuidChoice choice = choosePoolGuid(*pool, vf.guid, currentGuids(device).port);
  vf.guidFromPool = choice.fromPool;
  if (requested) {
    vf.guidFrom = requestedGuidField(ctx.inv);
  } else if (choice.requested) {
    vf.guid = choice.requested;
    vf.guidFrom = "the VF's own GUID";
  }
  return {};
}

cni::Result<net::Guid> takePoolGuid(const ModeContext& ctx, const VfPlace& vf, os::Rollback& rollback,
                                    state::AttachmentRecord& record, RecordAhead& ahead) {
  const config::GuidPoolConf& pool = *guidPoolOf(ctx.inv.conf);
  ipam::GuidPools& guids = *ctx.deps.guids;  // choosePoolGuid refused a program without
  record.guidPool = pool.pool;
  record.guidPoolDir = guids.storeDirOf(pool);
  if (auto r = ahead.save(); !r) {
    return std::unexpected(r.error());
  }
  const ipam::GuidRequest request{pool, ctx.inv.conf.name, ctx.inv.args, ctx.inv.cniArgs, vf.guid, vf.guidFrom};
  auto lease = guids.allocate(request);
  if (!lease) {
    return std::unexpected(lease.error());
  }
  const net::Guid guid = lease->guid;
  rollback.add("release GUID " + guid.toString() + " of guidPool " + pool.pool,
               [&guids, dir = record.guidPoolDir, key = keyOf(record),
                network = record.network]() -> os::SysResult<void> {
                 if (auto r = guids.release(dir, key, network); !r) {
                   return os::sysFail(EIO, r.error().msg);
                 }
                 return {};
               });
  log::info("VF {} of {} gets GUID {} from guidPool {}", vf.vfIndex, vf.pfPci.text, guid.toString(), pool.pool);
  return guid;
}

VfGuids restorableOutsidePool(const VfGuids& had, const config::GuidPoolConf& pool) {
  VfGuids to = had;
  if (to.node && inPool(pool, *to.node)) {
    to.node = net::Guid{0};
  }
  if (to.port && inPool(pool, *to.port)) {
    to.port = net::Guid{0};
  }
  return to;
}

std::string pkeyFixForPoolGuid(const std::string& guid, const std::string& pool) {
  return "the VF's GUID " + guid + " came from guidPool " + pool +
         ": the subnet manager admits GUIDs to partitions, and has not admitted this one (yet). List the pool's "
         "GUIDs in the partition (OpenSM partitions.conf takes single GUIDs, not ranges; in UFM add them to the "
         "PKey) and wait for the SM's next sweep";
}

void releasePoolGuid(const ModeContext& ctx, const state::AttachmentRecord& record, std::vector<cni::Error>& errors) {
  if (record.guidPoolDir.empty()) {
    return;
  }
  if (!errors.empty()) {
    log::warn("keeping GUID {} in guidPool {}: the VF may still carry it (released by the DEL that restores it)",
              record.guid, record.guidPool);
    return;
  }
  if (ctx.deps.guids == nullptr) {
    errors.push_back(cni::Error{Errc::kUnsupportedField,
                                "the record of " + keyOf(record).toString() + " holds a GUID of guidPool " +
                                    record.guidPool + ", but this program has no GUID pools to release it in: DEL "
                                    "it with ibcni",
                                {}});
    return;
  }
  auto released = ctx.deps.guids->release(record.guidPoolDir, keyOf(record), record.network);
  if (!released) {
    errors.push_back(released.error());
  } else if (*released) {
    log::info("released GUID {} of guidPool {}", record.guid, record.guidPool);
  }
}

cni::Result<void> releaseConfiguredPoolGuid(const Invocation& inv, Deps& deps) {
  const config::GuidPoolConf* pool = guidPoolOf(inv.conf);
  if (pool == nullptr || deps.guids == nullptr) {
    return {};
  }
  auto released = deps.guids->release(deps.guids->storeDirOf(*pool), {inv.args.containerId, inv.args.ifName},
                                      inv.conf.name);
  if (!released) {
    return std::unexpected(released.error());
  }
  return {};
}

cni::Result<void> gcPoolGuids(const Invocation& inv, Deps& deps, const std::vector<cni::AttachmentKey>& keep) {
  const config::GuidPoolConf* pool = guidPoolOf(inv.conf);
  if (pool == nullptr || deps.guids == nullptr) {
    return {};
  }
  auto released = deps.guids->gc(*pool, inv.conf.name, keep);
  if (!released) {
    return std::unexpected(released.error());
  }
  for (const auto& a : *released) {
    log::info("gc: released GUID {} of {}/{} in guidPool {}", a.addresses.empty() ? "" : a.addresses.front(),
              a.containerId, a.ifName, pool->pool);
  }
  return {};
}

cni::Result<void> checkPoolGuid(const ModeContext& ctx, const state::AttachmentRecord& record) {
  if (record.guidPoolDir.empty() || ctx.deps.guids == nullptr) {
    return {};
  }
  auto held = ctx.deps.guids->held(record.guidPoolDir, keyOf(record));
  if (!held) {
    return std::unexpected(held.error());
  }
  if (!*held || (*held)->toString() != record.guid) {
    return cni::fail(Errc::kCheckFailed,
                     "guidPool " + record.guidPool + " no longer holds GUID " + record.guid + " for " +
                         keyOf(record).toString() + " (" +
                         (*held ? "it holds " + (*held)->toString() : std::string("it holds none")) +
                         "): another VF may be given it; delete and recreate the pod");
  }
  return {};
}

}  // namespace ibcni::plugin
