// SPDX-License-Identifier: Apache-2.0
// Pieces shared by the verbs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plugin/deps.h"
#include "ibcni/cni/error.h"
#include "ibcni/ipam/ipam.h"
#include "ibcni/os/file_lock.h"
#include "ibcni/os/netns.h"
#include "ibcni/os/sys_error.h"
#include "plugin/invocation.h"
#include "plugin/modes/attachment_mode.h"
#include "plugin/modes/verbs_check.h"

namespace ibcni::plugin {

/// The namespace ibcni runs in (the host's).
/// @return error 105 when it cannot be opened.
[[nodiscard]] cni::Result<os::Netns> hostNetns(Deps& deps);

/// ADD and CHECK: ibcni's own network namespace and the pod's (CNI_NETNS, as openPodNetns opens it).
struct Namespaces {
  os::Netns host;
  os::Netns pod;
};
[[nodiscard]] cni::Result<Namespaces> openNamespaces(const Invocation& inv, Deps& deps);

/// DEL and GC: ibcni's own network namespace, once stateDir is prepared (prepareStateDir).
[[nodiscard]] cni::Result<os::Netns> hostNetnsWithStateDir(const Invocation& inv, Deps& deps);

/// Opens CNI_NETNS for ADD and CHECK: it must exist, be a network namespace and not be ibcni's own.
/// @return error 4 naming CNI_NETNS and what is wrong with it.
[[nodiscard]] cni::Result<os::Netns> openPodNetns(const Invocation& inv, Deps& deps, const os::Netns& host);

/// Opens `path` for DEL, GC and reconcile, where a missing, empty or invalid path means "the pod is
/// gone", and so does a path that now names another namespace than the one recorded at ADD
/// (`inode`, 0: unknown, not compared).
[[nodiscard]] std::optional<os::Netns> openPodNetnsIfAlive(const std::string& path, std::uint64_t inode, Deps& deps,
                                                           const os::Netns& host);

/// Makes sure `stateDir` is a directory only root can change, creating it (0700) when missing,
/// before any record or lock is written in it: only root's symbolic links are followed on the way
/// and every directory is root's and writable by no one else (os/safe_path.h,
/// docs/security.md).
/// @return error 7 naming stateDir and the rule broken; `ioCode` when a system call fails.
[[nodiscard]] cni::Result<void> prepareStateDir(const config::NetConf& conf,
                                                cni::Errc ioCode = cni::Errc::kStateFailure);

/// Takes the lock that serializes all work on one device (<stateDir>/locks/<key>.lock).
/// @return error 11 when another invocation held it for the whole timeout.
[[nodiscard]] cni::Result<os::FileLock> lockDevice(const Invocation& inv, Deps& deps, const std::string& key);

/// The device lock a record's attachment holds: its deviceKey, or "netdev-<host name>" for a
/// record that keeps none.
[[nodiscard]] std::string deviceKeyOf(const state::AttachmentRecord& record);

/// What the verbs check expects of the port behind an attachment: `record`'s RDMA device and port,
/// its pkey (else the configuration's), a RoCE v2 GID for each of `ips`, and the QP probe when
/// verbsCheck asks for it.
[[nodiscard]] VerbsExpectations verbsExpectations(const config::NetConf& conf, const state::AttachmentRecord& record,
                                                  std::vector<net::IpAddress> ips);

/// For a verb that keeps going past failures: adds `result`'s error to `errors` when it failed.
void addFailure(std::vector<cni::Error>& errors, const cni::Result<void>& result);

/// Success when `errors` is empty, else all of them as one error (cni::combine).
[[nodiscard]] cni::Result<void> failuresAsOne(const std::vector<cni::Error>& errors);

/// Undoes one attachment: mode tear-down, then delegated IPAM DEL, then the record. Keeps going
/// after a failure so that as much as possible is released, and reports every failure.
/// @param conf  the configuration whose IPAM to release (DEL: the request's; GC: the request's)
[[nodiscard]] cni::Result<void> releaseAttachment(const Invocation& inv, Deps& deps, const os::Netns& host,
                                                  const std::optional<state::AttachmentRecord>& record,
                                                  bool releaseIpam);

}  // namespace ibcni::plugin
