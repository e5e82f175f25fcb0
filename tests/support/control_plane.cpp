// SPDX-License-Identifier: Apache-2.0
#include "support/control_plane.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "lib/http/curl_http_client.h"
#include "support/etcd_cluster.h"
#include "support/exec_program.h"

#ifndef IBCNI_SOURCE_DIR
#error "IBCNI_SOURCE_DIR (the source tree) must be defined"
#endif

namespace ibcni::testing {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

const std::string kScripts = std::string(IBCNI_SOURCE_DIR) + "/tests/support/control-plane";

std::string makeTempDir(const char* what) {
  std::string tmpl = (fs::temp_directory_path() / (std::string("ibcni-") + what + "-XXXXXX")).string();
  return ::mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
}

// Stops a child by its PID: SIGTERM, SIGKILL after `grace`; reaps it.
void stopChild(pid_t& pid, std::chrono::seconds grace) {
  if (pid <= 0) {
    return;
  }
  ::kill(pid, SIGTERM);
  const auto deadline = Clock::now() + grace;
  int status = 0;
  pid_t r = 0;
  while ((r = ::waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (r == 0) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  pid = -1;
}

std::vector<std::string> environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    env.emplace_back(*e);
  }
  return env;
}

// Spawns `args` tied to this process, stdin /dev/null, stdout and stderr to `log`.
pid_t spawnLogged(const std::vector<std::string>& args, const std::string& log) {
  const int logFd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const int nullFd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t pid = -1;
  if (logFd >= 0 && nullFd >= 0) {
    pid = spawnTiedToTest(args, environment(), nullFd, logFd, logFd);
  }
  if (logFd >= 0) {
    ::close(logFd);
  }
  if (nullFd >= 0) {
    ::close(nullFd);
  }
  return pid;
}

http::Method methodOf(const std::string& m) {
  return m == "POST"     ? http::Method::kPost
         : m == "PUT"    ? http::Method::kPut
         : m == "DELETE" ? http::Method::kDelete
         : m == "PATCH"  ? http::Method::kPatch
                         : http::Method::kGet;
}

std::pair<long, json> send(const std::string& method, const std::string& url, const json& body,
                           const std::string& token, const std::string& contentType = "application/json") {
  static http::CurlHttpClient client;
  http::Request r;
  r.method = methodOf(method);
  r.url = url;
  r.timeout = std::chrono::seconds(30);
  if (!token.empty()) {
    r.headers.push_back({"Authorization", "Bearer " + token});
  }
  if (!body.is_null()) {
    r.body = body.dump();
    r.headers.push_back({"Content-Type", contentType});
  }
  const auto a = client.send(r);
  if (!a) {
    return {0, json(a.error().describe())};
  }
  return {a->status, json::parse(a->body, nullptr, false)};
}

std::string describe(const std::pair<long, json>& a) {
  return "HTTP " + std::to_string(a.first) + ": " + (a.second.is_discarded() ? "(not JSON)" : a.second.dump());
}

}  // namespace

// ---- ControlPlane --------------------------------------------------------------------------------

ControlPlane::~ControlPlane() { stop(); }

bool ControlPlane::built() {
  for (const char* component : {"kubernetes", "etcd"}) {
    const auto run = runProgram({IBCNI_SOURCE_DIR "/scripts/build-upstream.sh", "--dir", component}, environment(),
                                std::nullopt, std::chrono::seconds(60));
    if (run.status != 0) {
      return false;
    }
  }
  return true;
}

