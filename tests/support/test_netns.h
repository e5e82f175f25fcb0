// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ibcni/os/netns.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::testing {

/// A random interface name: `prefix` followed by hex digits, 15 bytes at most, so that tests
/// running at the same time never collide.
[[nodiscard]] std::string randomIfName(std::string_view prefix = "t");

/// True when `err` means "this process may not create or enter namespaces" (EPERM, EACCES):
/// netns tests then GTEST_SKIP with the error's text instead of failing.
[[nodiscard]] bool isPermissionError(const os::SysError& err);

/// A fresh network namespace bound to a file in its own temporary directory (like
/// `ip netns add`, but under $TMPDIR), so that it has a path usable as CNI_NETNS.
/// The destructor closes the handle, unmounts the file, and removes the file and the
/// directory, also when the test failed. The kernel frees the namespace once nothing else
/// holds it (an open fd, a process, a netlink socket created in it).
/// Creating one never touches the calling thread's namespace.
class TestNetns {
 public:
  /// @param label the file name inside the temporary directory (shows up in paths and errors).
  /// @return EPERM/EACCES without privileges (see isPermissionError), or the failing call's errno.
  [[nodiscard]] static os::SysResult<TestNetns> create(std::string_view label = "netns");

  TestNetns(TestNetns&& other) noexcept;
  TestNetns& operator=(TestNetns&& other) noexcept;
  TestNetns(const TestNetns&) = delete;
  TestNetns& operator=(const TestNetns&) = delete;
  ~TestNetns();

  /// The bind-mounted namespace file.
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// An open handle on the namespace (path() is its path).
  [[nodiscard]] const os::Netns& netns() const noexcept { return netns_; }

  /// Runs `fn` with the calling thread inside this namespace and returns to the original one
  /// afterwards (std::abort() if that fails, see os::NetnsGuard).
  /// @return fn's result, or the setns error.
  template <class F>
  [[nodiscard]] auto run(F&& fn) const -> os::SysResult<std::invoke_result_t<F>> {
    auto guard = os::NetnsGuard::enter(netns_);
    if (!guard) {
      return std::unexpected(guard.error());
    }
    if constexpr (std::is_void_v<std::invoke_result_t<F>>) {
      std::forward<F>(fn)();
      return {};
    } else {
      return std::forward<F>(fn)();
    }
  }

 private:
  TestNetns(std::string dir, std::string path, os::Netns netns)
      : dir_(std::move(dir)), path_(std::move(path)), netns_(std::move(netns)) {}
  void destroy() noexcept;

  std::string dir_;   // temporary directory; empty after a move
  std::string path_;  // dir_/label, the bind mount
  os::Netns netns_;
};

/// Makes `ns` the calling thread's network namespace (the test's "host") until destroyed, then
/// returns to the namespace the thread was in. Use it so that a test of code that acts on "the
/// current namespace" never reaches the machine's real one.
class [[nodiscard]] ScopedHostNetns {
 public:
  /// @return the setns error (EPERM without CAP_SYS_ADMIN).
  [[nodiscard]] static os::SysResult<ScopedHostNetns> enter(const os::Netns& ns);
  ScopedHostNetns(ScopedHostNetns&&) noexcept = default;
  ScopedHostNetns& operator=(ScopedHostNetns&&) = delete;
  ScopedHostNetns(const ScopedHostNetns&) = delete;
  ScopedHostNetns& operator=(const ScopedHostNetns&) = delete;
  ~ScopedHostNetns() = default;

 private:
  explicit ScopedHostNetns(os::NetnsGuard guard) : guard_(std::move(guard)) {}
  os::NetnsGuard guard_;
};

/// Runs iproute2's `ip` with `args` inside `ns` (the child process enters it; the caller's
/// thread does not move). A path argument naming another namespace may be written as
/// nsArg(otherNs), which stays valid for the child.
/// @return ip's standard output, or EIO with op naming the command and extAck holding ip's
///         standard error when it exits non-zero.
[[nodiscard]] os::SysResult<std::string> runIp(const os::Netns& ns,
                                               const std::vector<std::string>& args);

/// A path through which a child process of this one reaches `ns`:
/// /proc/<this pid>/fd/<ns.fd()>.
[[nodiscard]] std::string nsArg(const os::Netns& ns);

/// Creates a veth pair: `nameA` in `nsA` and its peer `nameB` in `nsB` (which may be the same
/// namespace). Both ends are created directly in their namespaces, down, MTU 1500.
/// When both are in the same namespace the peer gets the lower index.
[[nodiscard]] os::SysResult<void> createVethPair(const os::Netns& nsA, const std::string& nameA,
                                                 const os::Netns& nsB, const std::string& nameB);

}  // namespace ibcni::testing
