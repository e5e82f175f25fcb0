// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>

namespace ibcni::ipam {

/// What is known about the network namespace an allocation was made for.
enum class NetnsLiveness {
  kAlive,    ///< the path is still the same network namespace: the pod may be running
  kGone,     ///< the path is missing, is no longer a network namespace, or is another one
  kUnknown,  ///< cannot tell (no path recorded, permission denied, ...): treated as alive
};

/// Answers "does this pod's network namespace still exist?" for reclaiming leaked addresses.
/// Injectable so that unit tests need no real namespaces.
class NetnsChecker {
 public:
  virtual ~NetnsChecker() = default;
  /// The inode of the network namespace at `path`, recorded at ADD so that a path reused by a
  /// later namespace is not mistaken for the original. 0 when it cannot be determined.
  [[nodiscard]] virtual std::uint64_t identify(const std::string& path) = 0;
  /// Whether the namespace recorded as (`path`, `inode`) still exists; `inode` 0 skips the
  /// identity comparison.
  [[nodiscard]] virtual NetnsLiveness check(const std::string& path, std::uint64_t inode) = 0;
};

}  // namespace ibcni::ipam
