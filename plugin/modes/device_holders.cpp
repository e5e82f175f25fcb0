// SPDX-License-Identifier: Apache-2.0
#include "plugin/modes/device_holders.h"

#include "ibcni/os/netns_checker.h"

namespace ibcni::plugin {

DeviceHolders deviceHolders(const Invocation& inv, Deps& deps, const std::vector<state::AttachmentRecord>& records,
                            const std::function<bool(const state::AttachmentRecord&)>& sameDevice) {
  DeviceHolders holders;
  for (const auto& r : records) {
    const bool self =
        r.network == inv.conf.name && r.containerId == inv.args.containerId && r.ifName == inv.args.ifName;
    if (self || !sameDevice(r)) {
      continue;
    }
    switch (os::netnsLiveness(deps.netns, r.netns, r.netnsInode)) {
      case os::NetnsLiveness::kAlive:
        holders.live = holders.live != nullptr ? holders.live : &r;
        break;
      case os::NetnsLiveness::kUnknown:
        holders.uncheckable = holders.uncheckable != nullptr ? holders.uncheckable : &r;
        break;
      case os::NetnsLiveness::kGone:
        holders.gone.push_back(&r);
        break;
    }
  }
  return holders;
}

std::string attachmentText(const state::AttachmentRecord& r) {
  return "container " + r.containerId + " (network " + r.network + ", ifname " + r.ifName + ", netns " + r.netns + ")";
}

cni::Error busyWith(const std::string& subject, const DeviceHolders& holders) {
  const bool uncheckable = holders.live == nullptr;
  return cni::Error{cni::Errc::kDeviceBusy,
                    subject + " is attached to " + attachmentText(*holders.holder()) +
                        (uncheckable ? ", whose netns cannot be checked from here (it may be alive)" : "") +
                        "; DEL that attachment first",
                    {}};
}

}  // namespace ibcni::plugin
