// SPDX-License-Identifier: Apache-2.0
#include <sys/stat.h>
#include <cerrno>
#include <filesystem>

#include "embedded_ipam.h"
#include "ibcni/os/netns.h"

namespace ibcni::ipam {

namespace {

bool isDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

class SystemNetnsChecker final : public NetnsChecker {
 public:
  std::uint64_t identify(const std::string& path) override {
    if (path.empty()) {
      return 0;
    }
    auto ns = os::Netns::open(path);
    return ns ? static_cast<std::uint64_t>(ns->inode()) : 0;
  }

  NetnsLiveness check(const std::string& path, std::uint64_t inode) override {
    if (path.empty()) {
      return NetnsLiveness::kUnknown;
    }
    auto ns = os::Netns::open(path);
    if (ns) {
      // The same path may now name a newer namespace (a reused /proc/<pid>/ns/net, a runtime
      // reusing names): only the recorded inode proves it is the pod's.
      if (inode != 0 && static_cast<std::uint64_t>(ns->inode()) != inode) {
        return NetnsLiveness::kGone;
      }
      return NetnsLiveness::kAlive;
    }
    int err = ns.error().err;
    if (err == EINVAL) {
      // The file exists but is no longer a namespace: runtimes unmount the bind mount before
      // removing the file, and a crash in between leaves an empty file.
      return NetnsLiveness::kGone;
    }
    if (err == ENOENT) {
      // Missing from a directory we can see: gone. A missing directory suggests we run in another
      // mount namespace than the runtime, where absence proves nothing.
      std::string parent = std::filesystem::path(path).parent_path();
      if (path.starts_with("/proc/")) {
        return isDirectory("/proc/self/ns") ? NetnsLiveness::kGone : NetnsLiveness::kUnknown;
      }
      return isDirectory(parent) ? NetnsLiveness::kGone : NetnsLiveness::kUnknown;
    }
    return NetnsLiveness::kUnknown;
  }
};

}  // namespace

std::shared_ptr<NetnsChecker> systemNetnsChecker() { return std::make_shared<SystemNetnsChecker>(); }

}  // namespace ibcni::ipam
