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

// What a DEL undoes, and the device lock that guards it.
struct FoundAttachment {
  std::optional<state::AttachmentRecord> record;
  bool undecodable = false;  ///< a record is there but cannot be read
  std::string deviceKey;
};

// The record when it can be read, else what the device in the pod says (ibcni's mark, when it still
// carries it and no other attachment holds it). `report`: log what was found.
std::optional<state::AttachmentRecord> recoverFromPod(const Invocation& inv, Deps& deps, const os::Netns& host,
                                                      state::AttachmentStore& store, bool report) {
  // No record: ADD never ran, failed, or its record was lost. The device itself may still carry
  // ibcni's mark in the pod.
  auto pod = openPodNetnsIfAlive(inv.args.netns, 0, deps, host);
  if (!pod) {
    return std::nullopt;
  }
  auto l = deps.netlink.linkByName(*pod, inv.args.ifName);
  if (!l) {
    return std::nullopt;
  }
  ModeContext ctx{inv, deps, host};
  auto record = modeFor(inv.conf.mode).recover(ctx, *l);
  if (auto owner = record ? heldByAnother(store, inv, *record) : std::nullopt) {
    if (report) {
      log::warn("{} in the pod belongs to another attachment (network {}, container {}, ifname {}): leaving it alone",
                inv.args.ifName, owner->network, owner->containerId, owner->ifName);
    }
    return std::nullopt;
  }
  if (record && report) {
    log::warn("no attachment record for {}: restoring {} from its alias", inv.args.ifName, record->hostName);
  }
  return record;
}

FoundAttachment findAttachment(const Invocation& inv, Deps& deps, const os::Netns& host,
                               state::AttachmentStore& store, bool report) {
  FoundAttachment found;
  if (auto loaded = store.load(inv.conf.name, inv.args.containerId, inv.args.ifName); loaded) {
    found.record = *loaded;
  } else {
    // A record that cannot be read must not block DEL forever: fall back to what the device says.
    if (report) {
      log::error("cannot read the attachment record: {}", loaded.error().describe());
    }
    found.undecodable = true;
  }
  if (!found.record) {
    found.record = recoverFromPod(inv, deps, host, store, report);
  }
  if (found.record && found.record->netns.empty()) {
    found.record->netns = inv.args.netns;
  }
  found.deviceKey = found.record && !found.record->deviceKey.empty()
                        ? found.record->deviceKey
                        : modeFor(inv.conf.mode).deviceKeyFromConfig(ModeContext{inv, deps, host});
  return found;
}

}  // namespace

// DEL: find what to undo and lock its device (and find it again under the lock), undo it, release
// the IPAM's allocation, remove the record. DEL succeeds when there is nothing left to undo.
cni::Result<void> cmdDel(const Invocation& inv, Deps& deps) {
  const auto& conf = inv.conf;
  auto hostAndState = hostNetnsWithStateDir(inv, deps);
  if (!hostAndState) {
    return std::unexpected(hostAndState.error());
  }
  const os::Netns& host = *hostAndState;
  auto store = deps.makeStore(conf.stateDir);
  FoundAttachment found = findAttachment(inv, deps, host, *store, false);
  auto lock = lockDevice(inv, deps, found.deviceKey);
  if (!lock) {
    return std::unexpected(lock.error());
  }
  // Again under the lock: an ADD of this attachment that held it may have written its record
  // meanwhile. Acting on what was read before would release the address of an attachment that now
  // exists and remove its record (found by the fault tier's ADD/DEL storm).
  const std::string key = found.deviceKey;
  found = findAttachment(inv, deps, host, *store, true);
  if (found.deviceKey != key) {
    // The attachment now names another device lock (its ADD finished meanwhile): take that one.
    { [[maybe_unused]] os::FileLock released = std::move(*lock); }
    lock = lockDevice(inv, deps, found.deviceKey);
    if (!lock) {
      return std::unexpected(lock.error());
    }
    found = findAttachment(inv, deps, host, *store, true);
  }
  if (!found.record) {
    log::info("no attachment to undo for {}; releasing IPAM only", inv.args.ifName);
  }

  if (auto r = releaseAttachment(inv, deps, host, found.record, /*releaseIpam=*/true); !r) {
    return r;
  }
  // Also without a record: an ADD or DEL that died half-way may have left the record's temporary
  // file or its directory (then a failure to remove them does not fail DEL).
  if (auto r = store->remove(conf.name, inv.args.containerId, inv.args.ifName); !r && (found.record || found.undecodable)) {
    return std::unexpected(sysError(cni::Errc::kStateFailure, "cannot remove the attachment record", r.error()));
  }
  return {};
}

}  // namespace ibcni::plugin
