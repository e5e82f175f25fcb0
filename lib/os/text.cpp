// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/text.h"

#include <cstdio>

namespace ibcni::os {

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string joinText(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) {
      out += separator;
    }
    out += parts[i];
  }
  return out;
}

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

namespace {

constexpr std::string_view kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace


std::string base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(in[i]) << 16U) | (static_cast<unsigned char>(in[i + 1]) << 8U) |
                       static_cast<unsigned char>(in[i + 2]);
    out += kB64[(v >> 18U) & 63U];
    out += kB64[(v >> 12U) & 63U];
    out += kB64[(v >> 6U) & 63U];
    out += kB64[v & 63U];
  }
  if (i < in.size()) {
    unsigned v = static_cast<unsigned>(static_cast<unsigned char>(in[i])) << 16U;
    if (i + 1 < in.size()) {
      v |= static_cast<unsigned>(static_cast<unsigned char>(in[i + 1])) << 8U;
    }
    out += kB64[(v >> 18U) & 63U];
    out += kB64[(v >> 12U) & 63U];
    out += i + 1 < in.size() ? kB64[(v >> 6U) & 63U] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> base64Decode(std::string_view in) {
  if (in.size() % 4 != 0) {
    return std::nullopt;
  }
  std::string out;
  unsigned acc = 0;
  int bits = 0;
  std::size_t pad = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '=') {
      if (i + 2 < in.size()) {
        return std::nullopt;
      }
      ++pad;
      continue;
    }
    if (pad != 0) {
      return std::nullopt;
    }
    const auto pos = kB64.find(c);
    if (pos == std::string_view::npos) {
      return std::nullopt;
    }
    acc = (acc << 6U) | static_cast<unsigned>(pos);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> static_cast<unsigned>(bits)) & 0xFFU);
    }
  }
  return out;
}

}  // namespace ibcni::os
