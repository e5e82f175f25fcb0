// SPDX-License-Identifier: Apache-2.0
// Paths that come from a network configuration. ibcni runs as root on the node, while the
// configuration may be written by someone with far less power (a NetworkAttachmentDefinition in a
// namespace): a configured path must never make root write, create or truncate a file the
// configuration's author could not. The rules (docs/security.md, "The path rules"):
//  * spelling: absolute, at most kMaxConfigPath bytes, no "." or ".." component, no control
//    character (pathSpellingProblem);
//  * symbolic links are followed only when owned by root (or by the user ibcni runs as): a link
//    planted by anyone else is refused (every opener here);
//  * a state or data directory, and every directory above it, is owned by root (or ibcni's user)
//    and writable by nobody else, except a sticky directory such as /tmp above it; missing parts
//    are created 0755, the directory itself 0700 (openDirectory with trustedOwners);
//  * a log file ends in ".log", its directory exists, and the file is opened with
//    O_APPEND|O_NOFOLLOW and must be a regular file with a single link (openLogFile);
//  * a file ibcni only reads (device-info file, resolv.conf) must be a regular file: a FIFO would
//    block the plugin and a device node may act on open (readRegularFile).
#pragma once

#include <sys/types.h>
#include <cerrno>
#include <cstddef>
#include <string>
#include <string_view>

#include "ibcni/os/sys_error.h"
#include "ibcni/os/unique_fd.h"

namespace ibcni::os {

/// The longest configured path accepted (a config is not the place for PATH_MAX-sized paths).
inline constexpr std::size_t kMaxConfigPath = 1024;

/// The errno of a SysError that is a refusal by the rules above rather than a failed system call;
/// its `op` then says which component broke which rule.
inline constexpr int kPathRefused = EPERM;

/// True when `err` is a refusal by the rules above (see kPathRefused).
[[nodiscard]] inline bool isRefusal(const SysError& err) { return err.err == kPathRefused; }

/// What is wrong with the spelling of a configured path, or "" when nothing is: it must be
/// absolute, at most kMaxConfigPath bytes, without "." or ".." components and without control
/// characters (bytes below 0x20, and 0x7f).
[[nodiscard]] std::string pathSpellingProblem(std::string_view path);

/// What is wrong with the spelling of a configured log file, or "": pathSpellingProblem, and the
/// name ends in ".log" (which keeps every system file - /etc/shadow, authorized_keys, cron, sudoers
/// and systemd files, sysctls - out of reach).
[[nodiscard]] std::string logFileSpellingProblem(std::string_view path);

/// How openDirectory treats the directories it walks through.
struct DirPolicy {
  /// Every directory on the way must be owned by root or by the user ibcni runs as, and be
  /// writable by nobody else (group root excepted) unless it is sticky; the directory itself must
  /// not be writable by anyone else even when sticky. For directories ibcni keeps files in.
  bool trustedOwners = true;
  /// Create missing components: 0755 on the way, `mode` for the directory itself.
  bool create = false;
  mode_t mode = 0700;
};

/// Opens directory `path` one component at a time from "/", following only symbolic links owned
/// by root or by the user ibcni runs as, checking each directory against `policy`.
/// @return an O_RDONLY|O_DIRECTORY descriptor; kPathRefused naming the component and the rule it
///         breaks; otherwise the errno of the failing call (ENOENT, ENOTDIR, EACCES, ELOOP, ...).
[[nodiscard]] SysResult<UniqueFd> openDirectory(const std::string& path, const DirPolicy& policy);

/// Opens log file `path` for appending (created 0640 when missing): its spelling must pass
/// logFileSpellingProblem, its directory is opened by openDirectory (without owner checks, and
/// not created), and the file is opened with O_NOFOLLOW and must be a regular file with one link.
/// Nothing is opened (and no FIFO is waited for) when the name is taken by anything else.
/// @return kPathRefused naming the rule broken, or the errno of the failing call.
[[nodiscard]] SysResult<UniqueFd> openLogFile(const std::string& path);

/// Reads `path` (symbolic links followed) when it is a regular file of at most `maxBytes`.
/// Anything else is refused without being opened for reading: a FIFO would block, a device node
/// may act on open.
/// @return kPathRefused when it is not a regular file, EFBIG when larger, or the errno.
[[nodiscard]] SysResult<std::string> readRegularFile(const std::string& path, std::size_t maxBytes);

}  // namespace ibcni::os
