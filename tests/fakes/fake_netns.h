// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cerrno>
#include <map>
#include <string>
#include <vector>

#include "ibcni/os/netns.h"

namespace ibcni::testing {

/// Namespaces without a kernel: fd-less os::Netns handles identified by path and a made-up inode,
/// which FakeNetlink keys its model on.
class FakeNetnsProvider final : public os::NetnsProvider {
 public:
  static constexpr ino_t kHostInode = 1;
  static constexpr const char* kHostPath = "/proc/thread-self/ns/net";

  /// The namespace ibcni runs in.
  [[nodiscard]] os::Netns host() const { return os::Netns::fakeForTest(kHostPath, kHostInode); }

  /// Registers a namespace reachable at `path` (as a pod's would be).
  os::Netns addNetns(const std::string& path) {
    ino_t ino = nextInode_++;
    paths_[path] = ino;
    return os::Netns::fakeForTest(path, ino);
  }
  /// A path that exists but is not a network namespace.
  void addNonNetns(const std::string& path) { notNetns_.push_back(path); }
  /// The path stops resolving (the runtime deleted the namespace).
  void removeNetns(const std::string& path) { paths_.erase(path); }
  os::SysResult<os::Netns> open(const std::string& path) override {
    if (path == kHostPath) {
      return host();
    }
    if (auto it = failures_.find(path); it != failures_.end()) {
      return os::sysFail(it->second, "open " + path);
    }
    if (auto it = paths_.find(path); it != paths_.end()) {
      return os::Netns::fakeForTest(path, it->second);
    }
    for (const auto& p : notNetns_) {
      if (p == path) {
        return os::sysFail(EINVAL, path + " is not a network namespace");
      }
    }
    return os::sysFail(ENOENT, "open " + path);
  }
  os::SysResult<os::Netns> current() override { return host(); }
  /// Every directory is visible but those hidden (as from another mount namespace).
  bool directoryVisible(const std::string& dir) override {
    for (const auto& h : hidden_) {
      if (h == dir) {
        return false;
      }
    }
    return true;
  }
  /// `dir` is not visible from where ibcni runs: a path under it that does not open proves nothing.
  void hideDirectory(const std::string& dir) { hidden_.push_back(dir); }
  /// Opening `path` fails with `err` (EACCES: a permission error).
  void failOpen(const std::string& path, int err) { failures_[path] = err; }

 private:
  std::map<std::string, ino_t> paths_;
  std::vector<std::string> notNetns_;
  std::vector<std::string> hidden_;
  std::map<std::string, int> failures_;
  ino_t nextInode_ = 100;
};

}  // namespace ibcni::testing
