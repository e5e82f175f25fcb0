// SPDX-License-Identifier: Apache-2.0
#include "generator.h"

#include <algorithm>

namespace ibcni::chaos {

namespace {

constexpr int kMaxKillPoint = 16;  // a first ADD on a node makes about 12 counted calls

std::vector<int> nodesWhere(const World& world, bool (*want)(const NodeState&)) {
  std::vector<int> out;
  for (const auto& n : world.nodes) {
    if (want(n)) {
      out.push_back(n.index);
    }
  }
  return out;
}

bool isLive(const NodeState& n) { return !n.decommissioned; }
bool isLiveTouched(const NodeState& n) { return !n.decommissioned && n.touched; }
bool agentRuns(const NodeState& n) { return !n.decommissioned && n.agentRunning && n.touched; }
bool agentStopped(const NodeState& n) { return !n.decommissioned && !n.agentRunning; }
bool isDeleted(const NodeState& n) { return n.decommissioned; }

std::vector<std::string> podsWhere(const World& world, bool (*want)(const Pod&)) {
  std::vector<std::string> out;
  for (const auto& [id, pod] : world.pods) {
    if (world.live(pod.node) && want(pod)) {
      out.push_back(id);
    }
  }
  return out;
}

bool isHolding(const Pod& p) { return p.holding(); }
bool isKnown(const Pod& p) { return p.known(); }
bool owesDel(const Pod& p) { return p.known() && !p.holding(); }

std::vector<std::string> keysOf(const std::map<std::string, NetworkDef>& m) {
  std::vector<std::string> out;
  for (const auto& [k, v] : m) {
    out.push_back(k);
  }
  return out;
}

}  // namespace

std::uint64_t mixSeed(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

const std::vector<Profile>& profiles() {
  static const std::vector<Profile> all{
      {"all", "every operation and fault",
       {{"add", 10}, {"add-ip", 2}, {"add-sts", 3}, {"del", 7}, {"check", 2}, {"cnigc", 2}, {"pass", 5},
        {"agent-stop", 1}, {"agent-start", 1}, {"time", 2}, {"lapse", 1}, {"reboot", 1}, {"pod-die", 2},
        {"etcd-stop", 1}, {"etcd-start", 1}, {"quorum-loss", 0.15}, {"emu-fault", 1}, {"node-delete", 0.5},
        {"node-recreate", 0.5}, {"config", 0.7}, {"revert", 0.7}},
       0.08, {}},
      {"lapse", "agents stopped for longer than the lease while their nodes keep adding pods",
       {{"add", 10}, {"del", 3}, {"pass", 3}, {"agent-stop", 1}, {"agent-start", 1}, {"time", 2}, {"lapse", 3},
        {"pod-die", 1}},
       0.02, {}},
      {"gc", "CNI GC of networks sharing a pool",
       {{"add", 10}, {"del", 4}, {"cnigc", 5}, {"pass", 2}, {"check", 1}}, 0.02, {}},
      {"config", "configuration changes (NAD edits) and their reverts, DEL and GC around them",
       {{"add", 8}, {"add-sts", 3}, {"del", 5}, {"cnigc", 2}, {"pass", 3}, {"config", 3}, {"revert", 1}, {"time", 1}},
       0.02, {}},
      {"widen", "n1's ranges widened (and reverted) around its pods' DELs, CNI GCs and passes",
       {{"add", 8}, {"del", 5}, {"cnigc", 2}, {"pass", 3}, {"config", 2}, {"revert", 1}},
       0.0,
       {"widen-n1"}},
      {"resv", "n1 and n2 share a pool and come to disagree on reservations",
       {{"add", 8}, {"add-sts", 6}, {"del", 4}, {"pass", 2}, {"config", 2}, {"revert", 0.5}},
       0.0,
       {"resv-n2"}},
      {"overlap", "n3 moved to a second pool over ranges overlapping n1's",
       {{"add", 10}, {"del", 3}, {"pass", 2}, {"config", 2}, {"revert", 0.5}},
       0.0,
       {"n3-overlap"}},
      {"capacity", "many pods on many nodes, pods dying and deleted: the pool runs out of free blocks",
       {{"add", 12}, {"del", 4}, {"pod-die", 2}, {"pass", 3}, {"time", 2}}, 0.02, {}},
      {"release", "reserved pods moving between nodes, renewals and releases",
       {{"add", 4}, {"add-sts", 6}, {"del", 6}, {"pass", 5}, {"time", 3}}, 0.0, {}},
      {"kill", "kill -9 at random points of ADD, DEL and passes",
       {{"add", 8}, {"add-sts", 2}, {"del", 6}, {"pass", 4}, {"cnigc", 1}, {"time", 1}}, 0.5, {}},
      {"faults", "backend faults: members stopped, quorum lost, lost answers, Nodes deleted, reboots",
       {{"add", 8}, {"del", 4}, {"pass", 3}, {"etcd-stop", 2}, {"etcd-start", 2}, {"quorum-loss", 1},
        {"emu-fault", 3}, {"time", 1}, {"node-delete", 1}, {"node-recreate", 1}, {"reboot", 1}},
       0.1, {}},
  };
  return all;
}

const Profile* findProfile(const std::string& name) {
  for (const auto& p : profiles()) {
    if (p.name == name) {
      return &p;
    }
  }
  return nullptr;
}

ScheduleParams drawParams(ScheduleParams p, int nodesMin, int nodesMax, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  p.seed = seed;
  p.nodes = nodesMin + static_cast<int>(rng() % static_cast<std::uint64_t>(std::max(1, nodesMax - nodesMin + 1)));
  p.networks = rng() % 5 < 3 ? 3 : 2;
  p.leaseSeconds = 20;
  p.releaseAfterSeconds = rng() % 2 == 0 ? 0 : 30;
  p.minBlocksPerNode = p.baseline ? 0 : (rng() % 4 == 0 ? 1 : 0);
  // GUID networks in 1 of 2 schedules (drawn last: the draws above stay what they were for a seed); the
  // baseline had no GUID pools.
  p.guids = p.plant == "skip-guid-record" || (!p.baseline && rng() % 2 == 0);
  return p;
}

Generator::Generator(const Profile& profile, std::uint64_t seed) : profile_(profile), rng_(seed) {}

std::string Generator::pickOp() {
  double total = 0;
  for (const auto& [op, w] : profile_.weights) {
    total += w;
  }
  double x = std::uniform_real_distribution<double>(0, total)(rng_);
  for (const auto& [op, w] : profile_.weights) {
    if ((x -= w) < 0) {
      return op;
    }
  }
  return "add";
}

Step Generator::next(const World& world) {
  for (auto& [wait, step] : followUps_) {
    --wait;
  }
  auto due = std::find_if(followUps_.begin(), followUps_.end(), [](const auto& f) { return f.first < 0; });
  if (due != followUps_.end()) {
    Step s = due->second;
    followUps_.erase(due);
    return s;
  }
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (auto s = make(pickOp(), world)) {
      return *s;
    }
  }
  return *makeAdd("add", world);
}

void Generator::observe(const Step& step, const World& world) {
  const bool ok = step.outcome.rfind("ok", 0) == 0;
  auto later = [&](int lo, int hi, Step s) {
    followUps_.emplace_back(lo + static_cast<int>(rng_() % static_cast<std::uint64_t>(hi - lo + 1)), std::move(s));
  };
  if (step.op == "add") {
    auto it = world.pods.find(step.arg("pod"));
    if (it != world.pods.end() && it->second.phase == PodPhase::kUnknown && chance(0.5)) {
      later(0, 0, Step{"del", {{"pod", step.arg("pod")}}, {}});  // the runtime's DEL after a failed ADD
    }
  } else if (step.op == "del" && step.outcome == "killed" && chance(0.5)) {
    later(0, 0, Step{"del", {{"pod", step.arg("pod")}}, {}});
  } else if (step.op == "quorum-loss" && ok) {
    later(1, 2, Step{"quorum-restore", {}, {}});
  } else if (step.op == "etcd-stop" && ok && chance(0.7)) {
    later(2, 6, Step{"etcd-start", {{"member", step.arg("member")}}, {}});
  } else if (step.op == "node-delete" && ok && chance(0.5)) {
    later(3, 8, Step{"node-recreate", {{"node", step.arg("node")}}, {}});
  } else if (step.op == "config" && ok && chance(0.5)) {
    later(3, 10, Step{"revert", {{"net", configChanges().at(step.arg("change"))}}, {}});
  }
}

void Generator::maybeKill(Step& step) {
  if (chance(profile_.killChance)) {
    const int k = 1 + static_cast<int>(rng_() % kMaxKillPoint);
    step.set("kill", (chance(0.5) ? "after:" : "before:") + std::to_string(k));
  }
}

std::optional<Step> Generator::make(const std::string& op, const World& world) {
  if (op == "add" || op == "add-ip" || op == "add-sts") {
    return makeAdd(op, world);
  }
  if (op == "del") {
    return makeDel(world);
  }
  if (op == "config" || op == "revert") {
    return makeConfig(op, world);
  }
  if (op == "etcd-stop" || op == "etcd-start" || op == "quorum-loss" || op == "emu-fault") {
    return makeFault(op, world);
  }
  if (op == "time") {
    std::vector<int> secs{5, world.params().leaseSeconds + 5};
    if (world.params().releaseAfterSeconds > 0) {
      secs.push_back(world.params().releaseAfterSeconds + 5);
    }
    return Step{"time", {{"secs", std::to_string(pick(secs))}}, {}};
  }
  return makeNodeOp(op, world);
}

std::optional<Step> Generator::makeAdd(const std::string& op, const World& world) {
  const auto nodes = nodesWhere(world, isLive);
  if (nodes.empty()) {
    return std::nullopt;
  }
  std::vector<std::string> nets = keysOf(world.nets);
  if (op == "add-sts") {
    std::erase_if(nets, [&](const std::string& n) { return world.nets.at(n).reservations.empty(); });
    if (nets.empty()) {
      return std::nullopt;
    }
  }
  Step s{"add", {{"node", std::to_string(pick(nodes))}}, {}};
  const std::string net = pick(nets);
  s.set("net", net).set("pod", "p" + std::to_string(nextPod_));
  if (op == "add-ip") {
    s.set(world.nets.at(net).guid ? "guid" : "ip", pick(requestableAddresses(net)));
  } else if (op == "add-sts") {
    std::vector<std::string> owners;
    for (const auto& [owner, address] : world.nets.at(net).reservations) {
      owners.push_back(owner.substr(owner.find('/') + 1));
    }
    const std::string name = pick(owners);
    for (const auto& [id, pod] : world.pods) {
      if (pod.k8sName == name && pod.holding()) {
        return std::nullopt;  // a StatefulSet runs one pod of a name at a time
      }
    }
    s.set("name", name);
  }
  ++nextPod_;
  maybeKill(s);
  return s;
}

std::optional<Step> Generator::makeDel(const World& world) {
  auto owed = podsWhere(world, owesDel);
  auto known = podsWhere(world, isKnown);
  if (known.empty()) {
    return std::nullopt;
  }
  Step s{"del", {{"pod", !owed.empty() && chance(0.6) ? pick(owed) : pick(known)}}, {}};
  maybeKill(s);
  return s;
}

std::optional<Step> Generator::makeNodeOp(const std::string& op, const World& world) {
  if (op == "check" || op == "pod-die") {
    const auto holding = podsWhere(world, isHolding);
    return holding.empty() ? std::nullopt : std::optional<Step>(Step{op, {{"pod", pick(holding)}}, {}});
  }
  auto want = op == "pass" || op == "agent-stop" || op == "lapse" ? agentRuns
              : op == "agent-start"                               ? agentStopped
              : op == "node-recreate"                             ? isDeleted
              : op == "node-delete"                               ? isLive
                                                                  : isLiveTouched;
  const auto nodes = nodesWhere(world, want);
  if (nodes.empty() || (op == "node-delete" && nodes.size() <= 2)) {
    return std::nullopt;
  }
  const std::string node = std::to_string(pick(nodes));
  if (op == "lapse") {  // the agent stops, and stays stopped for longer than the lease
    followUps_.emplace_back(0, Step{"time", {{"secs", std::to_string(world.params().leaseSeconds + 5)}}, {}});
    return Step{"agent-stop", {{"node", node}}, {}};
  }
  Step s{op, {{"node", node}}, {}};
  if (op == "cnigc") {
    s.set("net", pick(keysOf(world.nets)));
    maybeKill(s);
  } else if (op == "pass") {
    maybeKill(s);
    if (s.has("kill")) {
      s.set("net", pick(keysOf(world.nets)));
    }
  } else if (op == "agent-stop" && chance(0.6)) {
    followUps_.emplace_back(3 + static_cast<int>(rng_() % 6), Step{"agent-start", {{"node", node}}, {}});
  }
  return s;
}

std::optional<Step> Generator::makeFault(const std::string& op, const World& world) {
  std::vector<int> running;
  std::vector<int> stopped;
  for (int m = 0; m < world.backend().members(); ++m) {
    (world.backend().running(m) ? running : stopped).push_back(m);
  }
  if (op == "etcd-stop" || op == "quorum-loss") {
    if (!stopped.empty()) {
      return std::nullopt;
    }
    return op == "quorum-loss" ? Step{op, {}, {}} : Step{op, {{"member", std::to_string(pick(running))}}, {}};
  }
  if (op == "etcd-start") {
    return stopped.empty() ? std::nullopt
                           : std::optional<Step>(Step{op, {{"member", std::to_string(pick(stopped))}}, {}});
  }
  if (!world.backend().kubernetes()) {
    return std::nullopt;
  }
  Step s{"emu-fault", {{"kind", pick(std::vector<std::string>{"500", "drop", "drop-after", "delay"})}}, {}};
  if (s.arg("kind") == "delay") {
    s.set("ms", pick(std::vector<int>{500, 2500}));
  }
  const std::string method = pick(std::vector<std::string>{"POST", "PUT", "DELETE", "GET", ""});
  if (!method.empty()) {
    s.set("method", method);
  }
  return s;
}

std::optional<Step> Generator::makeConfig(const std::string& op, const World& world) {
  std::vector<std::string> choices;
  if (op == "config") {
    for (const auto& [change, net] : configChanges()) {
      const bool allowed = profile_.changes.empty() ||
                           std::find(profile_.changes.begin(), profile_.changes.end(), change) != profile_.changes.end();
      if (allowed && world.nets.contains(net) && world.nets.at(net) == baseNetwork(net)) {
        choices.push_back(change);
      }
    }
    return choices.empty() ? std::nullopt : std::optional<Step>(Step{op, {{"change", pick(choices)}}, {}});
  }
  for (const auto& [net, def] : world.nets) {
    if (def != baseNetwork(net)) {
      choices.push_back(net);
    }
  }
  return choices.empty() ? std::nullopt : std::optional<Step>(Step{op, {{"net", pick(choices)}}, {}});
}

}  // namespace ibcni::chaos
