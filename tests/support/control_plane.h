// SPDX-License-Identifier: Apache-2.0
// A real Kubernetes API server for the C++ tests (label "kubernetes"): control-plane/control_plane.sh
// (etcd and kube-apiserver built from their modules by scripts/build-upstream.sh), and the fault
// proxy in front of it (control-plane/api_proxy.js) that the code under test talks to.
//
// Under CTest every test that needs it shares one control plane per ctest run (the fixture
// `control_plane`, FIXTURES_SETUP in tests/support/CMakeLists.txt: IBCNI_CONTROL_PLANE names its
// directory); those tests hold RESOURCE_LOCK control_plane, because Nodes are cluster-wide. A test
// program run by hand (no IBCNI_CONTROL_PLANE) starts a private one. Each test works in a namespace
// of its own (ApiProxy::freshNamespace) and starts its own proxy (faults and counts of its own).
//
//   ControlPlane cp;  if (!ControlPlane::built()) GTEST_SKIP() << ControlPlane::kNotBuilt;
//   ApiProxy api;     ASSERT_TRUE(startApi(cp, api));           // cp.start(), then api.start(cp)
//   const auto ns = api.freshNamespace("k8s-backend");           // "k8s-backend-<pid>-<n>"
//   const auto token = api.serviceAccount(*ns, "ibcni", kLeaseRules);  // a Role in ns, its token
//   api.url();                      // "http://127.0.0.1:PORT": the API through the proxy
//   api.fault(R"({"status": 500, "count": 1})");
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <expected>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace ibcni::testing {

class ControlPlane {
 public:
  static constexpr const char* kNotBuilt =
      "the upstream components are not built on this machine (scripts/build-upstream.sh)";

  ControlPlane() = default;
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;
  /// Stops a private control plane and removes its directory (the fixture's stays).
  ~ControlPlane();

  /// Whether kube-apiserver and etcd are built (scripts/build-upstream.sh --dir).
  [[nodiscard]] static bool built();

  /// The fixture's control plane (IBCNI_CONTROL_PLANE), or a private one. `etcdServers` (a private
  /// one only): over those etcd members instead of an etcd of its own. `with`: a private one with
  /// those components too ("controller-manager,scheduler"; the fixture's runs neither).
  [[nodiscard]] ::testing::AssertionResult start(const std::string& etcdServers = "", const std::string& with = "");
  void stop();

  [[nodiscard]] const std::string& server() const { return env_.at("CP_SERVER"); }
  [[nodiscard]] const std::string& ca() const { return env_.at("CP_CA"); }
  [[nodiscard]] const std::string& adminCert() const { return env_.at("CP_ADMIN_CERT"); }
  [[nodiscard]] const std::string& adminKey() const { return env_.at("CP_ADMIN_KEY"); }
  [[nodiscard]] const std::string& adminKubeconfig() const { return env_.at("CP_ADMIN"); }
  /// The kubectl built with the API server.
  [[nodiscard]] const std::string& kubectl() const { return env_.at("CP_KUBECTL"); }

 private:
  [[nodiscard]] ::testing::AssertionResult readEnv(const std::string& dir);

  std::map<std::string, std::string> env_;
  std::string privateDir_;
  pid_t pid_ = -1;
};

/// The fault proxy in front of a ControlPlane's API server: plain HTTP on a loopback port of its
/// own, passed on with the client's token; faults, counts and the admin's set-up requests.
class ApiProxy {
 public:
  using Json = nlohmann::json;

  ApiProxy() = default;
  ApiProxy(const ApiProxy&) = delete;
  ApiProxy& operator=(const ApiProxy&) = delete;
  ~ApiProxy();

  [[nodiscard]] ::testing::AssertionResult start(const ControlPlane& cp);
  void stop();
  [[nodiscard]] const std::string& url() const noexcept { return url_; }
  [[nodiscard]] const std::string& dir() const noexcept { return dir_; }

  /// One request as the cluster admin: {status, parsed body (null when not JSON)}; status 0 when
  /// the proxy could not be reached.
  std::pair<long, Json> admin(const std::string& method, const std::string& path, const Json& body = nullptr) const;
  /// The body of a GET as the cluster admin, as text ("" unless 200).
  [[nodiscard]] std::string adminText(const std::string& path) const;
  /// One request with `token` (none when empty), through the proxy and its fault.
  std::pair<long, Json> call(const std::string& method, const std::string& path, const Json& body = nullptr,
                             const std::string& token = "") const;

  // --- Set-up, as the admin ---
  /// A namespace no other test uses: "<prefix>-<pid>-<n>", created.
  [[nodiscard]] std::expected<std::string, std::string> freshNamespace(const std::string& prefix) const;
  [[nodiscard]] ::testing::AssertionResult createNamespace(const std::string& ns) const;
  /// ServiceAccount `sa` of `ns` (created when absent) bound to a Role of `rules` in `ns` and, when
  /// `clusterRules` is not empty, to a ClusterRole of them; its token (TokenRequest, 24 h).
  [[nodiscard]] std::expected<std::string, std::string> serviceAccount(const std::string& ns, const std::string& sa,
                                                                       const Json& rules,
                                                                       const Json& clusterRules = Json::array()) const;
  /// A Node object (201; 409: there already). deleteNode: 200 or 404.
  [[nodiscard]] ::testing::AssertionResult createNode(const std::string& name) const;
  [[nodiscard]] ::testing::AssertionResult deleteNode(const std::string& name) const;

  // --- Faults and counts (api_proxy.js) ---
  [[nodiscard]] ::testing::AssertionResult fault(const Json& f) const;
  [[nodiscard]] ::testing::AssertionResult clearFault() const;
  /// Whether a fault is still armed (unknown: true).
  [[nodiscard]] bool faultArmed() const;
  /// Requests being served now; -1 when unknown.
  [[nodiscard]] int inflight() const;
  /// Waits (up to `seconds`) until no request is being served.
  [[nodiscard]] bool idle(int seconds = 10) const;
  /// "<verb> <resource>" -> {total, byCode}, and "warnings".
  [[nodiscard]] Json stats() const;
  void clearStats() const;
  /// Every body sent was taken as valid by the server: some request was passed on, none was
  /// answered 400 or 422 (Invalid), and the server sent no Warning (an unknown or dropped field).
  [[nodiscard]] ::testing::AssertionResult allValid() const;

 private:
  std::string dir_;
  std::string url_;
  pid_t pid_ = -1;
};

/// The control plane (the fixture's, or a private one over `etcdServers`), then the proxy in front
/// of it: a test's whole start.
[[nodiscard]] ::testing::AssertionResult startApi(ControlPlane& cp, ApiProxy& api, const std::string& etcdServers = "");

/// A test suite's control plane and proxy, started once for all its tests:
///   static void SetUpTestSuite() { suite_.start(); }      static void TearDownTestSuite() { suite_.stop(); }
///   void SetUp() override { ASSERT_EQ(suite_.failed, ""); if (!suite_.cp) GTEST_SKIP() << ...; }
struct SuiteApi {
  std::unique_ptr<ControlPlane> cp;  ///< null when the components are not built, or it failed
  std::unique_ptr<ApiProxy> api;
  std::string failed;                ///< why it did not start, "" when it did (or was not built)

  /// A control plane (`with`: a private one with those components too) and its proxy.
  void start(const std::string& with = "");
  void stop() {
    api.reset();
    cp.reset();
  }
};

/// kube-apiserver's own count of the requests it served for `resources` (the sum of its
/// apiserver_request_total series with resource="<one of them>", read from /metrics as the admin);
/// -1 when it cannot be read.
[[nodiscard]] long apiServerRequestCount(const ApiProxy& api, const std::vector<std::string>& resources);

/// Lease rules of the chart's Role (get, list, create, update, delete) and the Node rule of its
/// ClusterRole (get), for serviceAccount().
[[nodiscard]] nlohmann::json leaseRules(std::vector<std::string> verbs = {"get", "list", "create", "update",
                                                                          "delete"});
[[nodiscard]] nlohmann::json nodeRules(std::vector<std::string> verbs = {"get"});

/// A kubeconfig (0600) for `server` (http:// or https:// with `ca`) with a bearer token, in `ns`.
[[nodiscard]] ::testing::AssertionResult writeTokenKubeconfig(const std::string& path, const std::string& server,
                                                              const std::string& token, const std::string& ns = "",
                                                              const std::string& ca = "");

}  // namespace ibcni::testing
