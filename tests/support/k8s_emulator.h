// SPDX-License-Identifier: Apache-2.0
// The Kubernetes API emulator (tests/support/k8s-emulator/server.js, label "etcd") for C++ tests:
// installs kubernetes-models with tests/deploy/k8s/setup.sh (npm ci from its lock file, once),
// then runs `node server.js` over the given etcd endpoints on a loopback port of its own, as this
// process's child (killed with it through PR_SET_PDEATHSIG), stopped by its PID.
//
//   EtcdCluster etcd;  ASSERT_TRUE(etcd.start(1));
//   K8sEmulator k8s;   ASSERT_TRUE(k8s.start(etcd.endpointList(), {{"good-token", "ibcni"}}, rbac));
//   k8s.url();                          // "http://127.0.0.1:PORT"
//   k8s.admin(http, kPost, "/_emulator/nodes", R"({"name":"n1"})");
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace ibcni::testing {

class K8sEmulator {
 public:
  K8sEmulator() = default;
  K8sEmulator(const K8sEmulator&) = delete;
  K8sEmulator& operator=(const K8sEmulator&) = delete;
  /// Stops the server and removes its directory.
  ~K8sEmulator();

  /// Starts server.js over `etcdEndpoints` ("http://127.0.0.1:P,..."), with `tokens` as its
  /// token file ({token, user} pairs) and `rbacJson` as its --rbac file; waits until it listens.
  /// Fails with the reason (node or npm missing, npm ci's log, the server's log tail).
  [[nodiscard]] ::testing::AssertionResult start(const std::string& etcdEndpoints,
                                                 const std::vector<std::pair<std::string, std::string>>& tokens,
                                                 const std::string& rbacJson);
  /// Rewrites the --rbac file (read by the server for every request).
  [[nodiscard]] ::testing::AssertionResult setRbac(const std::string& rbacJson) const;
  void stop();

  [[nodiscard]] const std::string& url() const noexcept { return url_; }
  [[nodiscard]] const std::string& dir() const noexcept { return dir_; }
  [[nodiscard]] std::string logTail(int lines = 20) const;

 private:
  std::string dir_;
  std::string url_;
  pid_t pid_ = -1;
};

}  // namespace ibcni::testing
