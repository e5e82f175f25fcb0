// SPDX-License-Identifier: Apache-2.0
#include "plugin/agent/metrics/agent_metrics.h"

#include <sstream>
#include <utility>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace ibcni::plugin::metrics {

namespace {

prometheus::ClientMetric gaugeSample(std::vector<prometheus::ClientMetric::Label> labels, double value) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  return m;
}

prometheus::MetricFamily family(std::string name, std::string help, prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

prometheus::MetricFamily gaugeFamily(std::string name, std::string help) {
  return family(std::move(name), std::move(help), prometheus::MetricType::Gauge);
}

prometheus::MetricFamily counterFamily(std::string name, std::string help) {
  return family(std::move(name), std::move(help), prometheus::MetricType::Counter);
}

prometheus::ClientMetric counterSample(std::vector<prometheus::ClientMetric::Label> labels, double value) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = value;
  return m;
}

// The PMA counters (ports/N/counters/) exposed each as a family of its own, with the factor to
// its unit: port_xmit_data and port_rcv_data count 4-byte words.
struct PortCounterMetric {
  const char* counter;
  const char* name;
  const char* help;
  double factor;
};
constexpr PortCounterMetric kPortCounterMetrics[] = {
    {"port_xmit_data", "ibcni_rdma_port_xmit_data_bytes_total", "Bytes the pod's RDMA port sent (PortXmitData x 4).",
     4},
    {"port_rcv_data", "ibcni_rdma_port_rcv_data_bytes_total", "Bytes the pod's RDMA port received (PortRcvData x 4).",
     4},
    {"port_xmit_packets", "ibcni_rdma_port_xmit_packets_total", "Packets the pod's RDMA port sent.", 1},
    {"port_rcv_packets", "ibcni_rdma_port_rcv_packets_total", "Packets the pod's RDMA port received.", 1},
    {"link_downed", "ibcni_rdma_port_link_downed_total", "Times the pod's RDMA port's link went down.", 1},
    {"symbol_error", "ibcni_rdma_port_symbol_errors_total", "Symbol errors on the pod's RDMA port's link.", 1},
    {"port_rcv_errors", "ibcni_rdma_port_rcv_errors_total", "Packets with errors the pod's RDMA port received.", 1},
};

std::vector<prometheus::ClientMetric::Label> portLabels(const PodPortCounters& p) {
  return {{"device", p.port.device},
          {"network", p.network},
          {"pod", p.pod},
          {"pod_namespace", p.podNamespace},
          {"port", std::to_string(p.port.port)}};
}

// The families of the pods' RDMA ports: the PMA counters above, every hw_counter the driver shows
// (one family, labelled `counter`), and the port's state.
std::vector<prometheus::MetricFamily> portFamilies(const std::vector<PodPortCounters>& ports) {
  std::vector<prometheus::MetricFamily> out;
  for (const auto& m : kPortCounterMetrics) {
    auto f = counterFamily(m.name, m.help);
    for (const auto& p : ports) {
      if (auto it = p.port.counters.find(m.counter); it != p.port.counters.end()) {
        f.metric.push_back(counterSample(portLabels(p), static_cast<double>(it->second) * m.factor));
      }
    }
    out.push_back(std::move(f));
  }
  auto hw = counterFamily("ibcni_rdma_port_hw_counters_total",
                          "The driver's hw_counters of the pod's RDMA port, by name (each in its driver's unit).");
  auto state = gaugeFamily("ibcni_rdma_port_state", "Whether the pod's RDMA port is ACTIVE (1) or not (0).");
  for (const auto& p : ports) {
    for (const auto& [name, value] : p.port.hwCounters) {
      auto labels = portLabels(p);
      labels.push_back({"counter", name});
      hw.metric.push_back(counterSample(std::move(labels), static_cast<double>(value)));
    }
    if (p.port.state) {
      state.metric.push_back(gaugeSample(portLabels(p), *p.port.state == 4 ? 1 : 0));
    }
  }
  out.push_back(std::move(hw));
  out.push_back(std::move(state));
  std::erase_if(out, [](const prometheus::MetricFamily& f) { return f.metric.empty(); });
  return out;
}

// The gauges of what the node holds, counted at each scrape.
class NodeCollectable final : public prometheus::Collectable {
 public:
  explicit NodeCollectable(std::function<NodeCounts()> collect) : collect_(std::move(collect)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    const NodeCounts c = collect_();
    auto attachments = gaugeFamily("ibcni_attachments", "Attachment records in the state directories.");
    for (const auto& a : c.attachments) {
      attachments.metric.push_back(
          gaugeSample({{"mode", a.mode}, {"network", a.network}}, static_cast<double>(a.count)));
    }
    auto addresses = gaugeFamily("ibcni_ipam_addresses",
                                 "Addresses of ibcni-ipam's pools on this node, used or free to hand out.");
    for (const auto& a : c.addresses) {
      addresses.metric.push_back(gaugeSample({{"network", a.network}, {"pool", a.pool}, {"state", "used"}},
                                             static_cast<double>(a.used)));
      addresses.metric.push_back(gaugeSample({{"network", a.network}, {"pool", a.pool}, {"state", "free"}},
                                             static_cast<double>(a.free)));
    }
    auto blocks = gaugeFamily("ibcni_ipam_blocks", "Blocks of cluster pools in this node's ledger, by state.");
    for (const auto& b : c.blocks) {
      blocks.metric.push_back(gaugeSample({{"pool", b.pool}, {"state", b.state}}, static_cast<double>(b.count)));
    }
    std::vector<prometheus::MetricFamily> out{std::move(attachments), std::move(addresses), std::move(blocks)};
    for (auto& f : portFamilies(c.ports)) {
      out.push_back(std::move(f));
    }
    return out;
  }

