// SPDX-License-Identifier: Apache-2.0
// What every BlockBackend implementation checks and says the same way (etcd, Kubernetes).
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

#include "ibcni/cni/error.h"
#include "ibcni/ipam/block_backend.h"

namespace ibcni::ipam::backend {

/// A pool, block key, address or node name as block_backend.h allows it: 1-253 printable ASCII
/// bytes without blanks or '/'.
[[nodiscard]] inline bool validName(std::string_view s) {
  return !s.empty() && s.size() <= 253 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f && c != '/'; });
}

/// Printable ASCII, blanks included.
[[nodiscard]] inline bool printable(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

/// Refused before anything was sent.
[[nodiscard]] inline BackendError invalid(std::string message) {
  return BackendError{BackendErrc::kInvalidArgument, {}, std::move(message), 0};
}

/// An answer the backend's API does not promise.
[[nodiscard]] inline BackendError badAnswer(std::string endpoint, std::string message) {
  return BackendError{BackendErrc::kBadAnswer, std::move(endpoint), std::move(message), 0};
}

/// The first 120 bytes of a body, quoted, for messages.
[[nodiscard]] inline std::string excerpt(std::string_view body) { return cni::quoted(body, 120); }

}  // namespace ibcni::ipam::backend
