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

/// The UTC time of "YYYY-MM-DDTHH:MM:SS[.fraction]Z" (the fraction is dropped); nullopt for
/// anything else.
[[nodiscard]] std::optional<std::chrono::system_clock::time_point> parseRfc3339(std::string_view text);

}  // namespace ibcni::os
