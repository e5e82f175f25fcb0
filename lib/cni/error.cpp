// SPDX-License-Identifier: Apache-2.0
#include "ibcni/cni/error.h"

namespace ibcni::cni {

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

Error sysError(Errc code, std::string msg, const os::SysError& err) {
  return Error{code, std::move(msg), err.describe()};
}

Error combine(const std::vector<Error>& errors) {
  Error out = errors.front();
  for (std::size_t i = 1; i < errors.size(); ++i) {
    out.msg += "; " + errors[i].msg;
    if (!errors[i].details.empty()) {
      out.details += (out.details.empty() ? "" : "; ") + errors[i].details;
    }
  }
  return out;
}

}  // namespace ibcni::cni
