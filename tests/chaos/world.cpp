// SPDX-License-Identifier: Apache-2.0
#include "json_text.h"
#include "world.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lib/http/relay_socket.h"
#include "support/exec_program.h"

namespace ibcni::chaos {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr auto kProcessTimeout = std::chrono::seconds(30);
constexpr const char* kIfName = "net1";

std::string oneLine(std::string s, std::size_t max = 300) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  while (!s.empty() && s.back() == ' ') {
    s.pop_back();
  }
  return s.size() > max ? s.substr(0, max) + "..." : s;
}

json rangesJson(const NetworkDef& def) {
  json sets = json::array();
  for (const auto& set : def.rangeSets) {
    json ranges = json::array();
    for (const auto& subnet : set) {
      ranges.push_back({{"subnet", subnet}});
    }
    sets.push_back(ranges);
  }
  return sets;
}

}  // namespace

std::string twoDigits(int n) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%02d", n);
  return buf;
}

std::optional<KillPoint> KillPoint::parse(const std::string& text) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) {
    return std::nullopt;
  }
  KillPoint k;
  const std::string when = text.substr(0, colon);
  if (when != "before" && when != "after") {
    return std::nullopt;
  }
  k.after = when == "after";
  k.at = std::atoi(text.c_str() + colon + 1);
  return k.at > 0 ? std::optional<KillPoint>(k) : std::nullopt;
}

std::string Invocation::brief() const {
  if (killedByShim) {
    return "killed";
  }
  if (timedOut) {
    return "hung (killed after " + std::to_string(kProcessTimeout.count()) + " s)";
  }
  if (status == 0) {
    return "ok";
  }
  std::string s = "exit " + std::to_string(status);
  if (code != 0) {
    s += " (error " + std::to_string(code) + ": " + oneLine(msg, 160) + ")";
  } else if (!err.empty()) {
    s += " (" + oneLine(err, 160) + ")";
  }
  return s;
}

void Stats::merge(const Stats& other) {
  for (const auto& [k, v] : other.ops) {
    ops[k] += v;
  }
  for (const auto& [k, v] : other.outcomes) {
    outcomes[k] += v;
  }
  invocations += other.invocations;
  i7Checks += other.i7Checks;
  i7Inconclusive += other.i7Inconclusive;
}

World::World(const ScheduleParams& params, Backend& backend, const Tools& tools, const std::string& tag, Stats& s)
    : stats(s), params_(params), backend_(backend), tools_(tools), tag_(tag), started_(std::chrono::steady_clock::now()) {
  dir_ = tools.root + "/" + tag;
  fs::create_directories(dir_ + "/conf");
  for (int i = 0; i < params.nodes; ++i) {
    NodeState n;
    n.index = i;
    // --plant same-node-name: node 1 believes it is node 0 (its own data dir, node 0's name).
    n.name = tag + "-node-" + twoDigits(params.plant == "same-node-name" && i == 1 ? 0 : i);
    n.dataDir = dir_ + "/node-" + twoDigits(i);
    n.indexDir = dir_ + "/index-" + twoDigits(i);
    nodes.push_back(n);
  }
  for (const auto& name : networkNames(params.networks, params.guids)) {
    setNetwork(baseNetwork(name));
  }
}

World::~World() {
  pods.clear();  // kills every sandbox
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string World::poolName(const NetworkDef& def) const {
  return def.poolKey ? tag_ + "-" + def.pool : networkName(def.name);
}

std::string World::etcdPrefix() const { return "/chaos/" + tools_.runId + "/" + tag_ + "/"; }

bool World::live(int node) const {
  return node >= 0 && node < static_cast<int>(nodes.size()) && !nodes[node].decommissioned;
}

std::vector<int> World::liveNodes() const {
  std::vector<int> out;
  for (const auto& n : nodes) {
    if (!n.decommissioned) {
      out.push_back(n.index);
    }
  }
  return out;
}

bool World::configChanged() const { return configEverChanged_; }

void World::setNetwork(const NetworkDef& def) {
  configEverChanged_ = configEverChanged_ || def != baseNetwork(def.name);
  nets[def.name] = def;
  pools[def.pool] = def;
}

void World::violate(const std::string& kind, const std::string& message) {
  if (!violation) {
    violation = Violation{kind, message, step};
  }
}

double World::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count() +
         static_cast<double>(offset_);
}

