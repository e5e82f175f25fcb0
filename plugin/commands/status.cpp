// SPDX-License-Identifier: Apache-2.0
// STATUS (1.1.0): can ADD be serviced? 50 when not. Never relied on by the other verbs.
#include <cerrno>
#include <algorithm>
#include <filesystem>
#include <fcntl.h>
#include <unistd.h>

#include "ibcni/os/unique_fd.h"

#include "plugin/commands/commands.h"
#include "plugin/commands/common.h"
#include "ibcni/config/ipam_conf.h"
#include "plugin/delegate/exec.h"

namespace ibcni::plugin {

cni::Result<void> cmdStatus(const Invocation& inv, Deps& deps) {
  const auto& conf = inv.conf;
  // The state directory must be writable for ADD to record what it did: prove it with a probe file
  // (root passes access(2) checks even where it cannot write).
  if (auto r = prepareStateDir(conf, cni::Errc::kPluginNotAvailable); !r) {
    return r;
  }
  std::string probe = conf.stateDir + "/.status-probe-" + std::to_string(::getpid());
  auto fd = os::UniqueFd::open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (!fd) {
    return cni::fail(
        cni::Errc::kPluginNotAvailable,
        "stateDir = " + cni::quoted(conf.stateDir, 256) + " cannot be written: ADD could not record attachments",
        fd.error().describe());
  }
  ::unlink(probe.c_str());
  // A statically named device must be present (a deviceID normally arrives per pod at ADD time).
  if (!conf.device.empty()) {
    auto host = deps.netns.current();
    if (host && !deps.netlink.linkByName(*host, conf.device)) {
      auto store = deps.makeStore(conf.stateDir);
      auto records = store->list("");
      bool attached = records && std::any_of(records->begin(), records->end(), [&](const auto& r) {
                        return r.hostName == conf.device;
                      });
      return cni::fail(cni::Errc::kPluginNotAvailable,
                       "device = \"" + conf.device + "\" " +
                           (attached ? "is attached to a pod: no further ADD can be serviced"
                                     : "is not a network interface in the host namespace"));
    }
  }
  if (!conf.ipamType.empty()) {
    // The embedded IPAM runs inside ibcni: there is no binary to find, and STATUS may come with no
    // CNI_PATH at all (the spec lists it as optional there).
    if (conf.ipamType != config::kEmbeddedIpamType && delegate::findInPath(conf.ipamType, inv.args.path).empty()) {
      return cni::fail(cni::Errc::kPluginNotAvailable,
                       "ipam.type = \"" + conf.ipamType + "\" is not installed in CNI_PATH");
    }
    if (auto r = deps.ipam.status(ipamRequest(inv)); !r) {
      return r;
    }
  }
  return {};
}

}  // namespace ibcni::plugin
