// SPDX-License-Identifier: Apache-2.0
// A throwaway etcd 3.4 cluster for the tests (label "etcd"): 1 or N members exec'd from Debian's
// etcd-server on loopback ports picked at run time, data and logs in a private temporary directory,
// never etcd's default ports. Every member is this process's child (killed with it through
// PR_SET_PDEATHSIG) and is stopped by its PID. tests/support/etcd/etcd_cluster.sh does the same
// for shell tests.
//
//   EtcdCluster etcd;
//   ASSERT_TRUE(etcd.start(3));           // fails with the reason (etcd not installed, log tail...)
//   etcd.endpointList();                  // "http://127.0.0.1:P0,http://127.0.0.1:P1,..."
//   ASSERT_TRUE(etcd.stopMember(1));      // quorum tests
//   ASSERT_TRUE(etcd.startMember(1));
//   ASSERT_TRUE(etcd.waitHealthy());
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ibcni::testing {

/// The absolute path of `name` in $PATH (kPathEnv's when unset), if it is executable there.
[[nodiscard]] std::optional<std::string> findProgram(std::string_view name);


class EtcdCluster {
 public:
  using Clock = std::chrono::steady_clock;

  EtcdCluster() = default;
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;
  /// Stops every member still running (SIGTERM, SIGKILL after 5 s) and removes the directory.
  ~EtcdCluster();

  /// Starts `members` members and waits until every one answers `etcdctl endpoint health`.
  /// Retried with new ports when a port turned out to be taken. Fails (with the reason: etcd or
  /// etcdctl missing, a member's log tail, etcdctl's last answer) after `timeout`.
  [[nodiscard]] ::testing::AssertionResult start(int members,
                                                 std::chrono::milliseconds timeout = std::chrono::seconds(30));

  /// Stops member `i` (0-based) by its PID and reaps it; its data directory stays.
  [[nodiscard]] ::testing::AssertionResult stopMember(int i);
  /// Starts member `i` again with its command line and data directory; does not wait.
  [[nodiscard]] ::testing::AssertionResult startMember(int i);
  /// Waits until every running member's endpoint is healthy (a leader and a quorum read).
  [[nodiscard]] ::testing::AssertionResult waitHealthy(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  /// Stops every member (the destructor does it too).
  void stop();

  [[nodiscard]] int size() const noexcept { return static_cast<int>(members_.size()); }
  [[nodiscard]] bool running(int i) const;
  /// "http://127.0.0.1:PORT" of member `i`'s client listener.
  [[nodiscard]] std::string endpoint(int i) const;
  /// Every member's endpoint, comma-separated.
  [[nodiscard]] std::string endpointList() const;
  [[nodiscard]] std::vector<std::string> endpoints() const;
  /// The temporary directory holding the members' data dirs and logs (m<i>/data, m<i>/log).
  [[nodiscard]] const std::string& dir() const noexcept { return dir_; }
  /// The last `lines` lines of member `i`'s log (for failure messages).
  [[nodiscard]] std::string logTail(int i, int lines = 10) const;
  /// How long the last successful start() took, from the first exec to all healthy.
  [[nodiscard]] Clock::duration startupTime() const noexcept { return startupTime_; }

 private:
  struct Member {
    int clientPort = 0;
    int peerPort = 0;
    std::vector<std::string> args;  // argv, argv[0] the etcd binary
    pid_t pid = -1;
  };

  [[nodiscard]] ::testing::AssertionResult tryStart(int members, std::chrono::milliseconds timeout, bool& portTaken);
  [[nodiscard]] ::testing::AssertionResult checkHealth(const std::vector<int>& which,
                                                       std::chrono::milliseconds timeout);
  void stopAll();

  std::string etcd_;
  std::string etcdctl_;
  std::string dir_;
  std::vector<Member> members_;
  Clock::duration startupTime_{};
};

}  // namespace ibcni::testing
