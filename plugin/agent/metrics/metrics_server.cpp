// SPDX-License-Identifier: Apache-2.0
#include "plugin/agent/metrics/metrics_server.h"

#include <atomic>
#include <cstring>
#include <exception>

#include <CivetServer.h>
#include <civetweb.h>
#include <prometheus/exposer.h>

namespace ibcni::plugin::metrics {

namespace {

std::atomic<bool> gHealthy{false};

// /healthz, answered before civetweb's handlers (prometheus-cpp's Exposer serves /metrics only).
int beginRequest(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (info == nullptr || info->local_uri == nullptr || std::strcmp(info->local_uri, "/healthz") != 0) {
    return 0;
  }
  const bool healthy = gHealthy.load();
  const char* body = healthy ? "ok\n" : "stopping\n";
  const int status = healthy ? 200 : 503;
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n\r\n%s",
            status, healthy ? "OK" : "Service Unavailable", std::strlen(body), body);
  return status;
}

bool isPort(const std::string& s) {
  if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  const int p = std::stoi(s);
  return p >= 1 && p <= 65535;
}

}  // namespace

cni::Result<std::string> listeningPort(const std::string& listen) {
  const auto colon = listen.rfind(':');
  const std::string why = "--metrics-listen " + listen + ": ";
  if (colon == std::string::npos || !isPort(listen.substr(colon + 1))) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     why + "not ADDRESS:PORT with a port from 1 to 65535 (e.g. :9464, 127.0.0.1:9464, [::1]:9464)");
  }
  const std::string host = listen.substr(0, colon);
  if (host.empty() || host == "0.0.0.0") {
    return listen.substr(colon + 1);  // civetweb: every IPv4 address
  }
  if (host.find(':') != std::string::npos && !(host.front() == '[' && host.back() == ']')) {
    return cni::fail(cni::Errc::kInvalidConfig, why + "an IPv6 address goes in brackets: [" + host + "]" +
                                                    listen.substr(colon));
  }
  return listen;
}

cni::Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& listen,
                                                                const AgentMetrics& metrics) {
  auto port = listeningPort(listen);
  if (!port) {
    return std::unexpected(port.error());
  }
  static CivetCallbacks callbacks;
  callbacks.begin_request = beginRequest;
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", *port, "num_threads", "2"}, &callbacks);
  } catch (const std::exception& e) {
    return cni::fail(cni::Errc::kIoFailure,
                     "--metrics-listen " + listen + ": cannot listen there (the port is in use, or the address is "
                                                    "not one of this host's): choose another with --metrics-listen",
                     e.what());
  }
  for (const auto& c : metrics.collectables()) {
    server->exposer_->RegisterCollectable(c);
  }
  return server;
}

MetricsServer::~MetricsServer() = default;

int MetricsServer::port() const {
  const auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

void MetricsServer::setHealthy(bool healthy) { gHealthy.store(healthy); }

}  // namespace ibcni::plugin::metrics
