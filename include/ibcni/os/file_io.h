// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

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

/// fsync(2) of an open file or directory; errors name it as `what` ("fsync <what>").
[[nodiscard]] SysResult<void> fsyncFd(int fd, const std::string& what);

/// fsync(2) of a directory, so that a rename or an unlink in it is durable.
[[nodiscard]] SysResult<void> fsyncDirectory(const std::string& dir);

/// The names in the directory open as `dirFd` (without "." and ".."), read from its start with
/// getdents64(2) on that descriptor itself; errors name it as `what`.
[[nodiscard]] SysResult<std::vector<std::string>> listDirectoryAt(int dirFd, const std::string& what);

/// A name in a directory open as `dirFd`; `shown` is the path errors name.
struct FileAt {
  int dirFd;
  std::string name;
  std::string shown;
};

/// How writeFileAtomic makes a file: `durable` (the default) flushes the file before its rename
/// and the directory after it, so that the new content survives a crash of the machine; without
/// it, a crash of the process still leaves the old content or the new, never a mix.
struct AtomicWrite {
  bool durable = true;
  /// The temporary file next to the target: its name plus this (default ".tmp.<pid>").
  std::string tmpSuffix = {};
};

/// Replaces the file `target` with `data` in one step: writes the temporary file `temp` (created
/// 0600, O_NOFOLLOW: never through a symbolic link), fsyncs it, renames it over `target` and
/// fsyncs `target`'s directory. A reader sees the old content or the new one, never a torn file.
/// On failure the temporary file is removed and `target` is as it was.
[[nodiscard]] SysResult<void> writeFileAtomicAt(const FileAt& temp, const FileAt& target, std::string_view data,
                                                bool durable = true);

/// writeFileAtomicAt for a path: the temporary file is in the same directory.
[[nodiscard]] SysResult<void> writeFileAtomic(const std::string& path, std::string_view data,
                                              const AtomicWrite& how = {});

}  // namespace ibcni::os