 private:
  std::function<NodeCounts()> collect_;
};

}  // namespace

std::vector<double> cniDurationBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}

struct AgentMetrics::Families {
  explicit Families(prometheus::Registry& r)
      : runs(prometheus::BuildCounter()
                 .Name("ibcni_reconcile_runs_total")
                 .Help("Reconcile passes of the node agent, by result.")
                 .Register(r)),
        actions(prometheus::BuildCounter()
                    .Name("ibcni_reconcile_actions_total")
                    .Help("What reconcile passes did with attachment records and ibcni-ipam allocations, by action.")
                    .Register(r)),
        lastSuccess(prometheus::BuildGauge()
                        .Name("ibcni_reconcile_last_success_timestamp_seconds")
                        .Help("When the last reconcile pass that failed nothing ended (Unix time; 0: none yet).")
                        .Register(r)
                        .Add({})),
        backend(prometheus::BuildCounter()
                    .Name("ibcni_ipam_backend_requests_total")
                    .Help("Cluster-pool backend calls made by the node agent's own passes (not the plugin's).")
                    .Register(r)),
        cniRequests(prometheus::BuildCounter()
                        .Name("ibcni_cni_requests_total")
                        .Help("CNI calls of the plugin, by verb, network and CNI error code (0: success).")
                        .Register(r)),
        cniDuration(prometheus::BuildHistogram()
                        .Name("ibcni_cni_request_duration_seconds")
                        .Help("How long CNI calls of the plugin took, by verb and network.")
                        .Register(r)),
        cniLost(prometheus::BuildCounter()
                    .Name("ibcni_cni_events_lost_total")
                    .Help("CNI calls of the plugin whose events the rings lost before the agent read them "
                          "(more calls than a ring holds between two reads): missing from ibcni_cni_requests_total.")
                    .Register(r)
                    .Add({})) {
    runs.Add({{"result", "success"}});
    runs.Add({{"result", "failure"}});
  }
  prometheus::Family<prometheus::Counter>& runs;
  prometheus::Family<prometheus::Counter>& actions;
  prometheus::Gauge& lastSuccess;
  prometheus::Family<prometheus::Counter>& backend;
  prometheus::Family<prometheus::Counter>& cniRequests;
  prometheus::Family<prometheus::Histogram>& cniDuration;
  prometheus::Counter& cniLost;
};

AgentMetrics::AgentMetrics(std::function<NodeCounts()> collect)
    : registry_(std::make_shared<prometheus::Registry>()),
      node_(std::make_shared<NodeCollectable>(std::move(collect))),
      families_(std::make_unique<Families>(*registry_)) {}

AgentMetrics::~AgentMetrics() = default;

void AgentMetrics::recordPass(const ReconcileReport& report, std::chrono::system_clock::time_point end) {
  families_->runs.Add({{"result", report.failed() ? "failure" : "success"}}).Increment();
  for (const auto& [action, n] : actionCounts(report)) {
    families_->actions.Add({{"action", action}}).Increment(static_cast<double>(n));
  }
  if (!report.failed()) {
    families_->lastSuccess.Set(std::chrono::duration<double>(end.time_since_epoch()).count());
  }
}

void AgentMetrics::recordBackendCall(std::string_view backend, std::string_view op, std::string_view result) {
  families_->backend
      .Add({{"backend", std::string(backend)}, {"op", std::string(op)}, {"result", std::string(result)}})
      .Increment();
}

void AgentMetrics::recordCniRequests(const CniCalls& batch) {
  families_->cniLost.Increment(static_cast<double>(batch.lost));
  for (const auto& o : batch.calls) {
    families_->cniRequests.Add({{"verb", o.verb}, {"network", o.network}, {"code", std::to_string(o.code)}})
        .Increment();
    families_->cniDuration.Add({{"verb", o.verb}, {"network", o.network}}, cniDurationBuckets()).Observe(o.seconds);
  }
}

std::vector<std::weak_ptr<prometheus::Collectable>> AgentMetrics::collectables() const {
  return {registry_, node_};
}

std::string AgentMetrics::renderText() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (auto& f : node_->Collect()) {
    families.push_back(std::move(f));
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace ibcni::plugin::metrics
