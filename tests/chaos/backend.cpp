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

constexpr const char* kUser = "system:serviceaccount:kube-system:ibcni";
constexpr const char* kToken = "chaos-token-5c1e";

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
    return startEmulator(dir);
  }
  return {};
}

std::expected<void, std::string> Backend::startEmulator(const std::string& dir) {
  k8s_ = std::make_unique<testing::K8sEmulator>();
  // The chart's RBAC for ibcni's ServiceAccount: Leases in kube-system, Nodes get.
  const std::string rbac = R"({"rules": [{"user": ")" + std::string(kUser) +
                           R"(", "namespace": "kube-system", "resource": "leases",
      "verbs": ["get", "list", "create", "update", "delete"]},
     {"user": ")" + std::string(kUser) + R"(", "resource": "nodes", "verbs": ["get", "list"]}]})";
  if (auto r = fromAssertion(k8s_->start(etcd_.endpointList(), {{kToken, kUser}}, rbac)); !r) {
    return std::unexpected("the Kubernetes API emulator: " + r.error());
  }
  kubeconfig_ = dir + "/chaos.kubeconfig";
  return fromAssertion(testing::writeKubeconfig(kubeconfig_, k8s_->url(), kToken));
}

void Backend::stop() {
  if (k8s_) {
    k8s_->stop();
    k8s_.reset();
  }
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

std::expected<void, std::string> Backend::emulatorFault(const std::string& faultJson) {
  if (!k8s_) {
    return std::unexpected("no emulator (backend " + kind_ + ")");
  }
  auto r = testing::httpCall("POST", k8s_->url() + "/_emulator/faults", faultJson);
  if (!r) {
    return std::unexpected(r.error());
  }
  return {};
}

bool Backend::emulatorFaultArmed() const {
  if (!k8s_) {
    return false;
  }
  auto r = testing::httpCall("GET", k8s_->url() + "/_emulator/faults");
  if (!r) {
    return true;  // unknown: say armed, so that nothing is concluded from the next answers
  }
  const json j = json::parse(*r, nullptr, false);
  return !j.is_object() || !j.value("fault", json()).is_null();
}

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
  if (k8s_) {
    if (auto r = testing::httpCall("DELETE", k8s_->url() + "/_emulator/faults"); !r) {
      return std::unexpected(r.error());
    }
  }
  return {};
}

void Backend::resetEmulatorLogs() const {
  if (!k8s_) {
    return;
  }
  // Every body the plugin sent is logged (memory, and a file that would grow over a long run).
  (void)testing::httpCall("DELETE", k8s_->url() + "/_emulator/validation");
  (void)::truncate((k8s_->dir() + "/validation.jsonl").c_str(), 0);
}

std::expected<void, std::string> Backend::createNode(const std::string& name) {
  if (!k8s_) {
    return {};
  }
  // 201 created, 409 there already; anything else (etcd without quorum: 500) is an error.
  auto r = testing::httpCall("POST", k8s_->url() + "/_emulator/nodes", json{{"name", name}}.dump());
  if (!r && r.error().find("HTTP 409") == std::string::npos) {
    return std::unexpected(r.error());
  }
  return {};
}

std::expected<void, std::string> Backend::deleteNode(const std::string& name) {
  if (!k8s_) {
    return {};
  }
  // 200 deleted, 404 gone already; anything else is an error.
  auto r = testing::httpCall("DELETE", k8s_->url() + "/_emulator/nodes/" + name);
  if (!r && r.error().find("HTTP 404") == std::string::npos) {
    return std::unexpected(r.error());
  }
  return {};
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
