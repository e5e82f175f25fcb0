// SPDX-License-Identifier: Apache-2.0
// GC (1.1.0): release every attachment of this network that the runtime no longer lists as valid,
// keep going past failures and report them together, then pass GC on to the IPAM plugin with the
// same configuration (it releases the addresses of the attachments that are not listed).
#include <algorithm>

#include "plugin/commands/commands.h"
#include "plugin/commands/common.h"
#include "plugin/modes/sriov_vf_guid_pool.h"
#include "lib/log/log.h"

namespace ibcni::plugin {

cni::Result<void> cmdGc(const Invocation& inv, Deps& deps) {
  const auto& conf = inv.conf;
  auto hostAndState = hostNetnsWithStateDir(inv, deps);
  if (!hostAndState) {
    return std::unexpected(hostAndState.error());
  }
  const os::Netns& host = *hostAndState;
  // No list: no attachment is valid (the spec's reading; `cnitool gc` sends none).
  const std::vector<cni::AttachmentKey> none;
  const auto& valid = conf.validAttachments ? *conf.validAttachments : none;
  std::vector<cni::Error> errors;
  auto store = deps.makeStore(conf.stateDir);
  auto records = store->list(conf.name);
  if (!records) {
    errors.push_back(sysError(cni::Errc::kStateFailure, "cannot list attachment records", records.error()));
  } else {
    for (const auto& record : *records) {
      cni::AttachmentKey key{record.containerId, record.ifName};
      if (std::find(valid.begin(), valid.end(), key) != valid.end()) {
        continue;
      }
      log::info("gc: releasing stale attachment {}/{} (netns {})", record.containerId, record.ifName, record.netns);
      auto lock = lockDevice(inv, deps, deviceKeyOf(record));
      if (!lock) {
        errors.push_back(lock.error());
        continue;
      }
      if (auto r = releaseAttachment(inv, deps, host, record, /*releaseIpam=*/false); !r) {
        errors.push_back(r.error());
        continue;
      }
      if (auto r = store->remove(record.network, record.containerId, record.ifName); !r) {
        errors.push_back(sysError(cni::Errc::kStateFailure, "cannot remove the record of " + record.containerId,
                                  r.error()));
      }
    }
  }
  // The pool's GUIDs of attachments neither listed nor still recorded (a record left by a failed
  // release keeps its GUID until it is released).
  std::vector<cni::AttachmentKey> keep = valid;
  if (auto left = store->list(conf.name); left) {
    for (const auto& r : *left) {
      keep.push_back({r.containerId, r.ifName});
    }
    addFailure(errors, gcPoolGuids(inv, deps, keep));
  }
  if (!conf.ipamType.empty()) {
    addFailure(errors, deps.ipam.gc(ipamRequest(inv)));
  }
  return failuresAsOne(errors);
}

}  // namespace ibcni::plugin
