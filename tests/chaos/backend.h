// SPDX-License-Identifier: Apache-2.0
// The shared datastore a chaos run's schedules use: a 3-member etcd 3.4 (tests/support/etcd) and,
// for the kubernetes backend, a real kube-apiserver over it (tests/support/control_plane.h, built
// from its module) behind the fault proxy. Started once per run (per --jobs worker), reused by every
// schedule (each under names of its own), stopped by PID at the end. Also the faults that act on it
// (members stopped, quorum lost, the proxy's injected answers, Node objects deleted) and the etcd
// lease revocation that stands for a node's lease lapsing while its agent is stopped.
#pragma once

#include <expected>
#include <memory>
#include <string>
#include <vector>

#include "support/etcd_cluster.h"
#include "support/control_plane.h"

namespace ibcni::chaos {

/// One key of etcd's JSON gateway range answer, decoded.
struct EtcdKv {
  std::string key;
  std::string value;
  std::string lease;  ///< "" or "0" without a lease
};

class Backend {
 public:
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  ~Backend();

  /// Starts 3 etcd members and, for "kubernetes", kube-apiserver over them and the fault proxy;
  /// `dir` holds the kubeconfig.
  [[nodiscard]] std::expected<void, std::string> start(const std::string& kind, const std::string& dir);
  void stop();

  [[nodiscard]] const std::string& kind() const noexcept { return kind_; }
  [[nodiscard]] bool kubernetes() const noexcept { return kind_ == "kubernetes"; }
  [[nodiscard]] bool started() const noexcept { return !kind_.empty(); }
  [[nodiscard]] std::vector<std::string> etcdEndpoints() const { return etcd_.endpoints(); }
  [[nodiscard]] const std::string& kubeconfig() const noexcept { return kubeconfig_; }
  [[nodiscard]] std::string apiUrl() const { return api_ ? api_->url() : std::string(); }

  // --- Faults ---
  [[nodiscard]] int members() const { return etcd_.size(); }
  [[nodiscard]] bool running(int member) const { return etcd_.running(member); }
  [[nodiscard]] int runningMembers() const;
  [[nodiscard]] bool quorum() const { return runningMembers() * 2 > members(); }
  [[nodiscard]] std::expected<void, std::string> stopMember(int member);
  [[nodiscard]] std::expected<void, std::string> startMember(int member);
  /// A fault of the proxy (tests/support/control-plane/api_proxy.js), as JSON.
  [[nodiscard]] std::expected<void, std::string> apiFault(const std::string& faultJson);
  /// Whether an injected API fault is still armed (not yet consumed).
  [[nodiscard]] bool apiFaultArmed() const;
  /// Waits until every running member is healthy (a leader, a quorum read).
  [[nodiscard]] std::expected<void, std::string> waitHealthy();
  /// Every member running and healthy, no API fault left.
  [[nodiscard]] std::expected<void, std::string> heal();
  /// Empties the proxy's counts (a long run would fill its memory with the server's warnings).
  void resetApiCounts() const;

  // --- Node objects (kubernetes) ---
  [[nodiscard]] std::expected<void, std::string> createNode(const std::string& name);
  [[nodiscard]] std::expected<void, std::string> deleteNode(const std::string& name);

  // --- etcd's JSON gateway ---
  [[nodiscard]] std::expected<std::vector<EtcdKv>, std::string> range(const std::string& prefix) const;
  /// Revokes every lease that a key under `prefix` whose value has "node": `node` hangs on (the
  /// node's lease lapsed: etcd drops its keys). Returns how many leases were revoked.
  [[nodiscard]] std::expected<int, std::string> revokeLeasesOf(const std::string& prefix, const std::string& node) const;
  /// Deletes every key under `prefix` (a finished schedule's state).
  void deletePrefix(const std::string& prefix) const;
  /// Compacts etcd's history up to now (the run writes a lot over thousands of schedules).
  void compact() const;

 private:
  [[nodiscard]] std::expected<std::string, std::string> gateway(const std::string& path, const std::string& body) const;
  [[nodiscard]] std::expected<void, std::string> startApiServer(const std::string& dir);

  std::string kind_;
  testing::EtcdCluster etcd_;
  std::unique_ptr<testing::ControlPlane> cp_;
  std::unique_ptr<testing::ApiProxy> api_;
  std::string kubeconfig_;
};

/// base64 as etcd's JSON gateway writes keys and values.
[[nodiscard]] std::string base64Encode(const std::string& bytes);
[[nodiscard]] std::string base64Decode(const std::string& text);
/// The smallest key above every key starting with `prefix` (etcd's range_end for a prefix).
[[nodiscard]] std::string prefixEnd(std::string prefix);

}  // namespace ibcni::chaos
