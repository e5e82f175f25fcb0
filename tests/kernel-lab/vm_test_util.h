// SPDX-License-Identifier: Apache-2.0
// What the GoogleTest binaries that run inside the kernel-lab VM share.
#pragma once

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace ibcni::testing::lab {

/// True inside the kernel-lab VM (run.sh sets KERNEL_LAB=1); the tests skip elsewhere.
inline bool inKernelLab() {
  const char* lab = std::getenv("KERNEL_LAB");
  return lab != nullptr && std::string_view(lab) == "1";
}

/// What a shell command printed (standard output and standard error) and whether it exited 0.
struct Cmd {
  bool ok = false;
  std::string out;
};

/// Runs `cmd` with /bin/sh.
inline Cmd sh(const std::string& cmd) {
  Cmd result;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) {
    return result;
  }
  std::array<char, 512> buf{};
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) {
    result.out += buf.data();
  }
  result.ok = ::pclose(p) == 0;
  return result;
}

}  // namespace ibcni::testing::lab
