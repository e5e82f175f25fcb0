// SPDX-License-Identifier: Apache-2.0
#include "plugin/doctor/guid_pool_check.h"

#include "plugin/doctor/cluster_check.h"
#include "plugin/modes/sriov_vf_guid_pool.h"
#include "plugin/modes/sriov_vf_lookup.h"

namespace ibcni::doctor {

namespace {

// The VF of `record` as its PF reports it now, and whether it, the record and the pool agree.
GuidVfReport judgeVf(const ConfigCheckInputs& in, const plugin::Invocation& inv, const state::AttachmentRecord& record) {
  GuidVfReport v;
  v.vf = plugin::vfName(*record.pfPci, *record.vfIndex, "");
  v.attachment = cni::AttachmentKey{record.containerId, record.ifName}.toString();
  v.recorded = record.guid;
  const plugin::ModeContext ctx{inv, in.deps, in.host};
  if (auto pf = plugin::pfLinkOf(ctx, *record.pfPci)) {
    if (auto info = in.deps.netlink.vfInfo(in.host, pf->index, *record.vfIndex); info && info->portGuid) {
      v.portGuid = info->portGuid->toString();
    }
  }
  if (auto held = in.deps.guids->held(record.guidPoolDir, {record.containerId, record.ifName}); held && *held) {
    v.poolHolds = (*held)->toString();
  }
  v.ok = !v.recorded.empty() && v.portGuid == v.recorded && v.poolHolds == v.recorded;
  return v;
}

void reportVf(const GuidVfReport& v, const std::string& pool, ConfigReport& r) {
  if (v.ok) {
    r.ok.push_back(v.vf + " (" + v.attachment + ") carries GUID " + v.recorded + " of guidPool " + pool +
                   ", as its record and the pool say");
    return;
  }
  if (v.portGuid != v.recorded) {
    r.problems.push_back({v.vf + " (" + v.attachment + ") has port GUID " +
                              (v.portGuid.empty() ? std::string("(unreadable)") : v.portGuid) +
                              ", but its record says " + v.recorded + " (from guidPool " + pool + ")",
                          "something else set the VF's GUID, or its driver reset it: delete and recreate the pod, "
                          "so that it gets a GUID from the pool again"});
  }
  if (v.poolHolds != v.recorded) {
    r.problems.push_back({"guidPool " + pool + " holds " + (v.poolHolds.empty() ? std::string("no GUID") : v.poolHolds) +
                              " for " + v.attachment + ", whose VF was given " + v.recorded,
                          "the pool may hand that GUID to another VF: delete and recreate the pod"});
  }
}

// Each record of the network that holds a pool GUID.
void checkAttachedVfs(const ConfigCheckInputs& in, const plugin::Invocation& inv, const std::string& pool,
                      GuidPoolCheckReport& k, ConfigReport& r) {
  auto records = in.deps.makeStore(inv.conf.stateDir)->list(inv.conf.name);
  if (!records) {
    r.problems.push_back({"cannot list the attachment records in " + inv.conf.stateDir + ": " +
                              records.error().describe(),
                          "run the doctor as root, on the node"});
    return;
  }
  for (const auto& record : *records) {
    if (record.guidPoolDir.empty() || !record.pfPci || !record.vfIndex || in.deps.guids == nullptr) {
      continue;
    }
    k.vfs.push_back(judgeVf(in, inv, record));
    reportVf(k.vfs.back(), pool, r);
  }
}

}  // namespace

void checkGuidPool(const ConfigCheckInputs& in, const plugin::Invocation& inv, ConfigReport& r) {
  const config::GuidPoolConf* pool = plugin::guidPoolOf(inv.conf);
  if (pool == nullptr) {
    return;
  }
  GuidPoolCheckReport k;
  k.pool = pool->pool;
  k.range = pool->first.toString() + "-" + pool->last.toString();
  k.blockSize = pool->blockSize;
  k.assign = pool->assign == config::GuidAssign::kAlways ? "always" : "when-unset";
  k.storeDir = in.deps.guids != nullptr ? in.deps.guids->storeDirOf(*pool) : std::string();
  r.ok.push_back("guidPool " + cni::quoted(k.pool) + ": GUIDs " + k.range + " in blocks of " +
                 std::to_string(k.blockSize) + ", assigned " + k.assign + ", " +
                 (pool->cluster ? "claimed cluster-wide" : "node-local") +
                 (k.storeDir.empty() ? std::string() : ", this node's store " + k.storeDir));
  if (pool->cluster) {
    const std::string poolText = "GUID pool " + cni::quoted(k.pool) + " (" +
                                 std::string(config::clusterBackendName(pool->cluster->backend)) + ")";
    PoolLister lister;
    if (in.guidPools) {
      lister = [&] { return in.guidPools(*pool, inv.conf.name); };
    }
    k.cluster = checkClusterPool(in, *pool->cluster, poolText, lister, r);
  }
  checkAttachedVfs(in, inv, k.pool, k, r);
  r.guidPool = std::move(k);
}

}  // namespace ibcni::doctor
