// SPDX-License-Identifier: Apache-2.0
// GoogleTest printers for the block backend's results, so that a failed EXPECT_EQ shows the
// outcome or the backend's error instead of bytes.
#pragma once

#include <ostream>

#include "ibcni/ipam/block_backend.h"

namespace ibcni::ipam {

inline const char* releaseOutcomeName(ReleaseOutcome o) {
  switch (o) {
    case ReleaseOutcome::kReleased:
      return "released";
    case ReleaseOutcome::kNotOurs:
      return "not ours";
    case ReleaseOutcome::kPending:
      return "pending";
    case ReleaseOutcome::kGone:
      return "gone";
  }
  return "?";
}

inline void PrintTo(ReleaseOutcome o, std::ostream* os) { *os << releaseOutcomeName(o); }

inline void PrintTo(ClaimState s, std::ostream* os) {
  *os << (s == ClaimState::kClaimed ? "claimed" : s == ClaimState::kAdopted ? "adopted" : "held by other");
}

inline void PrintTo(ClaimKind k, std::ostream* os) { *os << claimKindName(k); }

inline void PrintTo(BackendErrc k, std::ostream* os) { *os << backendErrcName(k); }

inline void PrintTo(HoldCheck::State s, std::ostream* os) {
  *os << (s == HoldCheck::State::kKept ? "kept" : s == HoldCheck::State::kLost ? "lost" : "gone");
}

inline void PrintTo(const ClaimAttrs& a, std::ostream* os) {
  *os << "{owner \"" << a.owner << "\", pod \"" << a.pod << "\", lender \"" << a.lender << "\"}";
}

inline void PrintTo(const BackendResult<ReleaseOutcome>& r, std::ostream* os) {
  if (r) {
    PrintTo(*r, os);
  } else {
    *os << "error: " << r.error().describe();
  }
}

}  // namespace ibcni::ipam
