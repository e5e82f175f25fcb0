// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace ibcni::cni {

/// The CNI spec versions ibcni speaks. 0.1.0 and 0.2.0 are refused on purpose: their result format
/// cannot express an interface without an IP address.
enum class SpecVersion { k030, k031, k040, k100, k110 };

inline constexpr std::array<SpecVersion, 5> kSupportedVersions = {
    SpecVersion::k030, SpecVersion::k031, SpecVersion::k040, SpecVersion::k100, SpecVersion::k110};

/// Exact-match parse of a supported version string; nullopt otherwise.
[[nodiscard]] std::optional<SpecVersion> parseSpecVersion(std::string_view text);
[[nodiscard]] std::string_view toString(SpecVersion v);
/// "0.3.0", "0.3.1", ... as a JSON-ready comma list with quotes, for error details.
[[nodiscard]] std::string_view supportedVersionsText();

[[nodiscard]] constexpr bool hasCheck(SpecVersion v) { return v >= SpecVersion::k040; }
[[nodiscard]] constexpr bool hasGcAndStatus(SpecVersion v) { return v >= SpecVersion::k110; }
/// 0.3.x and 0.4.0 results carry ips[].version.
[[nodiscard]] constexpr bool hasIpVersionField(SpecVersion v) { return v < SpecVersion::k100; }
/// 1.1.0 adds interfaces[].mtu/pciID/socketPath and route mtu/advmss/priority/table/scope.
[[nodiscard]] constexpr bool hasV11Fields(SpecVersion v) { return v >= SpecVersion::k110; }

}  // namespace ibcni::cni
