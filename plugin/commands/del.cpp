// SPDX-License-Identifier: Apache-2.0
// DEL: put the device back and release IPAM. It must succeed whenever what it would remove is
// already gone (netns deleted, device already back, no record, DEL twice), because a failing DEL
// blocks the runtime's cleanup of the whole chain and is retried forever.
#include "plugin/commands/commands.h"
#include "plugin/commands/common.h"
#include "lib/log/log.h"

namespace ibcni::plugin {

namespace {

// The attachment whose record says it holds `found` (a device recovered from the pod without a
// record of this attachment), if it is another one: e.g. network A's net1, when the runtime DELs
// network B's (container, net1) after network B's ADD failed on the name clash.
std::optional<state::AttachmentRecord> heldByAnother(state::AttachmentStore& store, const Invocation& inv,
                                                     const state::AttachmentRecord& found) {
  auto records = store.list("");
  if (!records) {
    return std::nullopt;
  }
  for (const auto& r : *records) {
    const bool self =
        r.network == inv.conf.name && r.containerId == inv.args.containerId && r.ifName == inv.args.ifName;
    if (self) {
      continue;
    }
    const bool sameLink = r.netns == inv.args.netns && r.ifName == inv.args.ifName;
    const bool sameDevice = r.mode == "sriov" && found.mode == "sriov" && !found.hostName.empty() &&
                            r.hostName == found.hostName;
    if (sameLink || sameDevice) {
      return r;
    }
  }
  return std::nullopt;
}

}  // namespace

cni::Result<void> cmdDel(const Invocation& inv, Deps& deps) {
  const auto& conf = inv.conf;
  auto hostAndState = hostNetnsWithStateDir(inv, deps);
  if (!hostAndState) {
    return std::unexpected(hostAndState.error());
  }
  const os::Netns& host = *hostAndState;
  auto store = deps.makeStore(conf.stateDir);
  std::optional<state::AttachmentRecord> record;
  bool undecodable = false;
  // What this DEL undoes: the record, else what the device in the pod says. `report`: log it.
  auto findAttachment = [&](bool report) {
    record.reset();
    undecodable = false;
    if (auto loaded = store->load(conf.name, inv.args.containerId, inv.args.ifName); loaded) {
      record = *loaded;
    } else {
      // A record that cannot be read must not block DEL forever: fall back to what the device says.
      if (report) {
        log::error("cannot read the attachment record: {}", loaded.error().describe());
      }
      undecodable = true;
    }

    if (!record) {
      // No record: ADD never ran, failed, or its record was lost. The device itself may still carry
      // ibcni's mark in the pod.
      if (auto pod = openPodNetnsIfAlive(inv.args.netns, 0, deps, host)) {
        if (auto l = deps.netlink.linkByName(*pod, inv.args.ifName); l) {
          ModeContext ctx{inv, deps, host};
          record = modeFor(conf.mode).recover(ctx, *l);
          if (auto owner = record ? heldByAnother(*store, inv, *record) : std::nullopt) {
            if (report) {
              log::warn("{} in the pod belongs to another attachment (network {}, container {}, ifname {}): "
                        "leaving it alone",
                        inv.args.ifName, owner->network, owner->containerId, owner->ifName);
            }
            record.reset();
          }
          if (record && report) {
            log::warn("no attachment record for {}: restoring {} from its alias", inv.args.ifName, record->hostName);
          }
        }
      }
    }
    if (record && record->netns.empty()) {
      record->netns = inv.args.netns;
    }
    if (record && !record->deviceKey.empty()) {
      return record->deviceKey;
    }
    return modeFor(inv.conf.mode).deviceKeyFromConfig(ModeContext{inv, deps, host});
  };

  std::string key = findAttachment(false);
  auto lock = lockDevice(inv, deps, key);
  if (!lock) {
    return std::unexpected(lock.error());
  }
  // Again under the lock: an ADD of this attachment that held it may have written its record
  // meanwhile. Acting on what was read before would release the address of an attachment that now
  // exists and remove its record (found by the fault tier's ADD/DEL storm).
  if (std::string again = findAttachment(true); again != key) {
    // The attachment now names another device lock (its ADD finished meanwhile): take that one.
    { [[maybe_unused]] os::FileLock released = std::move(*lock); }
    lock = lockDevice(inv, deps, again);
    if (!lock) {
      return std::unexpected(lock.error());
    }
    (void)findAttachment(true);
  }
  if (!record) {
    log::info("no attachment to undo for {}; releasing IPAM only", inv.args.ifName);
  }

  if (auto r = releaseAttachment(inv, deps, host, record, /*releaseIpam=*/true); !r) {
    return r;
  }
  // Also without a record: an ADD or DEL that died half-way may have left the record's temporary
  // file or its directory (then a failure to remove them does not fail DEL).
  if (auto r = store->remove(conf.name, inv.args.containerId, inv.args.ifName); !r && (record || undecodable)) {
    return std::unexpected(sysError(cni::Errc::kStateFailure, "cannot remove the attachment record", r.error()));
  }
  return {};
}

}  // namespace ibcni::plugin
