// SPDX-License-Identifier: Apache-2.0
// What one scrape of ibcni-agent's /metrics costs on a node with many attachments: N attachment
// records (the real store) and an ibcni-ipam pool with N allocations (the real embedded IPAM), then
// the node's gauges collected and rendered in process (AgentMetrics::renderText) and whole scrapes
// over HTTP from the agent's own listener (MetricsServer), each attachment's RDMA port counters (as
// the agent's loop keeps them) exposed too. Target: a scrape's median under 50 ms for 200
// attachments (PASS/FAIL, exit 1 on FAIL).
//   agent_scrape_bench [--records N (200)] [--samples S (50)]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_stats.h"
#include "ipam/embedded_ipam.h"
#include "plugin/agent/metrics/agent_metrics.h"
#include "plugin/agent/metrics/metrics_server.h"
#include "plugin/agent/node_counts.h"
#include "plugin/invocation.h"
#include "plugin/state/file_attachment_store.h"
#include "support/daemon_process.h"
#include "ibcni/config/net_conf.h"

namespace {

using namespace ibcni;  // NOLINT

// One ADD of the embedded IPAM, as ibcni makes it.
bool addAddress(ipam::EmbeddedIpam& ipam, const std::string& conf, const std::string& containerId) {
  auto parsed = config::parseNetConf(conf, cni::Command::kAdd, config::Role::kIpamPlugin);
  if (!parsed) {
    std::fprintf(stderr, "agent_scrape_bench: %s\n", parsed.error().msg.c_str());
    return false;
  }
  cni::CmdArgs args;
  args.command = cni::Command::kAdd;
  args.containerId = containerId;
  args.ifName = "net1";
  args.netns = "/proc/self/ns/net";
  const cni::CniArgs cniArgs;
  auto added = ipam.add(plugin::ipamRequest(*parsed, args, cniArgs, conf));
  if (!added) {
    std::fprintf(stderr, "agent_scrape_bench: %s\n", added.error().msg.c_str());
  }
  return added.has_value();
}

// One GET of /metrics; the bytes of the answer.
std::size_t scrape(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return 0;
  }
  const std::string req = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  (void)!::write(fd, req.data(), req.size());
  std::size_t total = 0;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) {
    total += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return total;
}

std::string status(const char* key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(key)) {
      return line;
    }
  }
  return "";
}

void print(const char* what, const std::vector<double>& samples) {
  const auto s = bench::stats(samples);
  std::printf("%-34s n=%zu median %.2f ms, p95 %.2f ms, max %.2f ms\n", what, s.n, s.median, s.p95, s.max);
}

}  // namespace

int main(int argc, char** argv) {
  int records = 200;
  int samples = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    (arg == "--records" ? records : samples) = std::atoi(argv[i + 1]);
  }
  std::string tmpl = "/dev/shm/ibcni-agent-bench-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("agent_scrape_bench: mkdtemp");
    return 1;
  }
  const std::string stateDir = tmpl + "/state";
  const std::string dataDir = tmpl + "/ipam";
  struct Cleanup {
    std::string dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{tmpl};
  state::FileAttachmentStore store(stateDir);
  ipam::EmbeddedIpam ipam;
  const std::string conf = R"({"cniVersion": "1.1.0", "name": "benchnet", "type": "ibcni", "ipam": {"type": "ibcni-ipam", "dataDir": ")" +
                           dataDir + R"(", "ranges": [[{"subnet": "10.90.0.0/20"}]]}})";
  for (int i = 0; i < records; ++i) {
    state::AttachmentRecord r;
    r.network = i % 2 == 0 ? "benchnet" : "othernet";
    r.mode = i % 3 == 0 ? "ipoib" : "sriov";
    r.containerId = "c" + std::to_string(i);
    r.ifName = "net1";
    r.netns = "/proc/self/ns/net";
    r.hostName = "vf" + std::to_string(i);
    r.config = conf;
    if (auto saved = store.save(r); !saved) {
      std::fprintf(stderr, "agent_scrape_bench: %s\n", saved.error().describe().c_str());
      return 1;
    }
    if (!addAddress(ipam, conf, r.containerId)) {
      std::fprintf(stderr, "agent_scrape_bench: cannot make attachment %d\n", i);
      return 1;
    }
  }
  // Each attachment's RDMA port as the agent's loop last read it (an mlx5 VF's PMA and hw counters):
  // the scrape exposes them from memory.
  std::vector<plugin::PodPortCounters> ports;
  for (int i = 0; i < records; ++i) {
    plugin::PodPortCounters p{"team", "pod-" + std::to_string(i), "benchnet", {}};
    p.port.device = "mlx5_" + std::to_string(i + 2);
    p.port.state = 4;
    for (const char* name : {"port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets",
                             "link_downed", "symbol_error", "port_rcv_errors"}) {
      p.port.counters[name] = 1000U + static_cast<unsigned>(i);
    }
    for (const char* name : {"out_of_buffer", "out_of_sequence", "packet_seq_err", "rnr_nak_retry_err"}) {
      p.port.hwCounters[name] = static_cast<unsigned>(i);
    }
    ports.push_back(std::move(p));
  }
  plugin::metrics::AgentMetrics metrics([stateDir, dataDir, ports] {
    plugin::NodeCounts c;
    plugin::countAttachments(
        {stateDir}, [](const std::string& d) { return std::make_unique<state::FileAttachmentStore>(d); }, c);
    plugin::countPools({dataDir}, std::chrono::milliseconds(500), c);
    c.ports = ports;
    return c;
  });
  std::vector<double> render;
  std::size_t bytes = 0;
  for (int i = 0; i < samples; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    bytes = metrics.renderText().size();
    render.push_back(bench::ms(std::chrono::steady_clock::now() - t0));
  }
  const int port = ibcni::testing::freeLoopbackPort();
  auto server = plugin::metrics::MetricsServer::start("127.0.0.1:" + std::to_string(port), metrics);
  if (!server) {
    std::fprintf(stderr, "agent_scrape_bench: %s\n", server.error().msg.c_str());
    return 1;
  }
  std::vector<double> http;
  for (int i = 0; i < samples; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (scrape(port) == 0) {
      std::fprintf(stderr, "agent_scrape_bench: no answer on port %d\n", port);
      return 1;
    }
    http.push_back(bench::ms(std::chrono::steady_clock::now() - t0));
  }
  std::printf("%d attachment records, one pool with %d allocations; /metrics is %zu bytes\n", records, records, bytes);
  print("collect + render (in process):", render);
  print("scrape over HTTP (GET /metrics):", http);
  std::printf("this process: %s, %s (the bench's own, with its fixtures)\n", status("VmRSS").c_str(),
              status("VmHWM").c_str());
  const double median = bench::stats(http).median;
  const bool ok = median < 50;
  std::printf("%s a scrape of %d attachments (their RDMA ports included): median %.2f ms (target < 50 ms)\n",
              ok ? "PASS" : "FAIL", records, median);
  return ok ? 0 : 1;
}
