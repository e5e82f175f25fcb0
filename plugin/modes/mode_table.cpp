// SPDX-License-Identifier: Apache-2.0
#include <cstdint>
#include <fmt/core.h>
#include <random>

#include "modes/attachment_mode.h"
#include "modes/ipoib_child.h"
#include "modes/sriov_netdev.h"

namespace ibcni::plugin {

std::string temporaryLinkName() {
  static std::mt19937 rng{std::random_device{}()};
  return fmt::format("ibc{:08x}", static_cast<std::uint32_t>(rng()));
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
