// SPDX-License-Identifier: Apache-2.0
// ibcni-dra's command line and loop, for its two mains: ibcni-dra (dra_main.cpp) and the fault
// tier's ibcni-dra-faulty (tests/support/fault/), which wraps the claims' effects.
#pragma once

#include <functional>
#include <string_view>

#include "plugin/dra/claim_effects.h"

namespace ibcni::plugin {

/// What Prepare and Unprepare change the node through, given the real files.
using DecorateEffects = std::function<dra::ClaimEffects&(dra::ClaimEffects& real)>;

/// The program `name` over `argc`/`argv` (flags, help, version); its exit status.
[[nodiscard]] int runDraDaemon(int argc, char** argv, std::string_view name, const DecorateEffects& decorate);

}  // namespace ibcni::plugin
