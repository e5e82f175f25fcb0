// SPDX-License-Identifier: Apache-2.0
// The per-interface network sysctls of a namespace: /proc/sys/net/{ipv4,ipv6}/conf/<if>/<key>.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ibcni/os/netns.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::sysfs {

/// Reads and writes one interface's sysctls in a given namespace. The sysctls of /proc/sys/net are
/// those of the namespace a file is opened in, so each call enters `ns` on the calling thread for
/// the open (os::NetnsGuard) and returns. (Beside sysfs: /proc/sys is the kernel's other file tree
/// of device settings.)
class NetSysctls {
 public:
  virtual ~NetSysctls() = default;
  /// The value of `key` of interface `ifName` in `ns`, without its newline.
  /// @param family "ipv4" or "ipv6"
  /// @return ENOENT when the interface (or the key) does not exist; EINVAL for a family, interface
  ///         name or key that cannot name such a file.
  [[nodiscard]] virtual os::SysResult<std::string> get(const os::Netns& ns, std::string_view family, const std::string& ifName,
                                                   const std::string& key) = 0;
  /// Sets `key` of interface `ifName` in `ns` to `value`. Errors as get's.
  [[nodiscard]] virtual os::SysResult<void> set(const os::Netns& ns, std::string_view family, const std::string& ifName,
                                            const std::string& key, const std::string& value) = 0;
};

/// The system's: /proc/sys/net of each namespace.
[[nodiscard]] std::unique_ptr<NetSysctls> systemNetSysctls();

}  // namespace ibcni::sysfs
