// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/netns_checker.h"

#include <cerrno>
#include <filesystem>

#include "lib/os/system_netns.h"

namespace ibcni::os {

NetnsLiveness netnsLiveness(NetnsProvider& namespaces, const std::string& path, std::uint64_t inode) {
  if (path.empty()) {
    return NetnsLiveness::kUnknown;
  }
  auto ns = namespaces.open(path);
  if (ns) {
    // The same path may now name a newer namespace (a reused /proc/<pid>/ns/net, a runtime
    // reusing names): only the recorded inode proves it is the pod's.
    if (inode != 0 && static_cast<std::uint64_t>(ns->inode()) != inode) {
      return NetnsLiveness::kGone;
    }
    return NetnsLiveness::kAlive;
  }
  const int err = ns.error().err;
  if (err == EINVAL) {
    // The file exists but is no longer a namespace: runtimes unmount the bind mount before
    // removing the file, and a crash in between leaves an empty file.
    return NetnsLiveness::kGone;
  }
  if (err == ENOENT) {
    // Missing from a directory we can see: gone. A missing directory suggests we run in another
    // mount namespace than the runtime, where absence proves nothing.
    if (path.starts_with("/proc/")) {
      return namespaces.directoryVisible("/proc/self/ns") ? NetnsLiveness::kGone : NetnsLiveness::kUnknown;
    }
    const std::string parent = std::filesystem::path(path).parent_path();
    return namespaces.directoryVisible(parent) ? NetnsLiveness::kGone : NetnsLiveness::kUnknown;
  }
  return NetnsLiveness::kUnknown;
}

const char* toString(NetnsLiveness liveness) {
  switch (liveness) {
    case NetnsLiveness::kAlive:
      return "alive";
    case NetnsLiveness::kGone:
      return "gone";
    case NetnsLiveness::kUnknown:
      break;
  }
  return "unknown";
}

namespace {

class SystemNetnsChecker final : public NetnsChecker {
 public:
  std::uint64_t identify(const std::string& path) override {
    if (path.empty()) {
      return 0;
    }
    auto ns = namespaces_.open(path);
    return ns ? static_cast<std::uint64_t>(ns->inode()) : 0;
  }
  NetnsLiveness check(const std::string& path, std::uint64_t inode) override {
    return netnsLiveness(namespaces_, path, inode);
  }

 private:
  SystemNetnsProvider namespaces_;
};

}  // namespace

std::shared_ptr<NetnsChecker> systemNetnsChecker() { return std::make_shared<SystemNetnsChecker>(); }

}  // namespace ibcni::os
