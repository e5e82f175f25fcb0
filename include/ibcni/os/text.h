// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string_view>

namespace ibcni::os {

/// True when `text` is UTF-8 without control characters (bytes below 0x20, and 0x7f): what the
/// CNI_* variables and interface names that end up in records, file names and logs must be.
[[nodiscard]] bool isPrintableText(std::string_view text);

}  // namespace ibcni::os
