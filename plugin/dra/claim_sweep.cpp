// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/claim_sweep.h"

#include <utility>

namespace ibcni::dra {

ApiResult<bool> ClaimSweep::gone(const ClaimRecord& record) {
  auto claim = claims_.get(record.ref.ns, record.ref.name);
  if (!claim) {
    if (claim.error().kind == ApiError::Kind::kNotFound) {
      return true;
    }
    return std::unexpected(claim.error());
  }
  // A claim made again under the name is another claim: the recorded one is gone. A claim no longer
  // allocated was deallocated once no pod had it reserved: its devices may be another claim's.
  const nlohmann::json& object = *claim;
  return object.value("/metadata/uid"_json_pointer, std::string()) != record.ref.uid ||
         !object.contains("/status/allocation"_json_pointer);
}

ClaimSweep::Report ClaimSweep::pass(const ClaimRecords& records, Clock::time_point now) {
  Report report;
  std::map<std::string, Clock::time_point> stillGone;
  for (const auto& [uid, record] : records) {
    const auto seen = goneSince_.find(uid);
    auto isGone = gone(record);
    if (!isGone) {
      report.errors.push_back("reading " + claimText(record.ref) + ": " + isGone.error().message);
      if (seen != goneSince_.end()) {
        stillGone.insert(*seen);
      }
      continue;
    }
    if (!*isGone) {
      continue;
    }
    const Clock::time_point since = seen == goneSince_.end() ? now : seen->second;
    if (now - since < grace_) {
      stillGone.emplace(uid, since);
      continue;
    }
    if (auto error = preparer_.unprepare(record.ref); !error.empty()) {
      report.errors.push_back(error);
      stillGone.emplace(uid, since);
      continue;
    }
    report.undone.push_back(claimText(record.ref));
  }
  goneSince_ = std::move(stillGone);
  return report;
}

}  // namespace ibcni::dra
