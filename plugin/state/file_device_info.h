// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <vector>

#include "ibcni/state/device_info_file.h"

namespace ibcni::state {

/// Device-info files on the node's filesystem, under `roots` (each ending in '/'; production:
/// defaultDeviceInfoRoots()). Files are written mode 0444 (as the NPWG client library writes them),
/// missing directories are created 0700 (the parents on the way 0755).
class FileDeviceInfoFiles final : public DeviceInfoFiles {
 public:
  explicit FileDeviceInfoFiles(std::vector<std::string> roots = defaultDeviceInfoRoots()) : roots_(std::move(roots)) {}

  os::SysResult<Presence> check(const std::string& path) override;
  os::SysResult<bool> create(const std::string& path, const DeviceInfo& info) override;
  os::SysResult<void> remove(const std::string& path) override;

  /// The JSON document ibcni writes for `info` (spec section 3), followed by a newline.
  [[nodiscard]] static std::string encode(const DeviceInfo& info);

 private:
  /// What is wrong with `path` as a place for a device-info file (spelling, outside the roots), or "".
  [[nodiscard]] std::string placeProblem(const std::string& path) const;
  std::vector<std::string> roots_;
};

}  // namespace ibcni::state
