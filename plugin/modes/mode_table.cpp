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

}  // namespace ibcni::plugin
