// SPDX-License-Identifier: Apache-2.0
#include <cstdint>
#include <ctime>
#include <fmt/core.h>
#include <sys/random.h>
#include <unistd.h>

#include "modes/attachment_mode.h"
#include "modes/ipoib_child.h"
#include "modes/sriov_netdev.h"

namespace ibcni::plugin {

// 32 random bits from getrandom(2) (glibc 2.25), not std::random_device: GCC 12's libstdc++ built
// on glibc 2.36 implements it with arc4random, which alone would raise the plugin's glibc floor to
// 2.36 and keep it off Ubuntu 22.04 (deploy/check-portable.sh). Falls back to pid and clock if
// the entropy pool is not ready yet, which is enough to avoid a collision between two ADDs.
std::string temporaryLinkName() {
  std::uint32_t bits = 0;
  if (getrandom(&bits, sizeof bits, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof bits)) {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    bits = static_cast<std::uint32_t>(getpid()) * 2654435761U ^ static_cast<std::uint32_t>(now.tv_nsec);
  }
  return fmt::format("ibc{:08x}", bits);
}

state::AttachmentRecord recordFor(const Invocation& inv) {
  state::AttachmentRecord r;
  r.network = inv.conf.name;
  r.containerId = inv.args.containerId;
  r.ifName = inv.args.ifName;
  r.netns = inv.args.netns;
  r.mode = config::toString(inv.conf.mode);
  r.config = inv.rawStdin;
  r.cniArgs = inv.args.rawArgs;
  r.cniPath = inv.args.path;
  return r;
}

AttachmentMode& modeFor(config::Mode mode) {
  static SriovNetdevMode sriov;
  static IpoibChildMode ipoib;
  switch (mode) {
    case config::Mode::kSriov:
      return sriov;
    case config::Mode::kIpoib:
      return ipoib;
  }
  return sriov;
}

AttachmentMode* modeByName(std::string_view name) {
  for (auto mode : {config::Mode::kSriov, config::Mode::kIpoib}) {
    if (name == config::toString(mode)) {
      return &modeFor(mode);
    }
  }
  return nullptr;
}

}  // namespace ibcni::plugin