nlohmann::json World::clusterObject(int node) const {
  json cluster = {{"backend", params_.backend},
                  {"nodeName", nodes[node].name},
                  {"timeoutMs", params_.timeoutMs},
                  {"leaseDurationSeconds", params_.leaseSeconds},
                  {"releaseAfterSeconds", params_.releaseAfterSeconds}};
  if (!params_.baseline) {
    cluster["minBlocksPerNode"] = params_.minBlocksPerNode;  // unknown to the baseline: error 7 there
  }
  if (params_.backend == "kubernetes") {
    cluster["kubernetes"] = {{"kubeconfig", backend_.kubeconfig()}, {"namespace", "kube-system"}};
  } else {
    cluster["etcd"] = {{"endpoints", backend_.etcdEndpoints()}, {"prefix", etcdPrefix()}};
  }
  return cluster;
}

std::string World::config(int node, const NetworkDef& def, const std::string& cniVersion) const {
  json cluster = clusterObject(node);
  if (def.guid) {
    // sriov mode's network: the guidPool's pool and blockSize are its own (its cluster object refuses them).
    const json pool = {{"range", def.guidRange}, {"blockSize", def.blockSize}, {"pool", poolName(def)},
                       {"dataDir", nodes[node].dataDir}, {"cluster", cluster}};
    return json{{"cniVersion", cniVersion}, {"name", networkName(def.name)}, {"type", "ibcni"}, {"guidPool", pool}}
        .dump();
  }
  cluster["blockSize"] = def.blockSize;
  if (def.poolKey) {
    cluster["pool"] = poolName(def);
  }
  json ipam = {{"type", "ibcni-ipam"}, {"dataDir", nodes[node].dataDir}, {"ranges", rangesJson(def)},
               {"cluster", cluster}};
  if (!def.exclude.empty()) {
    ipam["exclude"] = def.exclude;
  }
  if (!def.reservations.empty()) {
    ipam["reservations"] = def.reservations;
  }
  // The IPAM plugin of some main plugin, as a NAD names it (ibcni-ipam does not read "type").
  return json{{"cniVersion", cniVersion}, {"name", networkName(def.name)}, {"type", "macvlan"}, {"ipam", ipam}}.dump();
}

const std::string& World::program(const NetworkDef& def) const { return def.guid ? tools_.guidDriver : tools_.plugin; }

std::string World::configFile(int node, const NetworkDef& def) const {
  const std::string path = dir_ + "/conf/node-" + twoDigits(node) + "-" + def.name + "-" + def.pool + ".json";
  std::ofstream(path, std::ios::trunc) << config(node, def) << "\n";
  return path;
}

std::vector<std::string> World::baseEnv(std::optional<KillPoint> kill) const {
  std::vector<std::string> env{testing::kPathEnv, "LD_PRELOAD=" + tools_.killShim + " " + tools_.faketime,
                               "FAKETIME=+" + std::to_string(offset_),
                               // Never through a node agent this machine runs: each run sends its own requests.
                               std::string(http::kRelaySocketEnv) + "=" + dir_ + "/no-agent/http-relay.sock"};
  if (params_.plant == "skip-guid-record") {
    env.emplace_back("IBCNI_GUID_DRIVER_PLANT=skip-record");  // the GUID driver writes no record ahead
  }
  if (kill) {
    env.push_back("CHAOS_KILL_AT=" + std::to_string(kill->at));
    env.push_back(std::string("CHAOS_KILL_WHEN=") + (kill->after ? "after" : "before"));
  }
  return env;
}

