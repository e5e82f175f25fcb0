// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/sys_error.h"

#include <cstring>
#include <string>

namespace ibcni::os {

std::string errnoName(int err) {
  // strerrorname_np is glibc >= 2.32 (Debian 12 has 2.36).
  const char* name = ::strerrorname_np(err);
  return name != nullptr ? std::string(name) : std::to_string(err);
}

std::string SysError::describe() const {
  std::string out = op;
  out += ": ";
  out += std::strerror(err);
  out += " (" + errnoName(err) + ")";
  if (!extAck.empty()) {
    out += ": " + extAck;
  }
  return out;
}

}  // namespace ibcni::os
