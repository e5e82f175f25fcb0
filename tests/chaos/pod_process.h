// SPDX-License-Identifier: Apache-2.0
// A simulated pod's sandbox: a process holding a network namespace of its own (fork,
// unshare(CLONE_NEWNET), pause), so that CNI_NETNS=/proc/<pid>/ns/net exists while the pod lives
// and is gone once it died, as ibcni-ipam's self-reclaim checks. The process dies with the
// checker's thread that forked it (PR_SET_PDEATHSIG) and is killed and reaped by its PID.
#pragma once

#include <sys/types.h>

#include <expected>
#include <string>

namespace ibcni::chaos {

class PodProcess {
 public:
  /// Forks the process and waits until its namespace exists.
  [[nodiscard]] static std::expected<PodProcess, std::string> start();
  PodProcess(PodProcess&& other) noexcept;
  PodProcess& operator=(PodProcess&& other) noexcept;
  PodProcess(const PodProcess&) = delete;
  PodProcess& operator=(const PodProcess&) = delete;
  ~PodProcess();

  [[nodiscard]] bool alive() const noexcept { return pid_ > 0; }
  /// "/proc/<pid>/ns/net" (the last one, once dead: a path that no longer exists).
  [[nodiscard]] const std::string& netns() const noexcept { return netns_; }
  /// SIGKILL and reap: the sandbox and its namespace are gone.
  void kill();

 private:
  PodProcess() = default;
  pid_t pid_ = -1;
  std::string netns_;
};

}  // namespace ibcni::chaos
