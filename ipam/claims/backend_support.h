// SPDX-License-Identifier: Apache-2.0
// What every BlockBackend implementation checks and says the same way (etcd, Kubernetes).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

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

/// Whether `h` is `node`'s claim as the caller means it (BlockBackend::claim): a block held by
/// `node`; an address held by `node` for the same attachment and lender, or for the same pod
/// (whose new attachment then adopts it).
[[nodiscard]] inline bool ours(ClaimKind kind, const Holder& h, std::string_view node, const ClaimAttrs& attrs) {
  if (h.node != node) {
    return false;
  }
  if (kind == ClaimKind::kBlock) {
    return true;
  }
  const bool same = h.attrs.owner == attrs.owner && h.attrs.lender == attrs.lender;
  const bool samePod = !attrs.pod.empty() && h.attrs.pod == attrs.pod;
  return same || samePod;
}

/// Refuses (kInvalidArgument) the first of `names` that is not validName().
[[nodiscard]] inline BackendResult<void> checkNames(std::initializer_list<std::string_view> names) {
  for (auto n : names) {
    if (!validName(n)) {
      return std::unexpected(invalid(cni::quoted(n) + " is not a valid pool, claim or node name (1-253 printable "
                                                      "bytes, no blanks or '/')"));
    }
  }
  return {};
}

/// Refuses (kInvalidArgument) a renewal whose pool, node or the name of a claim it holds is not
/// validName().
[[nodiscard]] inline BackendResult<void> checkRenewal(std::string_view pool, std::string_view node,
                                                      const std::vector<HeldClaim>& held) {
  if (auto v = checkNames({pool, node}); !v) {
    return v;
  }
  for (const auto& h : held) {
    if (auto v = checkNames({h.name}); !v) {
      return v;
    }
  }
  return {};
}

/// `f(value)` (itself a BackendResult) when `r` holds a value, else `r`'s error: what
/// std::expected::and_then does where the standard library has it.
template <class T, class F>
auto andThen(BackendResult<T>&& r, F&& f) -> std::invoke_result_t<F, T&&> {
  if (!r) {
    return std::unexpected(std::move(r.error()));
  }
  return std::forward<F>(f)(std::move(*r));
}

/// `f(value)` as a BackendResult when `r` holds a value, else `r`'s error (std::expected::transform).
template <class T, class F>
auto transform(BackendResult<T>&& r, F&& f) -> BackendResult<std::invoke_result_t<F, T&&>> {
  if (!r) {
    return std::unexpected(std::move(r.error()));
  }
  if constexpr (std::is_void_v<std::invoke_result_t<F, T&&>>) {
    std::forward<F>(f)(std::move(*r));
    return {};
  } else {
    return std::forward<F>(f)(std::move(*r));
  }
}

/// The first 120 bytes of a body, quoted, for messages.
[[nodiscard]] inline std::string excerpt(std::string_view body) { return cni::quoted(body, 120); }

}  // namespace ibcni::ipam::backend
