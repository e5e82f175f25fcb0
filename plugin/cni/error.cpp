// SPDX-License-Identifier: Apache-2.0
#include "ibcni/cni/error.h"

namespace ibcni::cni {

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

std::string quoted(std::string_view value, std::size_t maxBytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::size_t shown = value.size() < maxBytes ? value.size() : maxBytes;
  std::string out;
  out.reserve(shown + 2);
  out += '"';
  for (std::size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  if (shown < value.size()) {
    out += "... (" + std::to_string(value.size()) + " bytes)";
  }
  return out;
}

}  // namespace ibcni::cni
