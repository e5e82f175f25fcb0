// SPDX-License-Identifier: Apache-2.0
// The node agent's metric families (prometheus-cpp): what its passes did, what its backends were
// asked, the CNI calls it is told of, and, at each scrape, what the node holds (NodeCounts). The only
// folder that includes prometheus-cpp; the plain values come from agent/.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "plugin/agent/cni_observation.h"
#include "plugin/agent/node_counts.h"
#include "plugin/agent/reconcile.h"

namespace prometheus {
class Collectable;
class Registry;
}  // namespace prometheus

namespace ibcni::plugin::metrics {

/// Every family, registered at construction so that each is exposed before its first sample.
class AgentMetrics {
 public:
  /// `collect` is called at each scrape (on the listener's thread) for the gauges of the attachments,
  /// the addresses and the blocks.
  explicit AgentMetrics(std::function<NodeCounts()> collect);
  ~AgentMetrics();
  AgentMetrics(const AgentMetrics&) = delete;
  AgentMetrics& operator=(const AgentMetrics&) = delete;

  /// One reconcile pass ended at `end`: ibcni_reconcile_runs_total{result}, ibcni_reconcile_actions_total{action},
  /// ibcni_reconcile_last_success_timestamp_seconds (when it did not fail).
  void recordPass(const ReconcileReport& report, std::chrono::system_clock::time_point end);
  /// One backend call (ipam::BackendCallSink): ibcni_ipam_backend_requests_total{backend,op,result}.
  void recordBackendCall(std::string_view backend, std::string_view op, std::string_view result);
  /// A batch of CNI calls: ibcni_cni_requests_total{verb,network,code},
  /// ibcni_cni_request_duration_seconds{verb,network}, ibcni_cni_events_lost_total.
  void recordCniRequests(const CniCalls& batch);

  /// What a scrape exposes: the registry of the counters and histograms, then the node's gauges.
  [[nodiscard]] std::vector<std::weak_ptr<prometheus::Collectable>> collectables() const;
  /// The text a scrape of /metrics returns (Prometheus text format 0.0.4).
  [[nodiscard]] std::string renderText() const;

 private:
  struct Families;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> node_;
  std::unique_ptr<Families> families_;
};

/// The buckets of ibcni_cni_request_duration_seconds: 1 ms to 30 s.
[[nodiscard]] std::vector<double> cniDurationBuckets();

}  // namespace ibcni::plugin::metrics
