// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "ibcni/os/sys_error.h"

namespace ibcni::os {

/// Reads `fd` to its end, retrying on EINTR.
/// @param what  names the file in errors ("read <what>")
/// @return EFBIG when there is more than `maxBytes`.
[[nodiscard]] SysResult<std::string> readAllFd(int fd, std::size_t maxBytes, const std::string& what);

/// Reads the whole file at `path` (opened O_RDONLY|O_CLOEXEC).
/// @return the errno of open/read, or EFBIG when it is larger than `maxBytes`.
[[nodiscard]] SysResult<std::string> readFile(const std::string& path, std::size_t maxBytes);

/// Writes all of `data` to `fd`, retrying on EINTR and short writes.
[[nodiscard]] SysResult<void> writeAll(int fd, std::string_view data, const std::string& what);

/// fsync(2) of a directory, so that a rename or an unlink in it is durable.
[[nodiscard]] SysResult<void> fsyncDirectory(const std::string& dir);

}  // namespace ibcni::os
