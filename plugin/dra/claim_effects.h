// SPDX-License-Identifier: Apache-2.0
// Every change Prepare and Unprepare make to the node, one call each, behind one interface: the
// claims' checkpoint (its lock, its records) and their CDI specs. The production implementation
// writes files; the fault tier's build of ibcni-dra wraps it to fail or kill at each step in turn
// (tests/support/fault/), so that "nothing outlives its claim" is checked after every one.
#pragma once

#include <string>
#include <vector>

#include "ibcni/os/file_lock.h"
#include "ibcni/os/sys_error.h"
#include "plugin/dra/cdi_spec.h"
#include "plugin/dra/claim_checkpoint.h"

namespace ibcni::dra {

class ClaimEffects {
 public:
  virtual ~ClaimEffects() = default;
  /// The checkpoint's lock, held across a whole Prepare or Unprepare.
  [[nodiscard]] virtual os::SysResult<os::FileLock> lock() = 0;
  [[nodiscard]] virtual os::SysResult<ClaimRecords> load() = 0;
  /// Replaces the checkpoint's records (a step).
  [[nodiscard]] virtual os::SysResult<void> store(const ClaimRecords& records) = 0;
  /// Writes claim `claimUid`'s CDI spec (a step).
  [[nodiscard]] virtual os::SysResult<void> writeSpec(const std::string& claimUid,
                                                      const std::vector<CdiDevice>& devices) = 0;
  /// Removes claim `claimUid`'s CDI spec; none is success (a step).
  [[nodiscard]] virtual os::SysResult<void> removeSpec(const std::string& claimUid) = 0;
};

/// The checkpoint file and the CDI spec folder.
class FileClaimEffects final : public ClaimEffects {
 public:
  FileClaimEffects(ClaimCheckpoint checkpoint, std::string cdiDir);

  [[nodiscard]] os::SysResult<os::FileLock> lock() override { return checkpoint_.lock(); }
  [[nodiscard]] os::SysResult<ClaimRecords> load() override { return checkpoint_.load(); }
  [[nodiscard]] os::SysResult<void> store(const ClaimRecords& records) override { return checkpoint_.store(records); }
  [[nodiscard]] os::SysResult<void> writeSpec(const std::string& claimUid,
                                              const std::vector<CdiDevice>& devices) override {
    return writeCdiSpec(cdiDir_, claimUid, devices);
  }
  [[nodiscard]] os::SysResult<void> removeSpec(const std::string& claimUid) override {
    return removeCdiSpec(cdiDir_, claimUid);
  }

 private:
  ClaimCheckpoint checkpoint_;
  std::string cdiDir_;
};

}  // namespace ibcni::dra
