// SPDX-License-Identifier: Apache-2.0
// ibcni-dra-faulty's decorator: every change Prepare and Unprepare make (the checkpoint's records,
// the CDI specs: dra::ClaimEffects) is one numbered step of a FaultPlan, failed or followed by
// SIGKILL as the plan says (IBCNI_FAULT_STEP, IBCNI_FAULT_KILL_AFTER). The lock and the reads pass
// through uncounted.
#pragma once

#include <string>
#include <vector>

#include "plugin/dra/claim_effects.h"
#include "support/fault/fault_plan.h"

namespace ibcni::fault {

class FaultyClaimEffects final : public dra::ClaimEffects {
 public:
  FaultyClaimEffects(dra::ClaimEffects& real, FaultPlan& plan) : real_(real), plan_(plan) {}

  [[nodiscard]] os::SysResult<os::FileLock> lock() override { return real_.lock(); }
  [[nodiscard]] os::SysResult<dra::ClaimRecords> load() override { return real_.load(); }
  [[nodiscard]] os::SysResult<void> store(const dra::ClaimRecords& records) override {
    return plan_.run("storeClaims records=" + std::to_string(records.size()), ENOSPC,
                     [&] { return real_.store(records); });
  }
  [[nodiscard]] os::SysResult<void> writeSpec(const std::string& claimUid,
                                              const std::vector<dra::CdiDevice>& devices) override {
    return plan_.run("writeCdiSpec claim=" + claimUid + " devices=" + std::to_string(devices.size()), ENOSPC,
                     [&] { return real_.writeSpec(claimUid, devices); });
  }
  [[nodiscard]] os::SysResult<void> removeSpec(const std::string& claimUid) override {
    return plan_.run("removeCdiSpec claim=" + claimUid, EIO, [&] { return real_.removeSpec(claimUid); });
  }

 private:
  dra::ClaimEffects& real_;
  FaultPlan& plan_;
};

}  // namespace ibcni::fault