Invocation World::run(int node, const std::string& what, const std::vector<std::string>& argv,
                      std::vector<std::string> env, const std::string& input, std::optional<KillPoint> kill) {
  std::error_code ec;
  fs::create_directories(nodes[node].dataDir, ec);
  // The GUID driver's node: its data directory stands for the default one, and its pool index for
  // /var/lib/ibcni/pools (kept across the node's reboots, gone with a re-created node).
  env.push_back("IBCNI_DRIVER_DATA_DIR=" + nodes[node].dataDir);
  env.push_back("IBCNI_DRIVER_POOL_INDEX=" + nodes[node].indexDir);
  const auto r = testing::runProgram(argv, env, input, kProcessTimeout);
  Invocation inv;
  inv.what = what;
  inv.status = r.status;
  inv.out = r.out;
  inv.err = r.err;
  inv.ms = std::chrono::duration<double, std::milli>(r.elapsed()).count();
  inv.timedOut = r.err.find("[killed after") != std::string::npos;
  inv.killedByShim = kill && r.status == 128 + 9 && !inv.timedOut;
  const json j = json::parse(r.out, nullptr, false);
  if (j.is_object() && j.contains("code") && j["code"].is_number_integer()) {
    inv.code = j["code"].get<int>();
    inv.msg = jsonText(j, "msg");
    if (j.contains("details") && j["details"].is_string()) {
      inv.msg += " (" + j["details"].get<std::string>() + ")";
    }
  }
  nodes[node].touched = true;
  nodes[node].lastTouch = now();
  ++stats.invocations;
  return inv;
}

Invocation World::cni(const std::string& verb, Pod& pod, std::optional<KillPoint> kill) {
  const NetworkDef& def = nets.at(pod.net);
  std::string args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=chaos;K8S_POD_NAME=" + pod.k8sName;
  if (!pod.requested.empty()) {
    args += (def.guid ? ";GUID=" : ";IP=") + pod.requested;
  }
  auto env = baseEnv(kill);
  env.insert(env.end(), {"CNI_COMMAND=" + verb, "CNI_CONTAINERID=" + containerId(pod),
                         "CNI_NETNS=" + (pod.sandbox ? pod.sandbox->netns() : std::string()),
                         std::string("CNI_IFNAME=") + kIfName, "CNI_ARGS=" + args, "CNI_PATH=/usr/lib/cni"});
  const std::string what = verb + " " + pod.id + " (" + pod.net + ") on node " + std::to_string(pod.node);
  return run(pod.node, what, {program(def)}, env, config(pod.node, def), kill);
}

Invocation World::cniGc(int node, const std::string& net, std::optional<KillPoint> kill) {
  json valid = json::array();
  for (const auto& [id, pod] : pods) {
    if (pod.node == node && pod.net == net && pod.known()) {
      valid.push_back({{"containerID", containerId(pod)}, {"ifname", kIfName}});
    }
  }
  json conf = json::parse(config(node, nets.at(net), "1.1.0"));
  conf["cni.dev/valid-attachments"] = valid;
  auto env = baseEnv(kill);
  env.insert(env.end(), {"CNI_COMMAND=GC", "CNI_PATH=/usr/lib/cni"});
  const std::string what = "GC " + net + " on node " + std::to_string(node) + " (" + std::to_string(valid.size()) +
                           " valid attachments)";
  return run(node, what, {program(nets.at(net))}, env, conf.dump(), kill);
}

Invocation World::tool(int node, const std::string& command, const NetworkDef& def,
                       const std::vector<std::string>& extra, std::optional<KillPoint> kill) {
  std::vector<std::string> argv{program(def), command, configFile(node, def)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  const std::string what = (def.guid ? "ibcni-guidpool " : "ibcni-ipam ") + command + " " + def.name + " (pool " +
                           def.pool + ") on node " + std::to_string(node);
  return run(node, what, argv, baseEnv(kill), {}, kill);
}

Invocation World::guidPass(int node, const NetworkDef& def, std::optional<KillPoint> kill) {
  const std::string storeDir = nodes[node].dataDir + "/.guid/" + poolName(def);
  const std::string what = "ibcni-guidpool pass (pool " + def.pool + ") on node " + std::to_string(node);
  return run(node, what, {tools_.guidDriver, "pass", storeDir}, baseEnv(kill), {}, kill);
}

}  // namespace ibcni::chaos
