// SPDX-License-Identifier: Apache-2.0
#include "json_text.h"
#include "backend.h"

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <set>

#include "ibcni/os/text.h"
#include "support/cluster_sim.h"

namespace ibcni::chaos {

namespace {

using nlohmann::json;

std::expected<void, std::string> fromAssertion(const ::testing::AssertionResult& r) {
  if (r) {
    return {};
  }
  return std::unexpected(std::string(r.message()));
}

}  // namespace

Backend::~Backend() { stop(); }

std::expected<void, std::string> Backend::start(const std::string& kind, const std::string& dir) {
  kind_ = kind;
  if (auto r = fromAssertion(etcd_.start(3)); !r) {
    return std::unexpected("etcd: " + r.error());
  }
  if (kind == "kubernetes") {
    return startApiServer(dir);
  }
  return {};
}

// kube-apiserver over the 3 members, the proxy in front of it, and ServiceAccount kube-system/ibcni
// with the chart's rights (Leases in kube-system, Nodes get) and its token in the kubeconfig.
std::expected<void, std::string> Backend::startApiServer(const std::string& dir) {
  cp_ = std::make_unique<testing::ControlPlane>();
  api_ = std::make_unique<testing::ApiProxy>();
  if (auto r = fromAssertion(testing::startApi(*cp_, *api_, etcd_.endpointList())); !r) {
    return std::unexpected("kube-apiserver and its fault proxy: " + r.error());
  }
  auto token = api_->serviceAccount("kube-system", "ibcni", testing::leaseRules(), testing::nodeRules());
  if (!token) {
    return std::unexpected(token.error());
  }
  kubeconfig_ = dir + "/chaos.kubeconfig";
  return fromAssertion(testing::writeTokenKubeconfig(kubeconfig_, api_->url(), *token));
}

void Backend::stop() {
  api_.reset();
  cp_.reset();
  etcd_.stop();
}

int Backend::runningMembers() const {
  int n = 0;
  for (int i = 0; i < etcd_.size(); ++i) {
    n += etcd_.running(i) ? 1 : 0;
  }
  return n;
}

std::expected<void, std::string> Backend::stopMember(int member) { return fromAssertion(etcd_.stopMember(member)); }

std::expected<void, std::string> Backend::startMember(int member) {
  return fromAssertion(etcd_.startMember(member));
}

std::expected<void, std::string> Backend::apiFault(const std::string& faultJson) {
  if (!api_) {
    return std::unexpected("no API server (backend " + kind_ + ")");
  }
  return fromAssertion(api_->fault(json::parse(faultJson)));
}

bool Backend::apiFaultArmed() const { return api_ && api_->faultArmed(); }

std::expected<void, std::string> Backend::waitHealthy() {
  if (auto r = fromAssertion(etcd_.waitHealthy()); !r) {
    return std::unexpected("etcd did not become healthy: " + r.error());
  }
  return {};
}

std::expected<void, std::string> Backend::heal() {
  if (runningMembers() < members()) {
    for (int i = 0; i < etcd_.size(); ++i) {
      if (!etcd_.running(i)) {
        if (auto r = startMember(i); !r) {
          return r;
        }
      }
    }
    if (auto r = waitHealthy(); !r) {
      return r;
    }
  }
  if (api_) {
    if (auto r = fromAssertion(api_->clearFault()); !r) {
      return r;
    }
    // A request the proxy still holds (a delay outlasting its client's timeout) reaches the server
    // after its client gave up: healed means it has landed, so that the passes after it see what
    // it wrote (a claim nobody knows of), as an agent's next pass would.
    if (!api_->idle(30)) {
      return std::unexpected("the fault proxy still holds a request 30 s after the faults were cleared");
    }
  }
  return {};
}

void Backend::resetApiCounts() const {
  if (api_) {
    api_->clearStats();
  }
}

std::expected<void, std::string> Backend::createNode(const std::string& name) {
  if (!api_) {
    return {};
  }
  return fromAssertion(api_->createNode(name));
}

std::expected<void, std::string> Backend::deleteNode(const std::string& name) {
  if (!api_) {
    return {};
  }
  return fromAssertion(api_->deleteNode(name));
}

std::expected<std::string, std::string> Backend::gateway(const std::string& path, const std::string& body) const {
  std::string errors;
  for (int i = 0; i < etcd_.size(); ++i) {
    if (!etcd_.running(i)) {
      continue;
    }
    auto r = testing::httpCall("POST", etcd_.endpoint(i) + path, body);
    if (r) {
      return r;
    }
    errors += r.error() + "; ";
  }
  return std::unexpected(errors.empty() ? std::string("no etcd member is running") : errors);
}

std::expected<std::vector<EtcdKv>, std::string> Backend::range(const std::string& prefix) const {
  const json req{{"key", os::base64Encode(prefix)},
                 {"range_end", os::base64Encode(testing::etcdPrefixEnd(prefix))}};
  auto body = gateway("/v3/kv/range", req.dump());
  if (!body) {
    return std::unexpected(body.error());
  }
  const json j = json::parse(*body, nullptr, false);
  std::vector<EtcdKv> out;
  if (!j.is_object() || !j.contains("kvs") || !j["kvs"].is_array()) {
    return out;
  }
  for (const auto& kv : j["kvs"]) {
    out.push_back({os::base64Decode(jsonText(kv, "key")).value_or(""),
                   os::base64Decode(jsonText(kv, "value")).value_or(""), jsonText(kv, "lease")});
  }
  return out;
}

std::expected<int, std::string> Backend::revokeLeasesOf(const std::string& prefix, const std::string& node) const {
  auto kvs = range(prefix);
  if (!kvs) {
    return std::unexpected(kvs.error());
  }
  std::set<std::string> leases;
  for (const auto& kv : *kvs) {
    const json v = json::parse(kv.value, nullptr, false);
    if (jsonText(v, "node") == node && !kv.lease.empty() && kv.lease != "0") {
      leases.insert(kv.lease);
    }
  }
  for (const auto& id : leases) {
    if (auto r = gateway("/v3/lease/revoke", json{{"ID", id}}.dump()); !r) {
      return std::unexpected("revoking lease " + id + ": " + r.error());
    }
  }
  return static_cast<int>(leases.size());
}

void Backend::deletePrefix(const std::string& prefix) const {
  const json req{{"key", os::base64Encode(prefix)},
                 {"range_end", os::base64Encode(testing::etcdPrefixEnd(prefix))}};
  (void)gateway("/v3/kv/deleterange", req.dump());
}

void Backend::compact() const {
  auto body = gateway("/v3/kv/range", json{{"key", os::base64Encode("/")}, {"limit", 1}}.dump());
  if (!body) {
    return;
  }
  const json j = json::parse(*body, nullptr, false);
  const std::string revision = j.is_object() && j.contains("header") ? jsonText(j["header"], "revision") : "";
  if (!revision.empty()) {
    (void)gateway("/v3/kv/compaction", json{{"revision", revision}}.dump());
  }
}

}  // namespace ibcni::chaos
