// SPDX-License-Identifier: Apache-2.0
// One event per CNI call of the ibcni plugin (ADD, DEL, CHECK, GC, STATUS; never VERSION), kept in
// a bounded ring file under the state directory, <stateDir>/events, for the node agent to turn into
// metrics. The plugin appends once, after the outcome is known; an append that fails is only logged
// (at debug): it never changes what the call prints or its exit status.
#pragma once

#include <cstdint>
#include <string>

#include "ibcni/cni/cmd_args.h"
#include "ibcni/os/sys_error.h"

namespace ibcni::state {

/// What one call did.
struct CallEvent {
  std::uint64_t seq = 0;            ///< the ring's sequence number (1, 2, ...), given by the append
  std::int64_t endUnixMillis = 0;   ///< wall-clock time of the outcome, milliseconds since the epoch
  cni::Command verb{};              ///< ADD, DEL, CHECK, GC or STATUS
  std::string network;              ///< the configuration's "name"; empty when it could not be parsed
  int code = 0;                     ///< 0: success; otherwise the CNI error code printed (7, 11, 999, ...)
  double durationSeconds = 0;       ///< from the start of the call's work to its outcome (steady clock)
  bool networkTruncated = false;    ///< the name was longer than a slot keeps (kept: its first bytes)
};

/// Where the plugin's events go. Injected (plugin::Deps::callEvents): the ibcni executable appends
/// to the ring file; in-process tests append nowhere, or to a fake.
class CallEvents {
 public:
  virtual ~CallEvents() = default;
  /// Appends `event` (its seq is ignored and given by the sink) to the events of `stateDir`.
  /// @return the errno of what failed; the caller logs it and goes on.
  [[nodiscard]] virtual os::SysResult<void> append(const std::string& stateDir, const CallEvent& event) = 0;
};

}  // namespace ibcni::state
