// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "ibcni/state/attachment_store.h"

namespace ibcni::state {

/// Records as JSON files: <dir>/attachments/<network>/<containerId>/<ifName>.json, mode 0600.
class FileAttachmentStore final : public AttachmentStore {
 public:
  explicit FileAttachmentStore(std::string dir) : dir_(std::move(dir)) {}

  os::SysResult<void> save(const AttachmentRecord& record) override { return write(record, true); }
  os::SysResult<void> saveVolatile(const AttachmentRecord& record) override { return write(record, false); }
  os::SysResult<std::optional<AttachmentRecord>> load(const std::string& network, const std::string& containerId,
                                                      const std::string& ifName) override;
  os::SysResult<void> remove(const std::string& network, const std::string& containerId,
                             const std::string& ifName) override;
  os::SysResult<std::vector<AttachmentRecord>> list(const std::string& network) override;

  /// The file a record lives in.
  [[nodiscard]] std::string pathOf(const std::string& network, const std::string& containerId,
                                   const std::string& ifName) const;

  /// Encodes/decodes a record (exposed for tests of format compatibility).
  [[nodiscard]] static std::string encode(const AttachmentRecord& record);
  [[nodiscard]] static os::SysResult<AttachmentRecord> decode(const std::string& text, const std::string& origin);

 private:
  /// Writes the record atomically (temporary file, rename); `durable`: fsync the file and the
  /// directory too.
  os::SysResult<void> write(const AttachmentRecord& record, bool durable);
  std::string dir_;
};

}  // namespace ibcni::state
