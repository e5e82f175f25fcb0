// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ibcni::os {

/// True when `text` is UTF-8 without control characters (bytes below 0x20, and 0x7f): what the
/// CNI_* variables and interface names that end up in records, file names and logs must be.
[[nodiscard]] bool isPrintableText(std::string_view text);

/// `parts` with `separator` between them ("" for none).
[[nodiscard]] std::string joinText(const std::vector<std::string>& parts, std::string_view separator);

/// `v` as 16 lower-case hex digits, zero-padded ("0200000000000005"): file and object names.
[[nodiscard]] std::string hex64(std::uint64_t v);

/// Standard base64 (RFC 4648, with padding), as etcd's JSON gateway carries keys and values.
[[nodiscard]] std::string base64Encode(std::string_view bytes);
/// @return nullopt when `text` is not padded standard base64.
[[nodiscard]] std::optional<std::string> base64Decode(std::string_view text);

}  // namespace ibcni::os
