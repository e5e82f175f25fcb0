// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/claim_sweep.h"

#include <utility>

namespace ibcni::dra {

ApiResult<bool> ClaimSweep::gone(const ClaimRecord& record) {
  auto claim = claims_.get(record.ref.ns, record.ref.name, Read::kCached);
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
  std::map<std::string, Seen> kept;
  for (const auto& [uid, record] : records) {
    const auto last = seen_.find(uid);
    // Not due: read less than a grace ago (present), or gone for less than the grace.
    if (last != seen_.end() && now - last->second.at < grace_) {
      kept.insert(*last);
      continue;
    }
    auto isGone = gone(record);
    if (!isGone) {
      report.errors.push_back("reading " + claimText(record.ref) + ": " + isGone.error().message);
      if (last != seen_.end() && last->second.gone) {
        kept.insert(*last);  // still gone since then, as far as the sweep knows
      }
      continue;
    }
    if (!*isGone) {
      kept.emplace(uid, Seen{now, false});
      continue;
    }
    const Seen since = last != seen_.end() && last->second.gone ? last->second : Seen{now, true};
    if (now - since.at < grace_) {
      kept.emplace(uid, since);
      continue;
    }
    if (auto error = preparer_.unprepare(record.ref); !error.empty()) {
      report.errors.push_back(error);
      kept.emplace(uid, since);
      continue;
    }
    report.undone.push_back(claimText(record.ref));
  }
  seen_ = std::move(kept);
  return report;
}

}  // namespace ibcni::dra
