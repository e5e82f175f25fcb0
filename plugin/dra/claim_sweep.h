// SPDX-License-Identifier: Apache-2.0
// Claims recorded on this node whose ResourceClaim the API server no longer has, undone by
// ibcni-dra's loop as the kubelet's Unprepare would undo them. The kubelet unprepares a claim once
// the last pod on this node that uses it is gone; when it never does (its own checkpoint lost, a
// Prepare killed and never retried, a pod force-deleted while the kubelet was down), the claim's VF
// settings, pool GUIDs, CDI spec and metadata would outlive it. The API server keeps a claim that a
// pod has reserved (its delete-protection finalizer) and deallocates one only when no pod has it
// reserved, so a claim it no longer has (404, or a claim of that name with another uid), or has no
// longer allocated, has no pod left. It is undone once it has been seen gone for a grace
// period: a claim deleted while the kubelet still tears down its pod's containers is the kubelet's
// to unprepare first.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "plugin/dra/claim_checkpoint.h"
#include "plugin/dra/claim_preparer.h"
#include "plugin/dra/kube_claim_api.h"

namespace ibcni::dra {

class ClaimSweep {
 public:
  using Clock = std::chrono::steady_clock;

  /// Claims read through `claims`, undone through `preparer` (its Unprepare, under the
  /// checkpoint's lock as the kubelet's calls are) once seen gone for `grace`.
  ClaimSweep(ClaimApi& claims, ClaimPreparer& preparer, std::chrono::seconds grace)
      : claims_(claims), preparer_(preparer), grace_(grace) {}

  struct Report {
    std::vector<std::string> undone;  ///< "<ns>/<name> (uid <uid>)" of each claim undone
    std::vector<std::string> errors;  ///< reads and undos that failed (tried again next pass)
  };

  /// One pass over the node's `records` at `now`: each claim read; one gone since at least
  /// `grace` ago undone. A read that fails for another reason than 404 leaves the claim as it is.
  Report pass(const ClaimRecords& records, Clock::time_point now);

 private:
  /// Whether claim `record` is gone from the API server; an error when the read failed.
  [[nodiscard]] ApiResult<bool> gone(const ClaimRecord& record);

  ClaimApi& claims_;
  ClaimPreparer& preparer_;
  std::chrono::seconds grace_;
  std::map<std::string, Clock::time_point> goneSince_;  ///< by claim uid: when a pass first saw it gone
};

}  // namespace ibcni::dra
