// SPDX-License-Identifier: Apache-2.0
#include "support/cluster_sim.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include "lib/http/curl_http_client.h"
#include "lib/http/relay_socket.h"
#include "ibcni/os/text.h"

namespace ibcni::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::size_t kMaxListed = 30;  // offenders named in one failure message

std::string oneLine(std::string s, std::size_t max = 400) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  while (!s.empty() && s.back() == ' ') {
    s.pop_back();
  }
  return s.size() > max ? s.substr(0, max) + "..." : s;
}

// An address or network as 16 bytes (IPv4 in the first 4) and its family's bit length.
struct Bits {
  std::array<unsigned char, 16> b{};
  int len = 0;  // 32 or 128; 0 when unparsable
};

Bits parseAddress(const std::string& text) {
  Bits r;
  if (::inet_pton(AF_INET, text.c_str(), r.b.data()) == 1) {
    r.len = 32;
  } else if (::inet_pton(AF_INET6, text.c_str(), r.b.data()) == 1) {
    r.len = 128;
  }
  return r;
}

// Whether `address` lies in `cidr` ("10.56.0.32/27").
bool inCidr(const std::string& address, const std::string& cidr) {
  const auto slash = cidr.find('/');
  if (slash == std::string::npos) {
    return false;
  }
  const Bits net = parseAddress(cidr.substr(0, slash));
  const Bits a = parseAddress(address);
  const int prefix = std::atoi(cidr.c_str() + slash + 1);
  if (net.len == 0 || net.len != a.len || prefix < 0 || prefix > net.len) {
    return false;
  }
  for (int bit = 0; bit < prefix; ++bit) {
    const unsigned mask = 0x80U >> (bit % 8);
    if ((net.b[bit / 8] & mask) != (a.b[bit / 8] & mask)) {
      return false;
    }
  }
  return true;
}

std::string verbName(CniVerb v) { return v == CniVerb::kAdd ? "ADD" : "DEL"; }

std::expected<std::string, std::string> post(const std::vector<std::string>& endpoints, const std::string& path,
                                             const std::string& body, http::Method method = http::Method::kPost) {
  static http::CurlHttpClient client;
  std::string errors;
  for (const auto& ep : endpoints) {
    http::Request r;
    r.method = method;
    r.url = ep + path;
    r.body = body;
    r.timeout = std::chrono::milliseconds(5000);
    const auto answer = client.send(r);
    if (!answer) {
      errors += ep + ": " + answer.error().describe() + "; ";
      continue;
    }
    if (answer->status != 200) {
      errors += ep + ": HTTP " + std::to_string(answer->status) + " " + oneLine(answer->body) + "; ";
      continue;
    }
    return answer->body;
  }
  return std::unexpected(errors.empty() ? std::string("no etcd endpoint given") : errors);
}

}  // namespace

std::string etcdPrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(prefix.back());
    if (last < 0xff) {
      ++last;
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

std::string CniCall::describe(const std::string& nodeName) const {
  std::string s = verbName(verb) + " " + nodeName + "/pod-" + std::to_string(pod.pod) + ": exit " +
                  std::to_string(status);
  if (!out.empty()) {
    s += ": " + oneLine(out);
  }
  if (!err.empty()) {
    s += " [stderr: " + oneLine(err) + "]";
  }
  return s;
}

// --- PluginProcess ---

std::expected<PluginProcess, std::string> PluginProcess::spawn(const std::string& path,
                                                               const std::vector<std::string>& env,
                                                               const std::string& input) {
  int in[2];
  int out[2];
  int err[2];
  if (::pipe2(in, O_CLOEXEC) != 0) {
    return std::unexpected(std::string("pipe2: ") + std::strerror(errno));
  }
  if (::pipe2(out, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(in[0]);
    ::close(in[1]);
    return std::unexpected(std::string("pipe2: ") + std::strerror(e));
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int fd : {in[0], in[1], out[0], out[1]}) {
      ::close(fd);
    }
    return std::unexpected(std::string("pipe2: ") + std::strerror(e));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
  std::vector<char*> argv{const_cast<char*>(path.c_str()), nullptr};
  std::vector<char*> envp;
  for (const auto& e : env) {
    envp.push_back(const_cast<char*>(e.c_str()));
  }
  envp.push_back(nullptr);
  PluginProcess p;
  p.started_ = ProgramRun::Clock::now();
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, path.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    for (int fd : {in[1], out[0], err[0]}) {
      ::close(fd);
    }
    return std::unexpected("posix_spawn " + path + ": " + std::strerror(rc));
  }
  p.pid_ = pid;
  p.out_ = out[0];
  p.err_ = err[0];
  // A network configuration is far below the pipe's buffer: written at once, then end of file.
  std::size_t written = 0;
  while (written < input.size()) {
    const ssize_t w = ::write(in[1], input.data() + written, input.size() - written);
    if (w < 0 && errno == EINTR) {
      continue;
    }
    if (w <= 0) {
      break;  // the child is gone already (EPIPE): wait() reports its status
    }
    written += static_cast<std::size_t>(w);
  }
  ::close(in[1]);
  return p;
}

PluginProcess::PluginProcess(PluginProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      in_(std::exchange(other.in_, -1)),
      out_(std::exchange(other.out_, -1)),
      err_(std::exchange(other.err_, -1)),
      input_(std::move(other.input_)),
      started_(other.started_) {}

PluginProcess::~PluginProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  for (int fd : {in_, out_, err_}) {
    if (fd >= 0) {
      ::close(fd);
    }
  }
}

void PluginProcess::kill9() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
  }
}

