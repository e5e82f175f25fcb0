// SPDX-License-Identifier: Apache-2.0
// The ring file of call events, <stateDir>/events: the plugin's writer (FileCallEvents) and the
// node agent's reader (readCallEvents).
//
// Layout (native byte order; this file never leaves the node): a 128-byte header, then
// kCallEventSlots slots of 128 bytes (512 KiB + 128 bytes in all, fixed).
//   header: magic "IBCNIEV1", version 1, slot size, slot count, header size; at byte 64 the 64-bit
//           count of sequence numbers taken so far (the last one given is that count).
//   slot:   16 words of 8 bytes: [0] the sequence written first, [1] end time (ms since the epoch),
//           [2] duration (ns), [3] code (low 32 bits), verb, flags (bit 0: name truncated), name
//           length, [4..13] the network name (at most kCallEventNameBytes bytes; longer names keep
//           their first bytes and are marked truncated), [14] a checksum of the sequence and words
//           1..13, [15] the sequence written last.
//
// Many plugin processes append at once: each takes its sequence with an atomic fetch_add on the
// header's counter in the shared mapping, fills slot (seq-1) % kCallEventSlots, first word, payload,
// checksum, and publishes it by storing the last word (release). A reader accepts a slot only when
// both sequence words are the one it expects and the checksum holds: a writer killed midway leaves
// the two words different, and two writers on one slot (a slow writer lapped by a later one) leave
// a checksum that does not match. Either way that one event is lost, never returned torn.
//
// The file is created 0600 by root in the state directory (opened with os::openDirectory's rules,
// created 0700 when missing); it is opened with openat(O_NOFOLLOW) from the directory's descriptor.
// A file that is not a ring of this layout (another magic, version or size, a symbolic link, not a
// regular file) is replaced by the writer in one step: a fresh ring written beside it, renamed over
// it. /run is a tmpfs: the ring starts empty after a reboot, and nothing is fsync'd.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ibcni/cni/error.h"
#include "ibcni/state/call_events.h"

namespace ibcni::state {

/// The ring's name in the state directory.
inline constexpr const char* kCallEventsFile = "events";
inline constexpr std::size_t kCallEventSlots = 4096;
inline constexpr std::size_t kCallEventSlotBytes = 128;
inline constexpr std::size_t kCallEventNameBytes = 80;
/// The size of a valid ring file.
inline constexpr std::size_t kCallEventFileBytes = kCallEventSlotBytes * (kCallEventSlots + 1);

/// Appends to <stateDir>/events, creating or replacing the ring as the layout above says.
class FileCallEvents final : public CallEvents {
 public:
  os::SysResult<void> append(const std::string& stateDir, const CallEvent& event) override;
};

/// What one read found.
struct CallEventBatch {
  std::vector<CallEvent> events;  ///< in sequence order, each intact
  std::uint64_t next = 0;         ///< the `from` of the following read
  std::uint64_t lost = 0;         ///< sequences from `from` on not returned: overwritten, torn, never published
};

/// Every event of the ring under `stateDir` from sequence `from` on (0: the oldest kept; the events
/// the ring no longer keeps count as lost). A `from` beyond the ring's last sequence (the ring was
/// replaced, or the node rebooted) reads from the oldest kept. A sequence taken but not yet
/// published is waited for briefly (an append takes microseconds), then counted lost.
/// No state directory or no ring file: an empty batch with next = `from`, no error.
/// @return error 5 naming the file when it cannot be read or is not a ring (the plugin's next
///         append replaces it).
[[nodiscard]] cni::Result<CallEventBatch> readCallEvents(const std::string& stateDir, std::uint64_t from);

}  // namespace ibcni::state
