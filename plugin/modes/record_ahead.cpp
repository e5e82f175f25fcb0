// SPDX-License-Identifier: Apache-2.0
#include "plugin/modes/record_ahead.h"

#include "lib/log/timing.h"

namespace ibcni::plugin {

cni::Result<void> RecordAhead::save() {
  const auto& conf = ctx_.inv.conf;
  const bool first = store_ == nullptr;
  if (first) {
    store_ = ctx_.deps.makeStore(conf.stateDir);
    if (auto existing = store_->load(record_.network, record_.containerId, record_.ifName); existing && *existing) {
      return cni::fail(cni::Errc::kIfNameExists, "container " + record_.containerId + " already has " +
                                                     record_.ifName + " on network " + record_.network +
                                                     " (ADD twice without DEL)");
    }
  }
  if (auto r = store_->saveVolatile(record_); !r) {
    return std::unexpected(sysError(cni::Errc::kStateFailure,
                                    "cannot write the attachment record in stateDir = " + conf.stateDir, r.error()));
  }
  log::timing::lap("state-ahead");
  if (first) {
    // Undone only while the record is still this ADD's (an ADD of the same attachment through
    // another device, which the runtime never runs at the same time, may have replaced it).
    rollback_.add("remove the attachment record",
                  [store = store_, network = record_.network, cid = record_.containerId, ifName = record_.ifName,
                   key = record_.deviceKey]() -> os::SysResult<void> {
                    if (auto now = store->load(network, cid, ifName); now && *now && (*now)->deviceKey != key) {
                      return {};
                    }
                    return store->remove(network, cid, ifName);
                  });
  }
  return {};
}

}  // namespace ibcni::plugin