ProgramRun PluginProcess::wait(std::chrono::milliseconds timeout) {
  ProgramRun run;
  run.started = started_;
  if (pid_ <= 0) {
    run.err = "not running";
    return run;
  }
  ChildPipes pipes{-1, std::exchange(out_, -1), std::exchange(err_, -1), {}};
  collectChild(std::exchange(pid_, -1), pipes, timeout, run);
  return run;
}

// --- ClusterSim ---

ClusterSim::ClusterSim(ClusterSimOptions options) : o_(std::move(options)) {}

std::string ClusterSim::nodeName(int node) const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "node-%02d", node);
  return buf;
}

std::string ClusterSim::dataDir(int node) const { return o_.root + "/" + nodeName(node); }

std::string ClusterSim::pool() const { return o_.pool.empty() ? o_.network : o_.pool; }

std::string ClusterSim::containerId(PodRef pod) const {
  return "sim-" + nodeName(pod.node) + "-pod-" + std::to_string(pod.pod);
}

std::string ClusterSim::config(int node) const {
  json ipam = {{"type", "ibcni-ipam"},
               {"ranges", json::array({json::array({json{{"subnet", o_.subnet}}})})},
               {"dataDir", dataDir(node)}};
  if (o_.clusterMode) {
    json cluster = {{"backend", o_.backend},
                    {"nodeName", nodeName(node)},
                    {"blockSize", o_.blockSize},
                    {"timeoutMs", o_.timeoutMs}};
    if (o_.backend == "kubernetes") {
      cluster["kubernetes"] = {{"kubeconfig", o_.kubeconfig}, {"namespace", o_.k8sNamespace}};
    } else {
      cluster["etcd"] = {{"endpoints", o_.etcdEndpoints}, {"prefix", o_.etcdPrefix}};
    }
    if (!o_.pool.empty()) {
      cluster["pool"] = o_.pool;
    }
    ipam["cluster"] = cluster;
  }
  // As bench/ipam_bench.cpp: the IPAM plugin of some main plugin (the type is not read by it).
  json conf{{"cniVersion", "1.0.0"}, {"name", o_.network}, {"type", "macvlan"}, {"ipam", ipam}};
  if (!o_.logLevel.empty()) {
    conf["logLevel"] = o_.logLevel;
  }
  return conf.dump();
}

std::vector<std::string> ClusterSim::env(CniVerb verb, PodRef pod) const {
  return {kPathEnv,
          "CNI_COMMAND=" + verbName(verb),
          "CNI_CONTAINERID=" + containerId(pod),
          "CNI_NETNS=" + o_.netns,
          "CNI_IFNAME=eth0",
          "CNI_PATH=/usr/lib/cni",
          std::string(http::kRelaySocketEnv) + "=" +
              (o_.relaySocket.empty() ? o_.root + "/no-agent/http-relay.sock" : o_.relaySocket)};
}

