// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <sys/stat.h>

#include "ibcni/os/netns.h"

namespace ibcni::os {

/// The real namespaces of the running system.
class SystemNetnsProvider final : public NetnsProvider {
 public:
  SysResult<Netns> open(const std::string& path) override { return Netns::open(path); }
  SysResult<Netns> current() override { return Netns::current(); }
  bool directoryVisible(const std::string& dir) override {
    struct stat st {};
    return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
};

}  // namespace ibcni::os
