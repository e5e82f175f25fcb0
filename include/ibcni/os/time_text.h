// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace ibcni::os {

/// "2026-11-26T04:21:24Z": RFC 3339 in UTC, whole seconds, as records, ledgers and the etcd
/// backend's values keep times.
[[nodiscard]] std::string rfc3339(std::chrono::system_clock::time_point t);

/// "2026-11-26T04:21:24.123456Z": RFC 3339 in UTC with microseconds, as the Kubernetes API's
/// MicroTime fields (a Lease's acquireTime and renewTime) are written.
[[nodiscard]] std::string rfc3339Micros(std::chrono::system_clock::time_point t);

/// The one RFC 3339 reader: "YYYY-MM-DDTHH:MM:SS[.fraction](Z|z|+hh:mm|-hh:mm)", the fraction kept
/// to the microsecond; nullopt for anything else.
[[nodiscard]] std::optional<std::chrono::system_clock::time_point> parseRfc3339(std::string_view text);

}  // namespace ibcni::os
