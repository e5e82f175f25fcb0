// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ibcni/os/netns.h"

namespace ibcni::os {

/// What is known about the network namespace an attachment or an allocation was made for. One
/// rule for the embedded IPAM's reclaiming, ibcni's DEL and `ibcni reconcile`.
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

/// The rule, as `namespaces` shows them: kGone when the path is missing (while its directory is
/// visible), is not a network namespace, or is one with another inode than `inode` (0: not
/// compared); kAlive when it opens as the same namespace; kUnknown on anything else (no path, the
/// directory not visible from here, permission denied). Only kGone may be acted on. It must run
/// in the host's mount namespace, where the runtime created the paths.
[[nodiscard]] NetnsLiveness netnsLiveness(NetnsProvider& namespaces, const std::string& path, std::uint64_t inode);

/// The production checker: netnsLiveness() over the system's namespaces.
[[nodiscard]] std::shared_ptr<NetnsChecker> systemNetnsChecker();

/// A short word for logs and reports: "alive", "gone", "unknown".
[[nodiscard]] const char* toString(NetnsLiveness liveness);

}  // namespace ibcni::os
