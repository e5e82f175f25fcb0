// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>

#include "ibcni/cni/error.h"
#include "ibcni/cni/result.h"
#include "ibcni/cni/spec_version.h"

namespace ibcni::result {

/// Prints `r` in the format of spec version `v`: 0.3.x/0.4.0 with ips[].version, 1.x without;
/// interface mtu/pciID/socketPath and the route extras only for 1.1.0. Empty lists and an empty
/// dns are left out.
[[nodiscard]] std::string printResult(const cni::AddResult& r, cni::SpecVersion v);

/// The spec's error object. `cniVersion` is left out when empty.
[[nodiscard]] std::string printError(const cni::Error& e, std::string_view cniVersion);

/// VERSION's answer: {"cniVersion": V, "supportedVersions": [...]}.
[[nodiscard]] std::string printVersion(std::string_view cniVersion);

/// Parses a result printed by a plugin (an IPAM delegate) in any supported version.
/// @return error `code` with a message naming `what` and the offending field.
[[nodiscard]] cni::Result<cni::AddResult> parseResult(std::string_view text, cni::Errc code,
                                                      std::string_view what);

/// Parses an error object printed by a failed plugin; nullopt when `text` is not one.
[[nodiscard]] std::optional<cni::Error> parseError(std::string_view text);

}  // namespace ibcni::result
