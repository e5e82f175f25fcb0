// SPDX-License-Identifier: Apache-2.0
// Which other attachments hold a device, by ibcni's records: a device handed to a pod is found in
// no host namespace (ADD's "not found"), and a VF given to a VM stays in the host whether a VM has
// it or not, so only the records tell. A record whose pod netns is gone (its pod died without a DEL)
// holds nothing; one whose netns cannot be checked from here may still.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ibcni/cni/error.h"
#include "ibcni/state/attachment_store.h"
#include "plugin/deps.h"
#include "plugin/invocation.h"

namespace ibcni::plugin {

/// The records of the device, other than this invocation's own attachment, by their pod's netns.
struct DeviceHolders {
  const state::AttachmentRecord* live = nullptr;         ///< the first whose netns is alive
  const state::AttachmentRecord* uncheckable = nullptr;  ///< the first whose netns cannot be checked
  std::vector<const state::AttachmentRecord*> gone;      ///< those whose netns is gone
  /// The holder an ADD must not take the device from: the live one, else the uncheckable one.
  [[nodiscard]] const state::AttachmentRecord* holder() const { return live != nullptr ? live : uncheckable; }
};

/// Classifies the records of `records` that `sameDevice` selects. The pointers are into `records`.
[[nodiscard]] DeviceHolders deviceHolders(const Invocation& inv, Deps& deps,
                                          const std::vector<state::AttachmentRecord>& records,
                                          const std::function<bool(const state::AttachmentRecord&)>& sameDevice);

/// "container C (network N, ifname I, netns P)", for messages.
[[nodiscard]] std::string attachmentText(const state::AttachmentRecord& record);

/// Error 101: `subject` ("deviceID = \"...\"") is attached to `holders.holder()`; DEL that first.
[[nodiscard]] cni::Error busyWith(const std::string& subject, const DeviceHolders& holders);

}  // namespace ibcni::plugin
