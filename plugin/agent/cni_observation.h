// SPDX-License-Identifier: Apache-2.0
// One CNI call as the node agent's metrics count it (ibcni_cni_requests_total,
// ibcni_cni_request_duration_seconds).
#pragma once

#include <string>

namespace ibcni::plugin {

struct CniObservation {
  std::string verb;     ///< "ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION"
  std::string network;  ///< the configuration's name
  int code = 0;         ///< the CNI error code; 0: success
  double seconds = 0;   ///< how long the call took
};

}  // namespace ibcni::plugin
