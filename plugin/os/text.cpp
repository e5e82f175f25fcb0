// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/text.h"

namespace ibcni::os {

bool isPrintableText(std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      return false;
    }
    if (c < 0x80) {
      continue;
    }
    // A lead byte (C2-F4: no overlong two-byte form, nothing past U+10FFFF), then 1-3 continuation
    // bytes.
    const std::size_t more = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : 0;
    if (more == 0 || i + more >= text.size()) {
      return false;
    }
    for (std::size_t k = 1; k <= more; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) {
        return false;
      }
    }
    i += more;
  }
  return true;
}

}  // namespace ibcni::os
