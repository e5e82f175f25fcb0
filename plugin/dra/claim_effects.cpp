// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/claim_effects.h"

#include <utility>

namespace ibcni::dra {

FileClaimEffects::FileClaimEffects(ClaimCheckpoint checkpoint, std::string cdiDir)
    : checkpoint_(std::move(checkpoint)), cdiDir_(std::move(cdiDir)) {}

}  // namespace ibcni::dra
