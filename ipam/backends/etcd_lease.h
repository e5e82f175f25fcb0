// SPDX-License-Identifier: Apache-2.0
// A node's etcd lease (what its liveness key and demands hang on): granted on first need, kept
// alive, granted anew once it expired.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>

#include "ipam/backends/etcd_gateway.h"

namespace ibcni::ipam::etcd {

class NodeLease {
 public:
  /// `id`: a lease granted earlier (0: none); `onGranted` is called (under a lock) with each new one.
  NodeLease(std::chrono::seconds ttl, std::int64_t id, std::function<void(std::int64_t)> onGranted);

  /// The current lease (0: none granted yet).
  [[nodiscard]] std::int64_t id() const;
  /// A new lease unless another thread replaced `replacing` meanwhile (then that one).
  [[nodiscard]] BackendResult<std::int64_t> grant(Call& call, std::int64_t replacing);
  /// The lease kept alive; one that expired (or was never granted) is granted anew, and
  /// `regranted` says the node's liveness had lapsed.
  [[nodiscard]] BackendResult<std::int64_t> keepAlive(Call& call, bool& regranted);

 private:
  std::chrono::seconds ttl_;
  std::function<void(std::int64_t)> onGranted_;
  mutable std::mutex mutex_;
  std::int64_t id_ = 0;
};

}  // namespace ibcni::ipam::etcd
