// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <string_view>

namespace ibcni::plugin {

/// This build's release version (the CMake project version), e.g. "0.1.0".
[[nodiscard]] std::string_view releaseVersion();

/// The one line `ibcni version` and `ibcni-ipam version` print, e.g.
/// "ibcni 0.1.0 (CNI spec 0.3.0 0.3.1 0.4.0 1.0.0 1.1.0)". The installer runs the new binary on
/// the host with this argument and compares the line with the image's own run of it, so it must
/// depend on nothing but the build.
[[nodiscard]] std::string versionLine(std::string_view program);

/// The CNI spec versions ibcni speaks (cni::kSupportedVersions, which the VERSION verb answers
/// with) as the reference plugins' help prints them:
/// "CNI protocol versions supported: 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0".
[[nodiscard]] std::string supportedVersionsLine();

}  // namespace ibcni::plugin