std::vector<PodRef> ClusterSim::pods(int nodes, int podsPerNode, unsigned seed) {
  std::vector<PodRef> all;
  for (int n = 0; n < nodes; ++n) {
    for (int p = 0; p < podsPerNode; ++p) {
      all.push_back({n, p});
    }
  }
  if (seed != 0) {
    std::mt19937 rng(seed);
    std::shuffle(all.begin(), all.end(), rng);
  }
  return all;
}

std::expected<PluginProcess, std::string> ClusterSim::start(CniVerb verb, PodRef pod) const {
  return PluginProcess::spawn(o_.plugin, env(verb, pod), config(pod.node));
}

CniCall ClusterSim::call(CniVerb verb, PodRef pod) const {
  CniCall c;
  c.pod = pod;
  c.verb = verb;
  std::error_code ec;
  fs::create_directories(dataDir(pod.node), ec);
  auto p = start(verb, pod);
  if (!p) {
    c.err = p.error();
    return c;
  }
  ProgramRun run = p->wait(o_.execTimeout);
  c.status = run.status;
  c.out = std::move(run.out);
  c.err = std::move(run.err);
  c.ms = std::chrono::duration<double, std::milli>(run.elapsed()).count();
  c.cpuMs = run.cpuMs;
  if (verb == CniVerb::kAdd && c.status == 0) {
    const json r = json::parse(c.out, nullptr, false);
    if (r.is_object() && r.contains("ips") && r["ips"].is_array()) {
      for (const auto& ip : r["ips"]) {
        if (ip.contains("address") && ip["address"].is_string()) {
          auto a = ip["address"].get<std::string>();
          c.addresses.push_back(a.substr(0, a.find('/')));
        }
      }
    }
  }
  return c;
}

