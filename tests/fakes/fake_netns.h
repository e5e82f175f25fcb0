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
  /// The next createTemporary() fails with `err`.
  void failCreateTemporary(int err) { failCreate_ = err; }

  /// Every temporary namespace handed out so far.
  [[nodiscard]] const std::vector<os::Netns>& temporaries() const { return temporaries_; }

  os::SysResult<os::Netns> open(const std::string& path) override {
    if (path == kHostPath) {
      return host();
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
  os::SysResult<os::Netns> createTemporary() override {
    if (failCreate_ != 0) {
      int err = failCreate_;
      failCreate_ = 0;
      return os::sysFail(err, "unshare(CLONE_NEWNET)");
    }
    ino_t ino = nextInode_++;
    temporaries_.push_back(os::Netns::fakeForTest("(temporary netns " + std::to_string(ino) + ")", ino));
    return os::Netns::fakeForTest(temporaries_.back().path(), ino);
  }

 private:
  std::map<std::string, ino_t> paths_;
  std::vector<std::string> notNetns_;
  std::vector<os::Netns> temporaries_;
  ino_t nextInode_ = 100;
  int failCreate_ = 0;
};

}  // namespace ibcni::testing
