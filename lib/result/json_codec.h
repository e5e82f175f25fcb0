// SPDX-License-Identifier: Apache-2.0
// The JSON form of results, shared by result/, config/ (prevResult) and state/ (the record of what
// ADD returned). Only those folders include nlohmann/json.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "ibcni/cni/error.h"
#include "ibcni/cni/result.h"
#include "ibcni/cni/spec_version.h"

namespace ibcni::result {

[[nodiscard]] nlohmann::json resultToJson(const cni::AddResult& r, cni::SpecVersion v);

/// @param where  the field path used in messages, e.g. "prevResult"
[[nodiscard]] cni::Result<cni::AddResult> resultFromJson(const nlohmann::json& j, cni::Errc code,
                                                         std::string_view where);

/// A short rendering of a JSON value for error messages (truncated).
[[nodiscard]] std::string shortDump(const nlohmann::json& j);

}  // namespace ibcni::result
