// SPDX-License-Identifier: Apache-2.0
// The status.devices[] ibcni-dra writes into its prepared claims: each device Ready, and, once
// ibcni's CNI ADD attached the VF to the pod, its networkData (interface name, IPs, hardware
// address) read from ibcni's attachment record on the node. The CNI path makes no API call for it:
// the driver's loop reads the records and applies what changed (server-side apply of the status,
// field manager ibcni.io, so that other drivers' entries stay).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ibcni/state/attachment_store.h"
#include "plugin/dra/claim_checkpoint.h"
#include "plugin/dra/kube_claim_api.h"

namespace ibcni::dra {

/// status.devices[] entries of prepared claim `record` for `driver`, without lastTransitionTime
/// (the reporter keeps the time a condition first took its value): one per device, networkData
/// from the attachment in `attachments` that holds its PCI function (sriov mode), if any.
[[nodiscard]] nlohmann::json deviceStatuses(const ClaimRecord& record,
                                            const std::vector<state::AttachmentRecord>& attachments,
                                            const std::string& driver);

/// Applies each prepared claim's statuses when they differ from what it last applied.
class StatusReporter {
 public:
  StatusReporter(ClaimApi& api, std::string driver) : api_(api), driver_(std::move(driver)) {}

  /// One pass over `records` (prepared claims only) and the node's `attachments`; `now` (RFC 3339)
  /// stamps conditions that changed. @return the errors of the claims whose status could not be
  /// written (tried again next pass).
  std::vector<std::string> report(const ClaimRecords& records, const std::vector<state::AttachmentRecord>& attachments,
                                  const std::string& now);

 private:
  ClaimApi& api_;
  std::string driver_;
  std::map<std::string, nlohmann::json> applied_;  ///< by claim uid, without times
};

}  // namespace ibcni::dra
