// SPDX-License-Identifier: Apache-2.0
#include "modes/attachment_mode.h"
#include "modes/sriov_netdev.h"

namespace ibcni::plugin {

AttachmentMode& modeFor(config::Mode mode) {
  static SriovNetdevMode sriov;
  switch (mode) {
    case config::Mode::kSriov:
      return sriov;
  }
  return sriov;
}

AttachmentMode* modeByName(std::string_view name) {
  for (auto mode : {config::Mode::kSriov}) {
    if (name == config::toString(mode)) {
      return &modeFor(mode);
    }
  }
  return nullptr;
}

}  // namespace ibcni::plugin
