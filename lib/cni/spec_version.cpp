// SPDX-License-Identifier: Apache-2.0
#include "ibcni/cni/spec_version.h"

#include <string>

namespace ibcni::cni {

std::optional<SpecVersion> parseSpecVersion(std::string_view text) {
  for (auto v : kSupportedVersions) {
    if (toString(v) == text) {
      return v;
    }
  }
  return std::nullopt;
}

std::string_view toString(SpecVersion v) {
  switch (v) {
    case SpecVersion::k030:
      return "0.3.0";
    case SpecVersion::k031:
      return "0.3.1";
    case SpecVersion::k040:
      return "0.4.0";
    case SpecVersion::k100:
      return "1.0.0";
    case SpecVersion::k110:
      return "1.1.0";
  }
  return "1.1.0";
}

std::string_view supportedVersionsText() {
  return R"("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")";
}

}  // namespace ibcni::cni
