// SPDX-License-Identifier: Apache-2.0
#pragma once

namespace ibcni::log {

/// How much is logged (`logLevel`): each level includes the ones before it.
enum class Level { kError, kWarn, kInfo, kDebug };

}  // namespace ibcni::log
