// SPDX-License-Identifier: Apache-2.0
// DEL: put the device back and release IPAM. It must succeed whenever what it would remove is
// already gone (netns deleted, device already back, no record, DEL twice), because a failing DEL
// blocks the runtime's cleanup of the whole chain and is retried forever.
#include "commands/commands.h"
#include "commands/common.h"
#include "log/log.h"

namespace ibcni::plugin {

cni::Result<void> cmdDel(const Invocation& inv, Deps& deps) {
  const auto& conf = inv.conf;
  auto host = hostNetns(deps);
  if (!host) {
    return std::unexpected(host.error());
  }
  auto store = deps.makeStore(conf.stateDir);
  std::optional<state::AttachmentRecord> record;
  bool undecodable = false;
  if (auto loaded = store->load(conf.name, inv.args.containerId, inv.args.ifName); loaded) {
    record = *loaded;
  } else {
    // A record that cannot be read must not block DEL forever: fall back to what the device says.
    log::error("cannot read the attachment record: {}", loaded.error().describe());
    undecodable = true;
  }

  if (!record) {
    // No record: ADD never ran, failed, or its record was lost. The device itself may still carry
    // ibcni's mark in the pod.
    if (auto pod = openPodNetnsIfAlive(inv.args.netns, deps, *host)) {
      if (auto l = deps.netlink.linkByName(*pod, inv.args.ifName); l) {
        ModeContext ctx{inv, deps, *host};
        record = modeFor(conf.mode).recover(ctx, *l);
        if (record) {
          log::warn("no attachment record for {}: restoring {} from its alias", inv.args.ifName, record->hostName);
        }
      }
    }
  }
  if (record && record->netns.empty()) {
    record->netns = inv.args.netns;
  }
  if (!record) {
    log::info("no attachment to undo for {}; releasing IPAM only", inv.args.ifName);
  }

  std::string key = record && !record->deviceKey.empty() ? record->deviceKey : deviceKeyFromConfig(conf);
  auto lock = lockDevice(inv, deps, key);
  if (!lock) {
    return std::unexpected(lock.error());
  }

  if (auto r = releaseAttachment(inv, deps, *host, record, /*releaseIpam=*/true); !r) {
    return r;
  }
  if (record || undecodable) {
    if (auto r = store->remove(conf.name, inv.args.containerId, inv.args.ifName); !r) {
      return std::unexpected(sysError(cni::Errc::kStateFailure, "cannot remove the attachment record", r.error()));
    }
  }
  return {};
}

}  // namespace ibcni::plugin
