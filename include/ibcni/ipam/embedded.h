// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/cni/error.h"
#include "ibcni/ipam/ipam.h"

namespace ibcni::ipam {

/// The ipam.type that selects the embedded IPAM, in process or as the ibcni-ipam executable.
inline constexpr std::string_view kEmbeddedIpamType = "ibcni-ipam";

/// Where the embedded IPAM keeps its allocations unless ipam.dataDir says otherwise: on tmpfs, so
/// that a reboot (which ends every pod) also frees every address.
inline constexpr std::string_view kDefaultIpamDataDir = "/run/ibcni-ipam";

/// The error code for "no free address in a range set" (108).
inline constexpr cni::Errc kIpamExhausted = cni::Errc::kIpamExhausted;

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

/// The production checker, built on os::Netns::open: kGone when the path is missing (while its
/// directory exists), is not a network namespace, or has another inode; kUnknown on any other
/// error. It must run in the host's mount namespace, where the runtime created the paths.
[[nodiscard]] std::shared_ptr<NetnsChecker> systemNetnsChecker();

/// How an EmbeddedIpam is built; every field has a production default.
struct EmbeddedIpamOptions {
  std::string defaultDataDir = std::string(kDefaultIpamDataDir);     ///< used when ipam.dataDir is absent
  std::chrono::milliseconds lockTimeout = std::chrono::seconds(30);  ///< wait for the network's lock
  std::shared_ptr<NetnsChecker> netnsChecker;                        ///< null: systemNetnsChecker()
  std::function<std::chrono::system_clock::time_point()> clock;      ///< null: system_clock::now
};

/// One allocation released by GC or by reclaiming, for reports and logs.
struct ReleasedAllocation {
  std::string containerId;
  std::string ifName;
  std::string pod;  ///< "namespace/name", empty outside Kubernetes
  std::string netns;
  std::vector<std::string> addresses;
};

/// The embedded IPAM: host-local's configuration and results, plus exclusions, per-pod
/// reservations, crash-safe storage whose ADD cost does not grow as the pool fills, and
/// reclaiming of addresses whose pod's network namespace is gone.
///
/// Each call reads its network configuration from Request::rawConfig (the `name` and `ipam`
/// keys, runtimeConfig.ips, args.cni.ips, prevResult, cni.dev/valid-attachments) and the
/// attachment and pod identity from Request::args (CNI_CONTAINERID, CNI_IFNAME, CNI_NETNS,
/// CNI_ARGS). Allocations live in <dataDir>/<network name>; one lock file there serializes every
/// process using the network.
///
/// Error codes: 4 (CNI_ARGS or container ID/ifname invalid), 5 (store unreadable, corrupt or not
/// writable: the message names the file), 6/7 (configuration; the message names the field path),
/// 11 (lock busy past the timeout, or a requested/reserved address is held by a live attachment),
/// 50 (STATUS: cannot allocate), 107 (CHECK: no addresses held), 108 (a range set is exhausted).
class EmbeddedIpam final : public Ipam {
 public:
  explicit EmbeddedIpam(EmbeddedIpamOptions options = {});

  /// Allocates one address from each range set (idempotent per containerID and ifname) and
  /// returns what host-local would: ips (address with the subnet's prefix, gateway), routes and dns.
  [[nodiscard]] cni::Result<cni::AddResult> add(const Request& request) override;
  /// Releases what the attachment holds; succeeds when it holds nothing.
  [[nodiscard]] cni::Result<void> del(const Request& request) override;
  /// Fails (107) unless the attachment holds an address in every range set (and, when
  /// prevResult is given, each of them is in prevResult.ips).
  [[nodiscard]] cni::Result<void> check(const Request& request) override;
  /// Releases every allocation of the network not in cni.dev/valid-attachments.
  [[nodiscard]] cni::Result<void> gc(const Request& request) override;
  /// Fails (50) when the data directory is not writable or a range set has no free address.
  [[nodiscard]] cni::Result<void> status(const Request& request) override;

  /// Releases every allocation of the network whose network namespace is gone (the `gc`
  /// subcommand of ibcni-ipam, run by hand or by a timer). Allocations whose namespace exists or
  /// cannot be checked are kept.
  [[nodiscard]] cni::Result<std::vector<ReleasedAllocation>> reclaim(const Request& request);

 private:
  EmbeddedIpamOptions options_;
};

}  // namespace ibcni::ipam
