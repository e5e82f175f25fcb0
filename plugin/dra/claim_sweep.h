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
//
// The sweep is a backstop, so it costs the API server little: each claim is read from the watch
// cache (no etcd request; a lag of moments is covered by the grace), at most once per grace period
// while the server has it, and once more when a claim seen gone has been gone for the grace. With
// the default grace (60 s) a node of 8 claims reads 8 claims a minute, 1000 such nodes 133 cached
// reads a second; a claim deleted is undone between one and two grace periods (plus a pass) after.
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

  /// One pass over the node's `records` at `now`: each claim due read (one the server had, a grace
  /// after its last read; one seen gone, once gone for the grace); one seen gone twice a grace
  /// apart undone. A read that fails for another reason than 404 leaves the claim as it is, due again.
  Report pass(const ClaimRecords& records, Clock::time_point now);

 private:
  /// What the sweep last saw of a claim.
  struct Seen {
    Clock::time_point at;  ///< when it was read (present), or first seen gone
    bool gone = false;
  };

  /// Whether claim `record` is gone from the API server; an error when the read failed.
  [[nodiscard]] ApiResult<bool> gone(const ClaimRecord& record);

  ClaimApi& claims_;
  ClaimPreparer& preparer_;
  std::chrono::seconds grace_;
  std::map<std::string, Seen> seen_;  ///< by claim uid, of the claims still recorded
};

}  // namespace ibcni::dra
