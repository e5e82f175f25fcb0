// SPDX-License-Identifier: Apache-2.0
// The methods of the embedded IPAM's configuration types (ibcni/config/ipam_conf.h). No JSON here:
// the IPAM's policy uses them without the parser.
#include <algorithm>

#include "ibcni/config/ipam_conf.h"
#include "ibcni/net/address_math.h"

namespace ibcni::config {

using net::toInt;
using net::U128;

bool Range::contains(const net::IpAddress& ip) const {
  if (ip.family != rangeStart.family) {
    return false;
  }
  U128 v = toInt(ip);
  return toInt(rangeStart) <= v && v <= toInt(rangeEnd);
}

std::string Range::describe() const {
  if (rangeStart.isGuid()) {
    return rangeStart.toString() + "-" + rangeEnd.toString();  // GUIDs have no subnet
  }
  return subnet.toString() + " (" + rangeStart.toString() + "-" + rangeEnd.toString() + ")";
}

const Range* RangeSet::find(const net::IpAddress& ip) const {
  for (const auto& r : ranges) {
    if (r.contains(ip)) {
      return &r;
    }
  }
  return nullptr;
}

std::string RangeSet::describe() const {
  std::string out;
  for (const auto& r : ranges) {
    out += (out.empty() ? "" : ", ") + r.describe();
  }
  return out;
}

const Reservation* IpamConfig::reservationOf(const std::string& pod) const {
  auto it = std::lower_bound(reservations.begin(), reservations.end(), pod,
                             [](const Reservation& r, const std::string& p) { return r.pod < p; });
  if (it == reservations.end() || it->pod != pod) {
    return nullptr;
  }
  return &*it;
}

}  // namespace ibcni::config
