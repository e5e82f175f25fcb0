// SPDX-License-Identifier: Apache-2.0
// The attachment record written ahead of a mode's changes to the node. A process killed between
// two steps of ADD (SIGKILL, the OOM killer, a node-wide timeout) runs no undo: what it changed is
// known to the next DEL only through this record. So every change DEL could not find or undo by
// itself (a VF's GUIDs and link state on its PF, an RDMA device moved, an IPoIB child under its
// temporary name) is written here, with the value it replaces, before it is made.
#pragma once

#include <memory>

#include "ibcni/cni/error.h"
#include "ibcni/os/rollback.h"
#include "ibcni/state/attachment_store.h"
#include "plugin/modes/attachment_mode.h"

namespace ibcni::plugin {

class RecordAhead {
 public:
  RecordAhead(const ModeContext& ctx, state::AttachmentRecord& record, os::Rollback& rollback)
      : ctx_(ctx), record_(record), rollback_(rollback) {}

  /// Writes the record as it is now (not fsync()ed: it is for a process that dies, not for a node
  /// that does, whose reboot ends the pod; ADD's final record is). The first call refuses an
  /// attachment that already has a record (error 103) and registers the record's removal on the
  /// rollback, so it runs after the undos of every change registered later.
  [[nodiscard]] cni::Result<void> save();

 private:
  const ModeContext& ctx_;
  state::AttachmentRecord& record_;
  os::Rollback& rollback_;
  std::shared_ptr<state::AttachmentStore> store_;
};

}  // namespace ibcni::plugin
