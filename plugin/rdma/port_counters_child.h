// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/cni/error.h"
#include "ibcni/os/netns.h"
#include "plugin/rdma/port_counters.h"

namespace ibcni::rdma {

/// Reads `ports` in a forked child that joins `ns` (setns CLONE_NEWNET), and, with
/// source.mountFreshSysfs, unshares its mount namespace, makes every mount private and mounts a
/// fresh sysfs on source.netnsSysfsRoot, which then shows the RDMA devices of `ns`; then
/// readPortCountersAt(source.netnsSysfsRoot, ...) for each port, sent back over a pipe
/// (encodePortCounters). The calling thread never changes namespace. The child gets SIGKILL when
/// source.timeout has passed (or the parent dies) and is always reaped before this returns.
/// @param netnsPath what messages call `ns`.
/// @return one result per port, in order; a failure of the child as a whole (setns, mount,
///         timeout, an answer that does not decode) is the result of every port.
[[nodiscard]] std::vector<cni::Result<PortCounters>> readInNetnsChild(const os::Netns& ns,
                                                                      const std::string& netnsPath,
                                                                      const std::vector<PortRef>& ports,
                                                                      const CounterSource& source);

/// The child's answer, one line per fact: "port DEV N", then "state N", "counter NAME VALUE",
/// "hw NAME VALUE", "skipped NAME" or "error CODE MSG" and "details TEXT", and "end". Newlines in
/// names and texts become spaces, spaces in names '?'.
[[nodiscard]] std::string encodePortCounters(const std::vector<cni::Result<PortCounters>>& results);

/// encodePortCounters' inverse. @return nullopt for anything it does not write.
[[nodiscard]] std::optional<std::vector<cni::Result<PortCounters>>> decodePortCounters(std::string_view text);

}  // namespace ibcni::rdma
