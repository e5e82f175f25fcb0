// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <expected>
#include <string>
#include <utility>

namespace ibcni::os {

/// An operating-system failure: the errno captured at the call, the operation that failed and,
/// for netlink requests, the kernel's extended-ACK message.
struct SysError {
  int err = 0;         ///< positive errno value
  std::string op;      ///< what was attempted, e.g. "move link eth3 into netns /run/netns/x"
  std::string extAck;  ///< kernel NLMSGERR_ATTR_MSG text, empty when the kernel gave none

  /// "op: strerror(err) (EXXX)[: extAck]"
  [[nodiscard]] std::string describe() const;
};

template <class T>
using SysResult = std::expected<T, SysError>;

/// Builds an unexpected SysError from an errno value and an operation description.
[[nodiscard]] inline std::unexpected<SysError> sysFail(int err, std::string op, std::string extAck = {}) {
  return std::unexpected(SysError{err, std::move(op), std::move(extAck)});
}

/// Name of an errno value ("ENOENT"), or its number when unknown.
[[nodiscard]] std::string errnoName(int err);

}  // namespace ibcni::os
