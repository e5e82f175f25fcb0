// SPDX-License-Identifier: Apache-2.0
#include "lib/version/version.h"

#include "ibcni/cni/spec_version.h"

#ifndef IBCNI_RELEASE_VERSION
#error "IBCNI_RELEASE_VERSION must be defined by the build (plugin/CMakeLists.txt)"
#endif

namespace ibcni::plugin {

std::string_view releaseVersion() {
  return IBCNI_RELEASE_VERSION;
}

std::string versionLine(std::string_view program) {
  std::string line{program};
  line += ' ';
  line += releaseVersion();
  line += " (CNI spec";
  for (auto version : cni::kSupportedVersions) {
    line += ' ';
    line += cni::toString(version);
  }
  line += ')';
  return line;
}

std::string supportedVersionsLine() {
  std::string line = "CNI protocol versions supported:";
  for (auto version : cni::kSupportedVersions) {
    line += line.back() == ':' ? " " : ", ";
    line += cni::toString(version);
  }
  return line;
}

}  // namespace ibcni::plugin
