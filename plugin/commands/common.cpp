// SPDX-License-Identifier: Apache-2.0
#include "plugin/commands/common.h"
#include "plugin/commands/device_info.h"
#include "plugin/commands/policy_routing.h"

#include <cerrno>

#include "ibcni/os/safe_path.h"
#include "lib/log/log.h"
#include "plugin/modes/sriov_vf_guid_pool.h"

namespace ibcni::plugin {

cni::Result<os::Netns> hostNetns(Deps& deps) {
  auto host = deps.netns.current();
  if (!host) {
    return std::unexpected(sysError(cni::Errc::kNetnsFailure, "cannot open ibcni's own network namespace", host.error()));
  }
  return std::move(*host);
}

namespace {

// The network namespace of PID 1: the node's own. A pod's namespace is never it (pods on the
// host network get no CNI call), whichever namespace ibcni itself was started in.
constexpr const char* kNodeNetns = "/proc/1/ns/net";

bool isNodeNetns(const os::Netns& ns, Deps& deps) {
  auto node = deps.netns.open(kNodeNetns);
  return node && ns.sameAs(*node);
}

}  // namespace

cni::Result<os::Netns> openPodNetns(const Invocation& inv, Deps& deps, const os::Netns& host) {
  const std::string& path = inv.args.netns;
  const std::string shown = "CNI_NETNS=" + cni::quoted(path, 256);
  auto ns = deps.netns.open(path);
  if (!ns) {
    if (ns.error().err == ENOENT) {
      return cni::fail(cni::Errc::kInvalidEnvironment,
                       shown + " does not exist: pass the path of the pod's network namespace", ns.error().describe());
    }
    if (ns.error().err == EINVAL) {
      return cni::fail(cni::Errc::kInvalidEnvironment,
                       shown +
                           " is not a network namespace: pass a path such as "
                           "/var/run/netns/<name> or /proc/<pid>/ns/net",
                       ns.error().describe());
    }
    return std::unexpected(sysError(cni::Errc::kInvalidEnvironment,
                                    "cannot open " + shown + ": pass the path of the pod's network namespace",
                                    ns.error()));
  }
  if (ns->sameAs(host)) {
    return cni::fail(cni::Errc::kInvalidEnvironment,
                     shown +
                         " is ibcni's own network namespace, not a pod's: refusing to move "
                         "host devices into it");
  }
  if (isNodeNetns(*ns, deps)) {
    return cni::fail(cni::Errc::kInvalidEnvironment,
                     shown +
                         " is the node's own network namespace (that of PID 1), not a pod's: refusing to "
                         "treat the host as the pod");
  }
  return std::move(*ns);
}

std::optional<os::Netns> openPodNetnsIfAlive(const std::string& path, std::uint64_t inode, Deps& deps,
                                             const os::Netns& host) {
  if (path.empty()) {
    return std::nullopt;
  }
  auto ns = deps.netns.open(path);
  if (!ns) {
    log::info("pod netns {} is gone ({}): only host-side cleanup is done", cni::quoted(path, 256),
              ns.error().describe());
    return std::nullopt;
  }
  if (inode != 0 && static_cast<std::uint64_t>(ns->inode()) != inode) {
    log::info("pod netns {} is another namespace than the pod's (inode {}, recorded {}): only host-side cleanup "
              "is done",
              cni::quoted(path, 256), static_cast<std::uint64_t>(ns->inode()), inode);
    return std::nullopt;
  }
  if (ns->sameAs(host) || isNodeNetns(*ns, deps)) {
    log::warn("CNI_NETNS={} is the node's or ibcni's own network namespace: treating the pod netns as gone",
              cni::quoted(path, 256));
    return std::nullopt;
  }
  return std::move(*ns);
}

cni::Result<void> prepareStateDir(const config::NetConf& conf, cni::Errc ioCode) {
  auto fd = os::openDirectory(conf.stateDir, os::DirPolicy{.trustedOwners = true, .create = true, .mode = 0700});
  if (!fd) {
    if (os::isRefusal(fd.error())) {
      return cni::fail(cni::Errc::kInvalidConfig,
                       "invalid stateDir = " + cni::quoted(conf.stateDir, 256) + ": " + fd.error().op +
                           "; use a directory only root can change, such as the default " +
                           std::string(config::kDefaultStateDir) + " (docs/security.md)");
    }
    return cni::fail(
        ioCode,
        "stateDir = " + cni::quoted(conf.stateDir, 256) + " cannot be opened or created: make it a writable directory",
        fd.error().describe());
  }
  return {};
}

cni::Result<Namespaces> openNamespaces(const Invocation& inv, Deps& deps) {
  auto host = hostNetns(deps);
  if (!host) {
    return std::unexpected(host.error());
  }
  auto pod = openPodNetns(inv, deps, *host);
  if (!pod) {
    return std::unexpected(pod.error());
  }
  return Namespaces{std::move(*host), std::move(*pod)};
}

cni::Result<os::Netns> hostNetnsWithStateDir(const Invocation& inv, Deps& deps) {
  auto host = hostNetns(deps);
  if (!host) {
    return std::unexpected(host.error());
  }
  if (auto r = prepareStateDir(inv.conf); !r) {
    return std::unexpected(r.error());
  }
  return std::move(*host);
}

cni::Result<os::FileLock> lockDevice(const Invocation& inv, Deps& deps, const std::string& key) {
  std::string path = inv.conf.stateDir + "/locks/" + key + ".lock";
  auto lock = os::FileLock::acquire(path, deps.lockTimeout);
  if (!lock) {
    if (lock.error().err == ETIMEDOUT) {
      return cni::fail(cni::Errc::kTryAgainLater,
                       "device " + key + " is locked by another ibcni invocation; try again later",
                       lock.error().describe());
    }
    return std::unexpected(sysError(cni::Errc::kStateFailure,
                                    "cannot take the device lock in stateDir = " + inv.conf.stateDir +
                                        ": make it a writable directory",
                                    lock.error()));
  }
  log::debug("locked device {}", key);
  return std::move(*lock);
}

std::string deviceKeyOf(const state::AttachmentRecord& record) {
  return record.deviceKey.empty() ? "netdev-" + record.hostName : record.deviceKey;
}

VerbsExpectations verbsExpectations(const config::NetConf& conf, const state::AttachmentRecord& record,
                                    std::vector<net::IpAddress> ips) {
  VerbsExpectations want;
  want.device = record.rdmaDevice;
  want.port = record.rdmaPort;
  want.pkey = record.pkey ? record.pkey : conf.pkey;
  want.ips = std::move(ips);
  want.qpProbe = conf.verbsCheck.qpProbe;
  if (!record.guidPoolDir.empty()) {
    want.poolGuid = record.guid;
    want.guidPool = record.guidPool;
  }
  return want;
}

void addFailure(std::vector<cni::Error>& errors, const cni::Result<void>& result) {
  if (!result) {
    errors.push_back(result.error());
  }
}

cni::Result<void> failuresAsOne(const std::vector<cni::Error>& errors) {
  if (!errors.empty()) {
    return std::unexpected(combine(errors));
  }
  return {};
}

cni::Result<void> releaseAttachment(const Invocation& inv, Deps& deps, const os::Netns& host,
                                    const std::optional<state::AttachmentRecord>& record, bool releaseIpam) {
  std::vector<cni::Error> errors;
  ModeContext ctx{inv, deps, host};
  // The policyRouting rules go with the pod's netns; while it lives they outlive the interface.
  // Without a record, the configuration says whether ADD may have made some.
  std::optional<os::Netns> pod;
  if (record) {
    pod = openPodNetnsIfAlive(record->netns, record->netnsInode, deps, host);
  } else if (inv.conf.policyRouting) {
    pod = openPodNetnsIfAlive(inv.args.netns, 0, deps, host);
  }
  if (pod) {
    addFailure(errors, removePolicyRules(inv, deps, *pod, record));
  }
  if (record) {
    if (auto* mode = modeByName(record->mode)) {
      addFailure(errors, mode->tearDown(ctx, *record, pod ? &*pod : nullptr));
    } else {
      errors.push_back(cni::Error{cni::Errc::kStateFailure,
                                  "the attachment record names mode \"" + record->mode +
                                      "\", which this ibcni does not know: DEL it with the ibcni that made it",
                                  {}});
    }
  }
  if (record) {
    removeDeviceInfo(deps, *record);
  } else {
    addFailure(errors, releaseConfiguredPoolGuid(inv, deps));
  }
  // The IPAM release runs even when the device could not be put back: the address must not leak.
  if (releaseIpam && !inv.conf.ipamType.empty()) {
    addFailure(errors, deps.ipam.del(ipamRequest(inv)));
  }
  return failuresAsOne(errors);
}

}  // namespace ibcni::plugin