std::vector<CniCall> ClusterSim::callAll(CniVerb verb, const std::vector<PodRef>& pods, int workers) const {
  std::vector<CniCall> results(pods.size());
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < std::max(1, workers); ++w) {
    threads.emplace_back([&] {
      for (std::size_t i = next++; i < pods.size(); i = next++) {
        results[i] = call(verb, pods[i]);
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return results;
}

// --- Checks ---

::testing::AssertionResult ClusterSim::allSucceeded(const std::vector<CniCall>& calls) const {
  std::size_t failed = 0;
  std::ostringstream msg;
  for (const auto& c : calls) {
    const bool ok = c.ok() && (c.verb == CniVerb::kDel || !c.addresses.empty());
    if (!ok) {
      if (++failed <= kMaxListed) {
        msg << "\n  " << c.describe(nodeName(c.pod.node));
        if (c.ok()) {
          msg << " (exit 0 but no ips[].address in the result)";
        }
      }
    }
  }
  if (failed == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << failed << " of " << calls.size() << " calls failed:" << msg.str();
}

::testing::AssertionResult ClusterSim::noAddressTwice(const std::vector<CniCall>& adds) const {
  std::map<std::string, std::vector<PodRef>> holders;
  for (const auto& c : adds) {
    if (c.verb != CniVerb::kAdd || !c.ok()) {
      continue;
    }
    for (const auto& a : c.addresses) {
      auto& h = holders[a];
      if (std::find(h.begin(), h.end(), c.pod) == h.end()) {
        h.push_back(c.pod);
      }
    }
  }
  std::size_t dup = 0;
  std::size_t nodesInvolved = 0;
  std::ostringstream msg;
  for (const auto& [addr, h] : holders) {
    if (h.size() < 2) {
      continue;
    }
    std::set<int> nodes;
    for (const auto& p : h) {
      nodes.insert(p.node);
    }
    nodesInvolved = std::max(nodesInvolved, nodes.size());
    if (++dup <= kMaxListed) {
      msg << "\n  " << addr << " held by " << h.size() << " pods on " << nodes.size() << " nodes:";
      for (std::size_t i = 0; i < h.size() && i < 4; ++i) {
        msg << " " << nodeName(h[i].node) << "/pod-" << h[i].pod;
      }
      if (h.size() > 4) {
        msg << " ...";
      }
    }
  }
  if (dup == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << dup << " of " << holders.size()
                                       << " addresses handed out to more than one pod (up to " << nodesInvolved
                                       << " nodes hand out the same address: the nodes do not share the pool)"
                                       << msg.str();
}

std::expected<std::vector<NodeBlock>, std::string> ClusterSim::nodeBlocks(int node) const {
  const std::string path = dataDir(node) + "/.cluster/" + pool() + "/blocks.json";
  std::ifstream in(path);
  if (!in) {
    return std::unexpected(nodeName(node) + " has no " + path + " (is ibcni-ipam running in cluster mode?)");
  }
  const json j = json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("blocks") || !j["blocks"].is_array()) {
    return std::unexpected(path + " is not a blocks.json object with a \"blocks\" array");
  }
  std::vector<NodeBlock> out;
  for (const auto& b : j["blocks"]) {
    NodeBlock nb;
    // The block key is "name" ("10.56.0.32-27"); its CIDR the key with the last '-' made a '/'.
    nb.key = b.contains("name") ? b.value("name", "") : b.value("key", "");
    nb.cidr = b.value("cidr", "");
    if (nb.cidr.empty() && nb.key.rfind('-') != std::string::npos) {
      nb.cidr = nb.key;
      nb.cidr[nb.cidr.rfind('-')] = '/';
    }
    nb.state = b.value("state", "");
    out.push_back(std::move(nb));
  }
  return out;
}

::testing::AssertionResult ClusterSim::addressesInOwnBlocks(const std::vector<CniCall>& adds) const {
  std::map<int, std::vector<NodeBlock>> blocks;
  std::size_t bad = 0;
  std::ostringstream msg;
  for (const auto& c : adds) {
    if (c.verb != CniVerb::kAdd || !c.ok()) {
      continue;
    }
    auto it = blocks.find(c.pod.node);
    if (it == blocks.end()) {
      auto nb = nodeBlocks(c.pod.node);
      if (!nb) {
        return ::testing::AssertionFailure() << nb.error();
      }
      it = blocks.emplace(c.pod.node, std::move(*nb)).first;
    }
    for (const auto& a : c.addresses) {
      const bool inOwned = std::any_of(it->second.begin(), it->second.end(), [&](const NodeBlock& b) {
        return b.state == "owned" && inCidr(a, b.cidr);
      });
      if (!inOwned && ++bad <= kMaxListed) {
        msg << "\n  " << a << " of " << nodeName(c.pod.node) << "/pod-" << c.pod.pod
            << " is in no block its node's blocks.json lists as owned";
      }
    }
  }
  if (bad == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << bad << " addresses outside their node's blocks:" << msg.str();
}

std::expected<std::vector<BackendEntry>, std::string> ClusterSim::backendRange(const std::string& what) const {
  const std::string prefix = o_.etcdPrefix + "pools/" + pool() + "/" + what + "/";
  const json body = {{"key", os::base64Encode(prefix)}, {"range_end", os::base64Encode(etcdPrefixEnd(prefix))}};
  auto answer = post(o_.etcdEndpoints, "/v3/kv/range", body.dump());
  if (!answer) {
    return std::unexpected("etcd range over " + prefix + ": " + answer.error());
  }
  const json j = json::parse(*answer, nullptr, false);
  if (!j.is_object()) {
    return std::unexpected("etcd range over " + prefix + ": not JSON: " + oneLine(*answer));
  }
  std::vector<BackendEntry> out;
  if (!j.contains("kvs")) {
    return out;  // the gateway omits an empty list
  }
  for (const auto& kv : j["kvs"]) {
    const auto key = os::base64Decode(kv.value("key", ""));
    const auto value = os::base64Decode(kv.value("value", ""));
    if (!key || !value) {
      return std::unexpected("etcd range over " + prefix + ": bad base64 in " + kv.dump());
    }
    const json v = json::parse(*value, nullptr, false);
    BackendEntry e;
    e.name = key->substr(prefix.size());
    if (v.is_object()) {
      e.node = v.value("node", "");
      e.owner = v.value("owner", "");
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::expected<std::vector<BackendEntry>, std::string> ClusterSim::backendLeases(const std::string& kind) const {
  // labelSelector=ibcni.io/pool=<pool>,ibcni.io/kind=<kind>, '=' and ',' percent-encoded.
  const std::string path = "/apis/coordination.k8s.io/v1/namespaces/" + o_.k8sNamespace +
                           "/leases?labelSelector=ibcni.io/pool%3D" + pool() + "%2Cibcni.io/kind%3D" + kind;
  auto answer = httpCall("GET", o_.k8sUrl + path, {}, {"Authorization: Bearer " + o_.k8sToken});
  if (!answer) {
    return std::unexpected("listing the Leases of pool " + pool() + ": " + answer.error());
  }
  const json j = json::parse(*answer, nullptr, false);
  if (!j.is_object() || !j.contains("items")) {
    return std::unexpected("listing the Leases of pool " + pool() + ": not a LeaseList: " + oneLine(*answer));
  }
  std::vector<BackendEntry> out;
  if (!j["items"].is_array()) {
    return out;
  }
  for (const auto& item : j["items"]) {
    const json md = item.value("metadata", json::object());
    const json an = md.value("annotations", json::object());
    const json spec = item.value("spec", json::object());
    BackendEntry e;
    e.name = an.value("ibcni.io/key", "");
    if (e.name.empty()) {
      return std::unexpected("Lease " + md.value("name", "?") + " of pool " + pool() +
                             " has no ibcni.io/key annotation: " + oneLine(item.dump()));
    }
    e.node = spec.value("holderIdentity", "");
    e.owner = an.value("ibcni.io/owner", "");
    out.push_back(std::move(e));
  }
  return out;
}

std::expected<std::vector<BackendEntry>, std::string> ClusterSim::backendBlocks() const {
  return o_.backend == "kubernetes" ? backendLeases("block") : backendRange("blocks");
}

std::expected<std::vector<BackendEntry>, std::string> ClusterSim::backendAddresses() const {
  return o_.backend == "kubernetes" ? backendLeases("address") : backendRange("addresses");
}

::testing::AssertionResult ClusterSim::nodeBlocksMatchBackend(int node, bool allowIntent) const {
  auto backend = backendBlocks();
  if (!backend) {
    return ::testing::AssertionFailure() << backend.error();
  }
  auto mine = nodeBlocks(node);
  if (!mine) {
    return ::testing::AssertionFailure() << mine.error();
  }
  std::map<std::string, std::string> holder;  // backend: key -> node
  for (const auto& e : *backend) {
    holder[e.name] = e.node;
  }
  std::map<std::string, std::string> state;  // node file: key -> state
  for (const auto& b : *mine) {
    state[b.key] = b.state;
  }
  std::ostringstream msg;
  std::size_t bad = 0;
  const std::string name = nodeName(node);
  for (const auto& b : *mine) {
    if (b.state != "owned") {
      continue;
    }
    auto it = holder.find(b.key);
    if (it == holder.end()) {
      ++bad;
      msg << "\n  " << name << " owns block " << b.key << " which the backend does not list";
    } else if (it->second != name) {
      ++bad;
      msg << "\n  " << name << " owns block " << b.key << " which the backend gives to " << it->second;
    }
  }
  for (const auto& e : *backend) {
    if (e.node != name) {
      continue;
    }
    auto it = state.find(e.name);
    if (it == state.end()) {
      ++bad;
      msg << "\n  block " << e.name << " is held by " << name << " in the backend but missing from its blocks.json (lost)";
    } else if (it->second != "owned" && !(allowIntent && it->second == "intent")) {
      ++bad;
      msg << "\n  block " << e.name << " is held by " << name << " in the backend but is \"" << it->second
          << "\" in its blocks.json";
    }
  }
  if (bad == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << name << ": " << bad << " block(s) differ from the backend:" << msg.str();
}

::testing::AssertionResult ClusterSim::blocksConsistent(bool allowIntent) const {
  auto backend = backendBlocks();
  if (!backend) {
    return ::testing::AssertionFailure() << backend.error();
  }
  std::map<std::string, std::string> holder;
  for (const auto& e : *backend) {
    holder[e.name] = e.node;
  }
  std::map<std::string, std::vector<std::string>> owners;  // block key -> nodes whose file owns it
  std::map<std::string, std::map<std::string, std::string>> files;  // node -> key -> state
  std::ostringstream msg;
  std::size_t bad = 0;
  auto note = [&](const std::string& line) {
    if (++bad <= kMaxListed) {
      msg << "\n  " << line;
    }
  };
  for (int n = 0; n < o_.nodes; ++n) {
    const std::string name = nodeName(n);
    if (!fs::exists(dataDir(n))) {
      continue;  // never used
    }
    auto mine = nodeBlocks(n);
    if (!mine) {
      note(mine.error());
      continue;
    }
    for (const auto& b : *mine) {
      files[name][b.key] = b.state;
      if (b.state != "owned") {
        continue;
      }
      owners[b.key].push_back(name);
      auto it = holder.find(b.key);
      if (it == holder.end()) {
        note(name + " owns block " + b.key + " which the backend does not list");
      } else if (it->second != name) {
        note(name + " owns block " + b.key + " which the backend gives to " + it->second);
      }
    }
  }
  for (const auto& [key, nodes] : owners) {
    if (nodes.size() > 1) {
      std::string list;
      for (const auto& n : nodes) {
        list += " " + n;
      }
      note("block " + key + " is owned by " + std::to_string(nodes.size()) + " nodes:" + list);
    }
  }
  for (const auto& e : *backend) {
    auto f = files.find(e.node);
    if (f == files.end()) {
      continue;  // a node outside this simulation (or one whose blocks.json is missing: noted)
    }
    auto it = f->second.find(e.name);
    if (it == f->second.end()) {
      note("block " + e.name + " is held by " + e.node + " in the backend but missing from its blocks.json (lost)");
    } else if (it->second != "owned" && !(allowIntent && it->second == "intent")) {
      note("block " + e.name + " is held by " + e.node + " in the backend but is \"" + it->second +
           "\" in its blocks.json");
    }
  }
  if (bad == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << bad << " block problem(s) (backend lists " << backend->size()
                                       << " blocks of pool " << pool() << "):" << msg.str();
}

std::size_t ClusterSim::storedEntries(int node, const std::string& dirName) const {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dataDir(node), ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->path().parent_path().filename() == dirName && !it->is_directory(ec)) {
      ++n;
    }
  }
  return n;
}

::testing::AssertionResult ClusterSim::storesEmpty() const {
  std::ostringstream msg;
  std::size_t bad = 0;
  for (int n = 0; n < o_.nodes; ++n) {
    const auto a = storedEntries(n, "attachments");
    const auto i = storedEntries(n, "ips");
    if ((a != 0 || i != 0) && ++bad <= kMaxListed) {
      msg << "\n  " << nodeName(n) << " still has " << a << " attachment record(s) and " << i << " address claim(s)";
    }
  }
  if (o_.clusterMode) {
    auto addrs = backendAddresses();
    if (!addrs) {
      ++bad;
      msg << "\n  " << addrs.error();
    } else if (!addrs->empty()) {
      ++bad;
      msg << "\n  the backend still lists " << addrs->size() << " address claim(s), first " << (*addrs)[0].name
          << " of " << (*addrs)[0].node;
    }
  }
  if (bad == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "not everything was freed:" << msg.str();
}

// --- etcd's request counters ---

namespace {

/// Calls `onLine` with each line of every endpoint's /metrics.
template <class OnLine>
std::expected<void, std::string> forEachMetricsLine(const std::vector<std::string>& endpoints, OnLine onLine) {
  for (const auto& ep : endpoints) {
    auto text = post({ep}, "/metrics", "", http::Method::kGet);
    if (!text) {
      return std::unexpected(text.error());
    }
    std::istringstream in(*text);
    std::string line;
    while (std::getline(in, line)) {
      onLine(line);
    }
  }
  return {};
}

}  // namespace

std::expected<std::map<std::string, std::uint64_t>, std::string> etcdRequestCounts(
    const std::vector<std::string>& endpoints) {
  std::map<std::string, std::uint64_t> counts;
  auto read = forEachMetricsLine(endpoints, [&counts](const std::string& line) {
    if (line.rfind("grpc_server_handled_total{", 0) != 0 ||
        line.find("grpc_service=\"etcdserverpb.") == std::string::npos) {
      return;
    }
    const auto m = line.find("grpc_method=\"");
    const auto close = line.rfind('}');
    if (m == std::string::npos || close == std::string::npos) {
      return;
    }
    const auto start = m + 13;
    const std::string method = line.substr(start, line.find('"', start) - start);
    const auto value = static_cast<std::uint64_t>(std::strtod(line.c_str() + close + 1, nullptr));
    counts[method] += value;
    counts["total"] += value;
  });
  if (!read) {
    return std::unexpected(read.error());
  }
  return counts;
}

std::expected<std::uint64_t, std::string> etcdSentBytes(const std::vector<std::string>& endpoints) {
  std::uint64_t bytes = 0;
  auto read = forEachMetricsLine(endpoints, [&bytes](const std::string& line) {
    constexpr std::string_view kName = "etcd_network_client_grpc_sent_bytes_total";
    const bool named = line.starts_with(kName) && line.size() > kName.size() &&
                       (line[kName.size()] == ' ' || line[kName.size()] == '{');
    if (named) {
      bytes += static_cast<std::uint64_t>(std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr));
    }
  });
  if (!read) {
    return std::unexpected(read.error());
  }
  return bytes;
}

std::expected<std::string, std::string> httpCall(const std::string& method, const std::string& url,
                                                 const std::string& body, const std::vector<std::string>& headers,
                                                 bool anyStatus) {
  static http::CurlHttpClient client;
  http::Request r;
  r.method = method == "POST"     ? http::Method::kPost
             : method == "PUT"    ? http::Method::kPut
             : method == "DELETE" ? http::Method::kDelete
                                  : http::Method::kGet;
  r.url = url;
  r.body = body;
  r.timeout = std::chrono::milliseconds(5000);
  if (!body.empty()) {
    r.headers.push_back({"Content-Type", "application/json"});
  }
  for (const auto& h : headers) {
    const auto colon = h.find(':');
    r.headers.push_back({h.substr(0, colon), colon == std::string::npos ? "" : h.substr(h.find_first_not_of(' ', colon + 1))});
  }
  const auto answer = client.send(r);
  if (!answer) {
    return std::unexpected(method + " " + url + ": " + answer.error().describe());
  }
  if (!anyStatus && (answer->status < 200 || answer->status > 299)) {
    return std::unexpected(method + " " + url + ": HTTP " + std::to_string(answer->status) + " " +
                           oneLine(answer->body));
  }
  return answer->body;
}

std::expected<std::map<std::string, std::uint64_t>, std::string> apiRequestCounts(const std::string& url) {
  auto body = httpCall("GET", url + "/_proxy/stats");
  if (!body) {
    return std::unexpected(body.error());
  }
  const json j = json::parse(*body, nullptr, false);
  if (!j.is_object()) {
    return std::unexpected("/_proxy/stats is not a JSON object: " + oneLine(*body));
  }
  std::map<std::string, std::uint64_t> counts{{"total", 0}};
  for (const auto& [k, v] : j.items()) {
    const auto n = v.is_object() ? v.value("total", std::uint64_t{0}) : std::uint64_t{0};
    if (n > 0) {
      counts[k] += n;
      counts["total"] += n;
    }
  }
  return counts;
}

std::map<std::string, std::uint64_t> countDiff(const std::map<std::string, std::uint64_t>& before,
                                               const std::map<std::string, std::uint64_t>& after) {
  std::map<std::string, std::uint64_t> d;
  for (const auto& [k, v] : after) {
    auto it = before.find(k);
    const std::uint64_t b = it == before.end() ? 0 : it->second;
    d[k] = v >= b ? v - b : 0;
  }
  return d;
}

::testing::AssertionResult useKubernetes(const ApiProxy& api, const std::string& dir, ClusterSimOptions& o) {
  auto ns = api.freshNamespace("cluster-sim");
  if (!ns) {
    return ::testing::AssertionFailure() << ns.error();
  }
  auto token = api.serviceAccount(*ns, "ibcni", leaseRules(), nodeRules());
  if (!token) {
    return ::testing::AssertionFailure() << token.error();
  }
  o.backend = "kubernetes";
  o.kubeconfig = dir + "/ibcni.kubeconfig";
  o.k8sUrl = api.url();
  o.k8sToken = *token;
  o.k8sNamespace = *ns;
  return writeTokenKubeconfig(o.kubeconfig, o.k8sUrl, *token, "kube-system");
}

}  // namespace ibcni::testing
