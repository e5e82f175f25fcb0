// SPDX-License-Identifier: Apache-2.0
#include <cstdint>
#include <ctime>
#include <fmt/core.h>
#include <unistd.h>

#include "plugin/modes/attachment_mode.h"
#include "plugin/modes/ipoib_child.h"
#include "plugin/modes/sriov_netdev.h"
#include "plugin/modes/sriov_vf.h"
#include "plugin/modes/sriov_vfio.h"
#include "ibcni/os/random.h"

namespace ibcni::plugin {

// A random name (os/random.h: never std::random_device, which would raise the glibc floor).
std::string temporaryLinkName() {
  return fmt::format("ibc{:08x}", static_cast<std::uint32_t>(os::randomBits()));
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

namespace {

SriovVfioMode& vfioMode() {
  static SriovVfioMode vfio;
  return vfio;
}

}  // namespace

AttachmentMode& modeFor(const ModeContext& ctx) {
  const auto& conf = ctx.inv.conf;
  if (conf.mode != config::Mode::kSriov || conf.vfio == config::VfioUse::kOff) {
    return modeFor(conf.mode);
  }
  if (conf.vfio == config::VfioUse::kOn) {
    return vfioMode();
  }
  if (conf.deviceId) {
    if (auto driver = ctx.deps.devices.driverOf(*conf.deviceId); driver && SriovVfioMode::isVfioDriver(*driver)) {
      return vfioMode();
    }
  }
  return modeFor(conf.mode);
}

AttachmentMode* modeByName(std::string_view name) {
  for (auto mode : {config::Mode::kSriov, config::Mode::kIpoib}) {
    if (name == config::toString(mode)) {
      return &modeFor(mode);
    }
  }
  if (name == kVfioRecordMode) {
    return &vfioMode();
  }
  return nullptr;
}

}  // namespace ibcni::plugin
