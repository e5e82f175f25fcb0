// SPDX-License-Identifier: Apache-2.0
#include "ibcni/net/pkey.h"

#include <cstdio>

namespace ibcni::net {

std::expected<Pkey, Pkey::ParseError> Pkey::parseOrExplain(std::string_view text) {
  std::string_view digits = text;
  std::uint64_t base = 10;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    digits.remove_prefix(2);
    base = 16;
  }
  // Eight digits hold any 32-bit value: the check beyond 16 bits below never overflows.
  if (digits.empty() || digits.size() > 8) {
    return std::unexpected(ParseError::kBadLength);
  }
  std::uint64_t v = 0;
  for (char ch : digits) {
    std::uint64_t d;
    if (ch >= '0' && ch <= '9') {
      d = static_cast<std::uint64_t>(ch - '0');
    } else if (base == 16 && ch >= 'a' && ch <= 'f') {
      d = static_cast<std::uint64_t>(ch - 'a' + 10);
    } else if (base == 16 && ch >= 'A' && ch <= 'F') {
      d = static_cast<std::uint64_t>(ch - 'A' + 10);
    } else {
      return std::unexpected(ParseError::kNotANumber);
    }
    v = v * base + d;
  }
  if (v > 0xffff) {
    return std::unexpected(ParseError::kOver16Bits);
  }
  const Pkey p = fromWire(static_cast<std::uint16_t>(v));
  if (!p.valid()) {
    return std::unexpected(ParseError::kInvalidKey);
  }
  return p;
}

std::optional<Pkey> Pkey::parse(std::string_view text) {
  auto p = parseOrExplain(text);
  return p ? std::optional<Pkey>(*p) : std::nullopt;
}

std::string Pkey::hex() const {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%04x", static_cast<unsigned>(wire_));
  return buf;
}

}  // namespace ibcni::net
