// SPDX-License-Identifier: Apache-2.0
#include "ipam/policy/allocation.h"

#include <algorithm>

namespace ibcni::ipam {

bool isValidContainerId(const std::string& containerId) {
  if (containerId.empty() || containerId.size() > 200) {
    return false;
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); };
  if (!alnum(containerId[0])) {
    return false;
  }
  return std::all_of(containerId.begin(), containerId.end(),
                     [&](char c) { return alnum(c) || c == '_' || c == '.' || c == '-'; });
}

}  // namespace ibcni::ipam
