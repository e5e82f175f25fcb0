// SPDX-License-Identifier: Apache-2.0
// ibcni-dra's record of its claims, in one JSON file under its plugin directory, written ahead of
// every host change (replaced in one durable step): a repeated Prepare answers from it, a restarted
// driver keeps its claims, and Unprepare (or the agent's pass) undoes what a killed Prepare began.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ibcni/os/file_lock.h"
#include "ibcni/os/sys_error.h"
#include "plugin/dra/claim_preparer.h"

namespace ibcni::dra {

/// What Prepare changes on one VF, each field written ahead of its change: what Unprepare (or a
/// Prepare that fails) puts back.
struct VfChange {
  std::string device;       ///< the device's name: the pool GUID's key (ifName)
  std::string pfName;       ///< the PF's netdev
  std::uint32_t vf = 0;     ///< N of the PF's virtfnN
  std::string pci;          ///< the VF's PCI address (the rebind)
  std::string guid;         ///< the GUID set as node and port GUID; "" none
  std::string oldNodeGuid;  ///< the VF's GUIDs before, put back by Unprepare (with guid)
  std::string oldPortGuid;
  std::optional<std::uint32_t> oldLinkState;  ///< nl::VfLinkState before linkState was set
  std::string guidPool;     ///< the pool the GUID was asked from ("" none) ...
  std::string guidPoolDir;  ///< ... and its store on this node
  bool operator==(const VfChange&) const = default;
};

/// One claim as recorded.
struct ClaimRecord {
  enum class State {
    kPreparing,  ///< incomplete (recorded ahead of Prepare's changes, or of Unprepare's): its devices
                 ///< may be partly changed, its CDI spec may exist; Prepare does it again in full
    kPrepared,   ///< done: `devices` is the answer
  };
  ClaimRef ref;
  State state = State::kPreparing;
  std::vector<PreparedDevice> devices;
  std::vector<VfChange> changes;  ///< the VFs Prepare changes, in order
  /// The boot the changes were made in (/proc/sys/kernel/random/boot_id): a reboot resets the VFs'
  /// GUIDs and link state, and empties /run (CDI specs, node-local GUID pools there).
  std::string bootId;
};

/// The records by claim uid.
using ClaimRecords = std::map<std::string, ClaimRecord>;

class ClaimCheckpoint {
 public:
  /// The checkpoint file `path` ("<plugin dir>/claims.json").
  explicit ClaimCheckpoint(std::string path);

  /// The records; none when the file does not exist. A file that is not a checkpoint is an error
  /// (EINVAL) naming it: the driver will not guess what its claims were.
  [[nodiscard]] os::SysResult<ClaimRecords> load() const;
  /// The checkpoint's lock ("<path>.lock"), held across a whole Prepare or Unprepare: in a rolling
  /// update two driver processes serve the kubelet at once and share this file.
  [[nodiscard]] os::SysResult<os::FileLock> lock() const;
  /// Replaces the file with `records`, durably, in one step.
  [[nodiscard]] os::SysResult<void> store(const ClaimRecords& records) const;

  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace ibcni::dra
