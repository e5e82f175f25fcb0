// SPDX-License-Identifier: Apache-2.0
// In ibcni_base, not ibcni_netlink: code and tests that never link libnl use describe().
#include "ibcni/netlink/netlink.h"

namespace ibcni::nl {

std::string describe(const Route& r) {
  std::string out = r.dst.toString();
  if (r.gw) {
    out += " via " + r.gw->toString();
  }
  if (r.ifIndex != 0) {
    out += " dev " + std::to_string(r.ifIndex);
  }
  const std::pair<const char*, const std::optional<std::uint32_t>*> extras[] = {
      {" table ", &r.table}, {" metric ", &r.priority}, {" scope ", &r.scope}, {" mtu ", &r.mtu}, {" advmss ", &r.advmss}};
  for (const auto& [label, value] : extras) {
    if (*value) {
      out += label + std::to_string(**value);
    }
  }
  return out;
}

std::string describe(const Rule& r) {
  return "from " + r.src.toString() + " lookup " + std::to_string(r.table) + " pref " + std::to_string(r.priority);
}

}  // namespace ibcni::nl
