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

bool isVersionRequest(int argc, char** argv) {
  if (argc != 2) {
    return false;
  }
  const std::string_view arg = argv[1];
  return arg == "version" || arg == "--version";
}

}  // namespace ibcni::plugin