::testing::AssertionResult ControlPlane::readEnv(const std::string& dir) {
  std::ifstream in(dir + "/env");
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) {
      env_[line.substr(0, eq)] = line.substr(eq + 1);
    }
  }
  for (const char* k : {"CP_SERVER", "CP_CA", "CP_ADMIN", "CP_ADMIN_CERT", "CP_ADMIN_KEY"}) {
    if (!env_.contains(k)) {
      return ::testing::AssertionFailure() << "ControlPlane: " << dir << "/env has no " << k;
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ControlPlane::start(const std::string& etcdServers, const std::string& with) {
  if (const char* shared = std::getenv("IBCNI_CONTROL_PLANE");
      shared != nullptr && etcdServers.empty() && with.empty()) {
    if (!fs::exists(std::string(shared) + "/ready")) {
      return ::testing::AssertionFailure() << "ControlPlane: the fixture's control plane (IBCNI_CONTROL_PLANE=" << shared
                                           << ") is not ready: see the test control_plane_up";
    }
    return readEnv(shared);
  }
  privateDir_ = makeTempDir("control-plane");
  if (privateDir_.empty()) {
    return ::testing::AssertionFailure() << "ControlPlane: mkdtemp: " << std::strerror(errno);
  }
  const std::string dir = privateDir_ + "/cp";
  std::vector<std::string> args{kScripts + "/control_plane.sh", "serve", dir};
  if (!etcdServers.empty()) {
    args.insert(args.end(), {"--etcd", etcdServers});
  }
  if (!with.empty()) {
    args.insert(args.end(), {"--with", with});
  }
  pid_ = spawnLogged(args, privateDir_ + "/serve.log");
  if (pid_ < 0) {
    return ::testing::AssertionFailure() << "ControlPlane: spawn: " << std::strerror(errno);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(180);
  while (!fs::exists(dir + "/ready")) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_ || Clock::now() > deadline) {
      pid_ = -1;
      return ::testing::AssertionFailure() << "ControlPlane: control_plane.sh did not start:\n"
                                           << indentedTail(readFile(privateDir_ + "/serve.log"), 30);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return readEnv(dir);
}

void ControlPlane::stop() {
  stopChild(pid_, std::chrono::seconds(20));
  if (!privateDir_.empty()) {
    std::error_code ec;
    fs::remove_all(privateDir_, ec);
    privateDir_.clear();
  }
}

// ---- ApiProxy ------------------------------------------------------------------------------------

ApiProxy::~ApiProxy() {
  stop();
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

::testing::AssertionResult ApiProxy::start(const ControlPlane& cp) {
  const auto node = findProgram("node");
  if (!node) {
    return ::testing::AssertionFailure() << "ApiProxy: node (Node.js) is not installed (scripts/install-deps.sh)";
  }
  dir_ = makeTempDir("api-proxy");
  if (dir_.empty()) {
    return ::testing::AssertionFailure() << "ApiProxy: mkdtemp: " << std::strerror(errno);
  }
  const std::string portFile = dir_ + "/port";
  pid_ = spawnLogged({*node, kScripts + "/api_proxy.js", "--upstream", cp.server(), "--ca", cp.ca(), "--cert",
                      cp.adminCert(), "--key", cp.adminKey(), "--port-file", portFile},
                     dir_ + "/log");
  if (pid_ < 0) {
    return ::testing::AssertionFailure() << "ApiProxy: spawn: " << std::strerror(errno);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    const std::string port = readFile(portFile);
    if (!port.empty() && port.back() == '\n') {
      url_ = "http://127.0.0.1:" + port.substr(0, port.size() - 1);
      return ::testing::AssertionSuccess();
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return ::testing::AssertionFailure() << "ApiProxy: api_proxy.js exited:\n" << indentedTail(readFile(dir_ + "/log"), 20);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop();
  return ::testing::AssertionFailure() << "ApiProxy: api_proxy.js did not listen within 20 s";
}

void ApiProxy::stop() { stopChild(pid_, std::chrono::seconds(5)); }

std::pair<long, json> ApiProxy::admin(const std::string& method, const std::string& path, const json& body) const {
  return send(method, url_ + "/_proxy/admin" + path, body, "");
}

std::string ApiProxy::adminText(const std::string& path) const {
  static http::CurlHttpClient client;
  http::Request r;
  r.url = url_ + "/_proxy/admin" + path;
  r.timeout = std::chrono::seconds(30);
  const auto a = client.send(r);
  return a && a->status == 200 ? a->body : std::string();
}

std::pair<long, json> ApiProxy::call(const std::string& method, const std::string& path, const json& body,
                                     const std::string& token) const {
  return send(method, url_ + path, body, token);
}

std::expected<std::string, std::string> ApiProxy::freshNamespace(const std::string& prefix) const {
  static std::atomic<int> next{0};
  const std::string ns = prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(next++);
  if (auto r = createNamespace(ns); !r) {
    return std::unexpected(std::string(r.message()));
  }
  return ns;
}

::testing::AssertionResult ApiProxy::createNamespace(const std::string& ns) const {
  const auto a = admin("POST", "/api/v1/namespaces", {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
  if (a.first != 201 && a.first != 409) {
    return ::testing::AssertionFailure() << "creating namespace " << ns << ": " << describe(a);
  }
  return ::testing::AssertionSuccess();
}

std::expected<std::string, std::string> ApiProxy::serviceAccount(const std::string& ns, const std::string& sa,
                                                                  const json& rules, const json& clusterRules) const {
  const auto created = [](const std::pair<long, json>& a) { return a.first == 201 || a.first == 409; };
  const json meta{{"name", sa}, {"namespace", ns}};
  const json subject = json::array({{{"kind", "ServiceAccount"}, {"name", sa}, {"namespace", ns}}});
  if (auto a = admin("POST", "/api/v1/namespaces/" + ns + "/serviceaccounts",
                     {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", meta}});
      !created(a)) {
    return std::unexpected("creating ServiceAccount " + ns + "/" + sa + ": " + describe(a));
  }
  const std::string rbac = "/apis/rbac.authorization.k8s.io/v1";
  if (!rules.empty()) {
    if (auto a = admin("POST", rbac + "/namespaces/" + ns + "/roles",
                       {{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "Role"}, {"metadata", meta}, {"rules", rules}});
        !created(a)) {
      return std::unexpected("creating Role " + ns + "/" + sa + ": " + describe(a));
    }
    if (auto a = admin("POST", rbac + "/namespaces/" + ns + "/rolebindings",
                       {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                        {"kind", "RoleBinding"},
                        {"metadata", meta},
                        {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", sa}}},
                        {"subjects", subject}});
        !created(a)) {
      return std::unexpected("creating RoleBinding " + ns + "/" + sa + ": " + describe(a));
    }
  }
  if (!clusterRules.empty()) {
    const json cmeta{{"name", ns + ":" + sa}};
    if (auto a = admin("POST", rbac + "/clusterroles",
                       {{"apiVersion", "rbac.authorization.k8s.io/v1"}, {"kind", "ClusterRole"}, {"metadata", cmeta}, {"rules", clusterRules}});
        !created(a)) {
      return std::unexpected("creating ClusterRole " + ns + ":" + sa + ": " + describe(a));
    }
    if (auto a = admin("POST", rbac + "/clusterrolebindings",
                       {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                        {"kind", "ClusterRoleBinding"},
                        {"metadata", cmeta},
                        {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", ns + ":" + sa}}},
                        {"subjects", subject}});
        !created(a)) {
      return std::unexpected("creating ClusterRoleBinding " + ns + ":" + sa + ": " + describe(a));
    }
  }
  const auto t = admin("POST", "/api/v1/namespaces/" + ns + "/serviceaccounts/" + sa + "/token",
                       {{"apiVersion", "authentication.k8s.io/v1"},
                        {"kind", "TokenRequest"},
                        {"spec", {{"expirationSeconds", 86400}}}});
  if (t.first != 201 || !t.second.is_object() || !t.second.contains("status")) {
    return std::unexpected("requesting a token of " + ns + "/" + sa + ": " + describe(t));
  }
  // The authorizer learns of new bindings from its informers, a moment after they are made: wait
  // until it allows the first rule, or a test started at once is refused (403) for a while.
  if (rules.empty() && clusterRules.empty()) {
    return t.second["status"].value("token", "");
  }
  const json& rule = !rules.empty() ? rules[0] : clusterRules[0];
  const json review = {{"apiVersion", "authorization.k8s.io/v1"},
                       {"kind", "SubjectAccessReview"},
                       {"spec",
                        {{"user", "system:serviceaccount:" + ns + ":" + sa},
                         {"groups", {"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}},
                         {"resourceAttributes",
                          {{"namespace", ns},
                           {"verb", rule["verbs"][0]},
                           {"group", rule["apiGroups"][0]},
                           {"resource", rule["resources"][0]}}}}}};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    const auto r = admin("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review);
    if (r.first == 201 && r.second.value("/status/allowed"_json_pointer, false)) {
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return std::unexpected("the authorizer never allowed " + ns + "/" + sa + " its rights: " + describe(r));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return t.second["status"].value("token", "");
}

::testing::AssertionResult ApiProxy::createNode(const std::string& name) const {
  const auto a = admin("POST", "/api/v1/nodes", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}});
  if (a.first != 201 && a.first != 409) {
    return ::testing::AssertionFailure() << "creating Node " << name << ": " << describe(a);
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ApiProxy::deleteNode(const std::string& name) const {
  const auto a = admin("DELETE", "/api/v1/nodes/" + name);
  if (a.first != 200 && a.first != 404) {
    return ::testing::AssertionFailure() << "deleting Node " << name << ": " << describe(a);
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ApiProxy::fault(const json& f) const {
  const auto a = send("POST", url_ + "/_proxy/faults", f, "");
  if (a.first != 200) {
    return ::testing::AssertionFailure() << "arming fault " << f.dump() << ": " << describe(a);
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult ApiProxy::clearFault() const {
  const auto a = send("DELETE", url_ + "/_proxy/faults", nullptr, "");
  if (a.first != 200) {
    return ::testing::AssertionFailure() << "disarming the fault: " << describe(a);
  }
  return ::testing::AssertionSuccess();
}

bool ApiProxy::faultArmed() const {
  const auto a = send("GET", url_ + "/_proxy/faults", nullptr, "");
  return a.first != 200 || !a.second.is_object() || !a.second.value("fault", json()).is_null();
}

int ApiProxy::inflight() const {
  const auto a = send("GET", url_ + "/_proxy/inflight", nullptr, "");
  return a.first == 200 && a.second.is_object() ? a.second.value("inflight", -1) : -1;
}

bool ApiProxy::idle(int seconds) const {
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < deadline) {
    if (inflight() == 0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

json ApiProxy::stats() const {
  const auto a = send("GET", url_ + "/_proxy/stats", nullptr, "");
  return a.first == 200 ? a.second : json();
}

void ApiProxy::clearStats() const { (void)send("DELETE", url_ + "/_proxy/stats", nullptr, ""); }

::testing::AssertionResult ApiProxy::allValid() const {
  const json s = stats();
  if (!s.is_object()) {
    return ::testing::AssertionFailure() << "the proxy's counts are unreadable";
  }
  long passed = 0;
  std::string refused;
  for (const auto& [key, v] : s.items()) {
    if (key == "warnings" || !v.is_object()) {
      continue;
    }
    const json byCode = v.value("byCode", json::object());
    for (const auto& [code, n] : byCode.items()) {
      if (code == "400" || code == "422") {
        refused += " " + key + " " + code + " x" + std::to_string(n.get<long>()) + ";";
      }
      if (code.find_first_not_of("0123456789") == std::string::npos) {
        passed += n.get<long>();
      }
    }
  }
  if (passed == 0) {
    return ::testing::AssertionFailure() << "no request reached the API server";
  }
  if (!refused.empty()) {
    return ::testing::AssertionFailure() << "the API server refused bodies as invalid:" << refused;
  }
  if (!s.value("warnings", json::array()).empty()) {
    return ::testing::AssertionFailure() << "the API server warned: " << s["warnings"].dump(1);
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult startApi(ControlPlane& cp, ApiProxy& api, const std::string& etcdServers) {
  if (auto r = cp.start(etcdServers); !r) {
    return r;
  }
  return api.start(cp);
}

void SuiteApi::start(const std::string& with) {
  if (!ControlPlane::built()) {
    return;
  }
  cp = std::make_unique<ControlPlane>();
  api = std::make_unique<ApiProxy>();
  auto started = cp->start("", with);
  if (started) {
    started = api->start(*cp);
  }
  if (!started) {
    failed = started.message();
    stop();
  }
}

long apiServerRequestCount(const ApiProxy& api, const std::vector<std::string>& resources) {
  const std::string metrics = api.adminText("/metrics");
  if (metrics.empty()) {
    return -1;
  }
  double total = 0;
  std::istringstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("apiserver_request_total{")) {
      continue;
    }
    for (const auto& r : resources) {
      if (line.find("resource=\"" + r + "\"") != std::string::npos) {
        total += std::strtod(line.substr(line.rfind(' ') + 1).c_str(), nullptr);
        break;
      }
    }
  }
  return static_cast<long>(total);
}

// ---- Rules and kubeconfigs -----------------------------------------------------------------------

json leaseRules(std::vector<std::string> verbs) {
  return json::array({{{"apiGroups", {"coordination.k8s.io"}}, {"resources", {"leases"}}, {"verbs", verbs}}});
}

json nodeRules(std::vector<std::string> verbs) {
  return json::array({{{"apiGroups", {""}}, {"resources", {"nodes"}}, {"verbs", verbs}}});
}

::testing::AssertionResult writeTokenKubeconfig(const std::string& path, const std::string& server,
                                                const std::string& token, const std::string& ns,
                                                const std::string& ca) {
  std::ofstream out(path, std::ios::trunc);
  out << "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: " << server << "\n";
  if (!ca.empty()) {
    out << "    certificate-authority: " << ca << "\n";
  }
  out << "users:\n- name: test\n  user:\n    token: " << token << "\ncontexts:\n- name: test\n  context:\n"
      << "    cluster: test\n    user: test\n";
  if (!ns.empty()) {
    out << "    namespace: " << ns << "\n";
  }
  out << "current-context: test\n";
  out.close();
  if (!out) {
    return ::testing::AssertionFailure() << "cannot write " << path;
  }
  std::error_code ec;
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace, ec);
  if (ec) {
    return ::testing::AssertionFailure() << "chmod 0600 " << path << ": " << ec.message();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace ibcni::testing
