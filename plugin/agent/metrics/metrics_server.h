// SPDX-License-Identifier: Apache-2.0
// The node agent's HTTP listener: /metrics (AgentMetrics' families) and /healthz.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "ibcni/cni/error.h"
#include "plugin/agent/metrics/agent_metrics.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace ibcni::plugin::metrics {

/// "ADDRESS:PORT" as --metrics-listen takes it (":9464": every IPv4 address; "127.0.0.1:9464";
/// "[::1]:9464") in civetweb's listening_ports form; error 7 (cni::Errc::kInvalidConfig) naming
/// the value when it is not one.
[[nodiscard]] cni::Result<std::string> listeningPort(const std::string& listen);

class MetricsServer {
 public:
  /// Listens on `listen` (--metrics-listen's value) and serves `metrics` (which must outlive the
  /// server) at /metrics and "ok" at /healthz while `healthy` is true (503 "stopping" otherwise).
  /// @return an error naming the address when it cannot listen there (in use, not local).
  [[nodiscard]] static cni::Result<std::unique_ptr<MetricsServer>> start(const std::string& listen,
                                                                         const AgentMetrics& metrics);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  /// The port listened on (the first, when civetweb listens on several).
  [[nodiscard]] int port() const;
  /// What /healthz answers: true "ok" (200), false "stopping" (503).
  static void setHealthy(bool healthy);

 private:
  MetricsServer() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace ibcni::plugin::metrics
