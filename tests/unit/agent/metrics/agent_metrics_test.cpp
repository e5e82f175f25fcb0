// SPDX-License-Identifier: Apache-2.0
// The node agent's exposition: the registry rendered with prometheus-cpp's TextSerializer, its
// families, labels and values; the node's gauges counted at each scrape; the CNI observations'
// counters and histogram; --metrics-listen's forms.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "plugin/agent/cni_events.h"
#include "plugin/agent/metrics/agent_metrics.h"
#include "plugin/agent/metrics/metrics_server.h"
#include "plugin/state/call_event_ring.h"
#include "support/temp_dir.h"

namespace ibcni::testing {
namespace {

using ::testing::HasSubstr;

// Each of `samples` is a whole line of the exposition.
void expectSamples(const std::string& text, std::initializer_list<std::string> samples) {
  for (const auto& line : samples) {
    EXPECT_THAT(text, HasSubstr(line)) << text;
  }
}

plugin::NodeCounts sample() {
  plugin::NodeCounts c;
  c.attachments = {{"ibnet", "sriov", 2}, {"ipoibnet", "ipoib", 1}};
  c.addresses = {{"ibnet", "ibnet", 2, 251}, {"cnet", "cpool", 5, 27}};
  c.blocks = {{"cpool", "lost", 1}, {"cpool", "owned", 2}};
  return c;
}

// prometheus-cpp's registry leaves out a family until it has a sample: the runs (both results) and
// the last success have theirs from the start, the node's gauges are always described.
TEST(AgentMetrics, TheRunsTheLastSuccessAndTheNodesGaugesAreExposedFromTheStart) {
  plugin::metrics::AgentMetrics m([] { return plugin::NodeCounts{}; });
  const std::string text = m.renderText();
  for (const char* family : {"ibcni_reconcile_runs_total counter", "ibcni_reconcile_last_success_timestamp_seconds gauge",
                             "ibcni_attachments gauge", "ibcni_ipam_addresses gauge", "ibcni_ipam_blocks gauge"}) {
    EXPECT_THAT(text, HasSubstr(std::string("# TYPE ") + family)) << text;
  }
  expectSamples(text, {"ibcni_reconcile_runs_total{result=\"success\"} 0\n",
                       "ibcni_reconcile_runs_total{result=\"failure\"} 0\n",
                       "ibcni_reconcile_last_success_timestamp_seconds 0\n"});
}

TEST(AgentMetrics, TheNodesGaugesAreCountedAtEachScrape) {
  int scrapes = 0;
  plugin::metrics::AgentMetrics m([&scrapes] {
    ++scrapes;
    return sample();
  });
  const std::string text = m.renderText();
  EXPECT_EQ(scrapes, 1);
  expectSamples(text, {"ibcni_attachments{mode=\"sriov\",network=\"ibnet\"} 2\n",
                       "ibcni_attachments{mode=\"ipoib\",network=\"ipoibnet\"} 1\n",
                       "ibcni_ipam_addresses{network=\"ibnet\",pool=\"ibnet\",state=\"used\"} 2\n",
                       "ibcni_ipam_addresses{network=\"ibnet\",pool=\"ibnet\",state=\"free\"} 251\n",
                       "ibcni_ipam_addresses{network=\"cnet\",pool=\"cpool\",state=\"used\"} 5\n",
                       "ibcni_ipam_blocks{pool=\"cpool\",state=\"owned\"} 2\n",
                       "ibcni_ipam_blocks{pool=\"cpool\",state=\"lost\"} 1\n"});
  (void)m.renderText();
  EXPECT_EQ(scrapes, 2);
}

TEST(AgentMetrics, APassCountsItsResultItsActionsAndTheLastSuccess) {
  plugin::metrics::AgentMetrics m([] { return plugin::NodeCounts{}; });
  plugin::ReconcileReport ok;
  ok.attachments.push_back({"undone", "", "n", "c1", "net1", "", "", ""});
  ok.attachments.push_back({"undone", "", "n", "c2", "net1", "", "", ""});
  ok.allocations.push_back({"released", "", "n", "c3", "net1", "", {}, "address"});
  m.recordPass(ok, std::chrono::system_clock::time_point(std::chrono::seconds(1700000000)));
  plugin::ReconcileReport bad;
  bad.errors.push_back("cannot list /run/ibcni");
  m.recordPass(bad, std::chrono::system_clock::time_point(std::chrono::seconds(1700000060)));
  const std::string text = m.renderText();
  expectSamples(text, {"ibcni_reconcile_runs_total{result=\"success\"} 1\n",
                       "ibcni_reconcile_runs_total{result=\"failure\"} 1\n",
                       "ibcni_reconcile_actions_total{action=\"undone\"} 2\n",
                       "ibcni_reconcile_actions_total{action=\"released\"} 1\n"});
  EXPECT_THAT(text, HasSubstr("ibcni_reconcile_last_success_timestamp_seconds 1700000000\n"))
      << "the failed pass does not move it";
}

TEST(AgentMetrics, BackendCallsAreCountedPerBackendOperationAndResult) {
  plugin::metrics::AgentMetrics m([] { return plugin::NodeCounts{}; });
  m.recordBackendCall("etcd", "renew", "success");
  m.recordBackendCall("etcd", "renew", "success");
  m.recordBackendCall("etcd", "release", "timeout");
  const std::string text = m.renderText();
  EXPECT_THAT(text, HasSubstr("ibcni_ipam_backend_requests_total{backend=\"etcd\",op=\"renew\",result=\"success\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("ibcni_ipam_backend_requests_total{backend=\"etcd\",op=\"release\",result=\"timeout\"} 1\n"));
}

TEST(AgentMetrics, CniObservationsFillTheRequestCounterAndTheDurationHistogram) {
  plugin::metrics::AgentMetrics m([] { return plugin::NodeCounts{}; });
  EXPECT_THAT(m.renderText(), HasSubstr("\nibcni_cni_events_lost_total 0\n"));  // exposed before a loss
  m.recordCniRequests({{{"ADD", "ibnet", 0, 0.004}, {"ADD", "ibnet", 0, 0.2}, {"ADD", "ibnet", 11, 31.0},
                        {"DEL", "ibnet", 0, 0.0005}},
                       3});
  m.recordCniRequests({{}, 2});
  const std::string text = m.renderText();
  EXPECT_THAT(text, HasSubstr("\nibcni_cni_events_lost_total 5\n"));
  expectSamples(text, {"ibcni_cni_requests_total{code=\"0\",network=\"ibnet\",verb=\"ADD\"} 2\n",
                       "ibcni_cni_requests_total{code=\"11\",network=\"ibnet\",verb=\"ADD\"} 1\n",
                       "ibcni_cni_request_duration_seconds_count{network=\"ibnet\",verb=\"ADD\"} 3\n",
                       "ibcni_cni_request_duration_seconds_bucket{network=\"ibnet\",verb=\"ADD\",le=\"0.005\"} 1\n",
                       "ibcni_cni_request_duration_seconds_bucket{network=\"ibnet\",verb=\"ADD\",le=\"0.25\"} 2\n",
                       "ibcni_cni_request_duration_seconds_bucket{network=\"ibnet\",verb=\"ADD\",le=\"30\"} 2\n",
                       "ibcni_cni_request_duration_seconds_bucket{network=\"ibnet\",verb=\"ADD\",le=\"+Inf\"} 3\n",
                       "ibcni_cni_request_duration_seconds_bucket{network=\"ibnet\",verb=\"DEL\",le=\"0.001\"} 1\n"});
}

// The value of the exposition's sample that starts with `sample` ("name{labels}"); -1 without one.
double sampleValue(const std::string& text, const std::string& sample) {
  const auto at = text.find("\n" + sample + " ");
  if (at == std::string::npos) {
    return -1;
  }
  return std::stod(text.substr(at + sample.size() + 2));
}

// The plugin appends each call's event to its state directory's ring whether or not an agent reads
// it: with the agent stopped through a burst longer than the ring, the calls the ring still holds
// are counted when it is back and the rest as lost, so that /metrics tells the burst whole.
TEST(AgentMetrics, ABurstOf4600CallsWithTheAgentStoppedIsCountedPlusLostWhole) {
  const TempDir tmp("ibcni-burst");
  ASSERT_FALSE(tmp.path().empty());
  const std::string& root = tmp.path();
  plugin::CniEventDrain drain({root + "/state"}, root + "/default");  // the agent has started
  state::FileCallEvents ring;
  constexpr int kBurst = 4600;
  for (int i = 0; i < kBurst; ++i) {  // ... and is stopped: nothing drains
    state::CallEvent e;
    e.verb = cni::Command::kAdd;
    e.network = "ibnet";
    e.durationSeconds = 0.001;
    ASSERT_TRUE(ring.append(root + "/state", e).has_value());
  }
  plugin::metrics::AgentMetrics m([] { return plugin::NodeCounts{}; });
  m.recordCniRequests(drain.drain());  // the agent is back
  const std::string text = m.renderText();
  const double counted = sampleValue(text, "ibcni_cni_requests_total{code=\"0\",network=\"ibnet\",verb=\"ADD\"}");
  const double lost = sampleValue(text, "ibcni_cni_events_lost_total");
  EXPECT_EQ(counted, static_cast<double>(state::kCallEventSlots)) << text;
  EXPECT_EQ(lost, static_cast<double>(kBurst - state::kCallEventSlots)) << text;
  EXPECT_EQ(counted + lost, kBurst) << text;
}

// The pods' RDMA ports: each PMA counter a family of its own (data in bytes: 4-byte words x 4), the
// driver's hw_counters in one family labelled `counter`, the state 1 for ACTIVE only; nothing for a
// counter the device does not show.
TEST(AgentMetrics, ThePodsRdmaPortsAreExposedWithTheirPodNetworkDeviceAndPort) {
  plugin::NodeCounts c;
  plugin::PodPortCounters vf{"team-a", "trainer-0", "ibnet", {}};
  vf.port.device = "mlx5_3";
  vf.port.port = 1;
  vf.port.state = 4;
  vf.port.counters = {{"port_xmit_data", 1000}, {"port_rcv_data", 250}, {"port_xmit_packets", 9},
                      {"symbol_error", 2}, {"port_rcv_errors", 1}, {"link_downed", 3}};
  vf.port.hwCounters = {{"out_of_buffer", 7}};
  plugin::PodPortCounters rxe{"team-b", "probe", "roce", {}};
  rxe.port.device = "rxe0";
  rxe.port.state = 1;
  rxe.port.hwCounters = {{"sent_pkts", 254}};
  c.ports = {vf, rxe};
  plugin::metrics::AgentMetrics m([c] { return c; });
  const std::string text = m.renderText();
  const std::string l = R"({device="mlx5_3",network="ibnet",pod="trainer-0",pod_namespace="team-a",port="1"})";
  const std::string r = R"({device="rxe0",network="roce",pod="probe",pod_namespace="team-b",port="1")";
  expectSamples(text, {"ibcni_rdma_port_xmit_data_bytes_total" + l + " 4000\n",
                       "ibcni_rdma_port_rcv_data_bytes_total" + l + " 1000\n",
                       "ibcni_rdma_port_xmit_packets_total" + l + " 9\n",
                       "ibcni_rdma_port_symbol_errors_total" + l + " 2\n",
                       "ibcni_rdma_port_rcv_errors_total" + l + " 1\n",
                       "ibcni_rdma_port_link_downed_total" + l + " 3\n",
                       "ibcni_rdma_port_state" + l + " 1\n",
                       "ibcni_rdma_port_state" + r + "} 0\n",
                       "ibcni_rdma_port_hw_counters_total" + r + R"(,counter="sent_pkts"} 254)" + "\n",
                       "# TYPE ibcni_rdma_port_xmit_data_bytes_total counter\n"});
  EXPECT_THAT(text, ::testing::Not(HasSubstr("ibcni_rdma_port_rcv_packets_total"))) << "no device shows it";
}

TEST(AgentMetrics, TheDurationBucketsSpanOneMillisecondToThirtySeconds) {
  const auto b = plugin::metrics::cniDurationBuckets();
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b.front(), 0.001);
  EXPECT_EQ(b.back(), 30.0);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
}

TEST(MetricsListen, TheFormsCivetwebTakesAndTheRefusedOnesNamed) {
  EXPECT_EQ(plugin::metrics::listeningPort(":9464").value_or("?"), "9464");
  EXPECT_EQ(plugin::metrics::listeningPort("127.0.0.1:9464").value_or("?"), "127.0.0.1:9464");
  EXPECT_EQ(plugin::metrics::listeningPort("[::1]:9464").value_or("?"), "[::1]:9464");
  for (const char* bad : {"9464", ":0", ":65536", "localhost:", ":http", "::1:9464"}) {
    auto r = plugin::metrics::listeningPort(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_THAT(r.error().msg, HasSubstr(std::string("--metrics-listen ") + bad)) << bad;
  }
}

}  // namespace
}  // namespace ibcni::testing
