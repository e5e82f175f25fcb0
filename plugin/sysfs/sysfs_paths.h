// SPDX-License-Identifier: Apache-2.0
// The small file-system steps every sysfs reader of this folder takes: reading an attribute as
// libibverbs does, listing a directory, resolving a link, and recognising a PCI function's name.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/net/ip.h"
#include "ibcni/os/sys_error.h"
#include "ibcni/os/unique_fd.h"

namespace ibcni::sysfs {

/// The size of a sysfs attribute page: the kernel never shows more than this in one attribute.
inline constexpr std::size_t kSysfsPageSize = 4096;

/// Reads a small sysfs attribute file the way libibverbs does: opened O_RDONLY|O_CLOEXEC, one
/// trailing newline stripped, and a failure rather than a truncated value when the file holds
/// more than `maxBytes`.
/// @return the contents; SysError{errno, "read <path>"} when open or read fails, EOVERFLOW when
///         the file is longer than `maxBytes`.
[[nodiscard]] os::SysResult<std::string> readSysfsFile(const std::string& path,
                                                       std::size_t maxBytes = kSysfsPageSize);

namespace detail {

/// Opens directory `rel` below `dirFd` (or the absolute path `rel` with AT_FDCWD); `shown` names
/// it in errors.
[[nodiscard]] os::SysResult<os::UniqueFd> openDirAt(int dirFd, const std::string& rel, const std::string& shown);
/// Names in directory `rel` below `dirFd`, without "." and "..", in readdir order.
[[nodiscard]] os::SysResult<std::vector<std::string>> listDirAt(int dirFd, const std::string& rel,
                                                                const std::string& shown);
/// realpath(3) with the errno kept.
[[nodiscard]] os::SysResult<std::string> realPath(const std::string& path);
/// What follows the last '/' (all of `path` without one).
[[nodiscard]] std::string_view lastComponent(std::string_view path);
/// What precedes the last '/' ("" without one).
[[nodiscard]] std::string_view parentPath(std::string_view path);
/// `component` as a PCI address when it is one in the kernel's own spelling ("dddd:bb:dd.f",
/// lower case): sysfs names PCI devices only that way, and the strict form keeps other device
/// names that happen to parse ("1-1:1.0" does not, but a short form could) from matching.
[[nodiscard]] std::optional<net::PciAddress> canonicalPci(std::string_view component);
/// Shortens `text` for an error message: sysfs files can be a page long.
[[nodiscard]] std::string excerpt(std::string_view text);

}  // namespace detail

}  // namespace ibcni::sysfs
