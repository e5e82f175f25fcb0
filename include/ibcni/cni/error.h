// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <expected>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ibcni/os/sys_error.h"
#include "ibcni/os/text.h"

namespace ibcni::cni {

/// CNI error codes: 0-99 follow the spec, 100 and up are ibcni's own and never renumbered.
/// Every code is listed, with its meaning and fix, in README.md.
enum class Errc : std::uint32_t {
  kIncompatibleVersion = 1,  ///< cniVersion not supported, or verb not allowed at that version
  kUnsupportedField = 2,     ///< a config field whose value is understood but not supported
  kUnknownContainer = 3,
  kInvalidEnvironment = 4,  ///< a CNI_* variable is missing or malformed
  kIoFailure = 5,           ///< reading stdin or ibcni's state failed
  kDecodingFailure = 6,     ///< stdin is not JSON
  kInvalidConfig = 7,       ///< a config field is missing or invalid
  kTryAgainLater = 11,      ///< transient: e.g. the device lock is held by another invocation
  kPluginNotAvailable = 50,     ///< STATUS: cannot service ADD
  kLimitedConnectivity = 51,    ///< STATUS: and existing attachments may be degraded
  kDeviceNotFound = 100,    ///< the device named by deviceID/device is not in the host netns
  kDeviceBusy = 101,        ///< the device is attached to another container
  kNetlinkFailure = 102,    ///< the kernel refused a link, address or route change
  kIfNameExists = 103,      ///< CNI_IFNAME already exists in the pod netns
  kIpamFailure = 104,       ///< the IPAM plugin could not be run or returned an unusable result
  kNetnsFailure = 105,      ///< entering or creating a network namespace failed
  kStateFailure = 106,      ///< ibcni's attachment record could not be written or read
  kCheckFailed = 107,       ///< CHECK found the attachment differs from what ADD made
  kIpamExhausted = 108,     ///< ibcni-ipam: a range set has no free address
  kVerbsCheckFailed = 109,  ///< verbsCheck.mode "require": the RDMA device behind the interface is not usable
  kInternal = 999,
};

/// The error object printed on stdout (exit status 1) when a verb fails.
struct Error {
  Errc code = Errc::kInternal;
  std::string msg;      ///< short and stable, names the field or variable and the fix
  std::string details;  ///< device, netns, errno name, kernel ext-ack text
};

template <class T>
using Result = std::expected<T, Error>;

[[nodiscard]] inline std::unexpected<Error> fail(Errc code, std::string msg, std::string details = {}) {
  return std::unexpected(Error{code, std::move(msg), std::move(details)});
}

/// The rule for CNI_* values (ibcni/os/text.h), where the protocol code looks for it.
using os::isPrintableText;

/// How long a value quoted in a message may be before it is cut.
inline constexpr std::size_t kQuotedMax = 64;

/// `value` as it is shown in a message: in double quotes, with '"' and '\\' escaped, every byte
/// that is not printable ASCII (control characters, non-UTF-8 and other non-ASCII bytes) written
/// as \xNN, and cut after `maxBytes` bytes of the value with "... (N bytes)" after the quote. A
/// message built from quoted values stays readable, one line, bounded and safe to log whatever the
/// environment or the configuration held.
[[nodiscard]] std::string quoted(std::string_view value, std::size_t maxBytes = kQuotedMax);

/// A CNI error whose details carry the OS error (errno name, kernel ext-ack).
[[nodiscard]] Error sysError(Errc code, std::string msg, const os::SysError& err);

/// Several errors as one: the first error's code, every message (and detail) joined with "; ".
/// `errors` must not be empty.
[[nodiscard]] Error combine(const std::vector<Error>& errors);

}  // namespace ibcni::cni
