// SPDX-License-Identifier: Apache-2.0
#include "operations.h"

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "invariants.h"
#include "json_text.h"

namespace ibcni::chaos {

namespace {

using nlohmann::json;

std::optional<KillPoint> killOf(const Step& step) {
  return step.has("kill") ? KillPoint::parse(step.arg("kill")) : std::nullopt;
}

Pod* findPod(World& world, const std::string& id) {
  auto it = world.pods.find(id);
  return it == world.pods.end() ? nullptr : &it->second;
}

// The addresses of an ADD result (ips[].address without the prefix length).
std::vector<std::string> resultAddresses(const std::string& out) {
  std::vector<std::string> addresses;
  const json r = json::parse(out, nullptr, false);
  if (r.is_object() && r.contains("ips") && r["ips"].is_array()) {
    for (const auto& ip : r["ips"]) {
      if (ip.is_object() && ip.contains("address") && ip["address"].is_string()) {
        const auto a = ip["address"].get<std::string>();
        addresses.push_back(a.substr(0, a.find('/')));
      }
    }
  }
  return addresses;
}

std::string joined(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) {
    s += (s.empty() ? "" : ",") + w;
  }
  return s;
}

std::string opAdd(World& world, const Step& step) {
  const int node = step.intArg("node");
  const std::string net = step.arg("net");
  const std::string id = step.arg("pod");
  if (!world.live(node)) {
    return skipped("node " + std::to_string(node) + " is not a live node");
  }
  if (!world.nets.contains(net)) {
    return skipped("no network " + net + " in this schedule");
  }
  if (id.empty() || world.pods.contains(id)) {
    return skipped("pod " + id + " exists already");
  }
  Pod& pod = world.pods[id];
  pod.id = id;
  pod.node = node;
  pod.net = net;
  pod.k8sName = step.has("name") ? step.arg("name") : id;
  pod.requested = world.nets.at(net).guid ? step.arg("guid") : step.arg("ip");
  pod.step = world.step;
  auto sandbox = PodProcess::start();
  if (!sandbox) {
    throw std::runtime_error("cannot start a pod sandbox: " + sandbox.error());
  }
  pod.sandbox = std::make_unique<PodProcess>(std::move(*sandbox));
  const bool disturbed = backendDisturbed(world);
  const auto kill = killOf(step);
  const Invocation inv = world.cni("ADD", pod, kill);
  checkProcess(world, inv);
  if (inv.killedByShim) {
    pod.phase = PodPhase::kUnknown;
    return "killed";
  }
  if (inv.ok()) {
    return adoptAddResult(world, pod, inv);
  }
  pod.phase = PodPhase::kUnknown;
  std::string outcome = inv.brief();
  const std::string note = judgeAddFailure(world, pod, inv, disturbed);
  return note.empty() ? outcome : outcome + "; " + note;
}

std::string opDel(World& world, const Step& step) {
  Pod* pod = findPod(world, step.arg("pod"));
  if (pod == nullptr || !pod->known()) {
    return skipped("pod " + step.arg("pod") + " is not known to the runtime");
  }
  if (!world.live(pod->node)) {
    return skipped("its node is gone");
  }
  // From here the pod no longer uses its addresses: the runtime stopped it before the DEL.
  pod->phase = PodPhase::kDeleting;
  const Invocation inv = world.cni("DEL", *pod, killOf(step));
  checkProcess(world, inv);
  if (inv.killedByShim) {
    return "killed";
  }
  checkMustSucceed(world, inv);
  if (inv.ok()) {
    pod->phase = PodPhase::kDeleted;
    pod->sandbox.reset();  // the sandbox goes once its network is torn down
  }
  return inv.brief();
}

std::string opCheck(World& world, const Step& step) {
  Pod* pod = findPod(world, step.arg("pod"));
  if (pod == nullptr || !pod->holding() || !world.live(pod->node)) {
    return skipped("pod " + step.arg("pod") + " holds no address");
  }
  if (world.nets.at(pod->net).guid) {
    return skipped("the GUID driver has no CHECK (sriov mode's compares the VF's GUID)");
  }
  const Invocation inv = world.cni("CHECK", *pod);
  checkProcess(world, inv);
  return inv.brief();
}

std::string opCniGc(World& world, const Step& step) {
  const int node = step.intArg("node");
  const std::string net = step.arg("net");
  if (!world.live(node) || !world.nets.contains(net)) {
    return skipped("no live node " + std::to_string(node) + " or no network " + net);
  }
  const Invocation inv = world.cniGc(node, net, killOf(step));
  checkProcess(world, inv);
  if (inv.killedByShim) {
    return "killed";
  }
  checkMustSucceed(world, inv);
  return inv.brief();
}

std::string opPass(World& world, const Step& step) {
  const int node = step.intArg("node");
  if (!world.live(node)) {
    return skipped("node " + std::to_string(node) + " is not a live node");
  }
  if (!world.nodes[node].agentRunning) {
    return skipped("its agent is stopped");
  }
  return agentPass(world, node, killOf(step), step.arg("net"));
}

std::string opTime(World& world, const Step& step) {
  const int secs = step.intArg("secs", 0);
  if (secs <= 0) {
    return skipped("no secs=");
  }
  return passTime(world, secs);
}

// The definitions an agent pass visits: every network as configured now, then the last
// definition of every pool no network names any more.
std::vector<NetworkDef> passDefinitions(const World& world) {
  std::vector<NetworkDef> defs;
  std::set<std::string> current;
  for (const auto& [name, def] : world.nets) {
    defs.push_back(def);
    current.insert(def.pool);
  }
  for (const auto& [pool, def] : world.pools) {
    if (!current.contains(pool)) {
      defs.push_back(def);
    }
  }
  return defs;
}

// Revokes the etcd leases of every node that did nothing for longer than the lease (its agent
// stopped, or decommissioned). Nodes whose agent runs renew continuously.
std::string revokeLapsed(World& world) {
  std::string revoked;
  if (world.params().backend != "etcd" || !world.backend().quorum()) {
    return revoked;  // without a quorum etcd expires no lease either
  }
  for (auto& n : world.nodes) {
    const bool idle = n.decommissioned || !n.agentRunning;
    if (!idle || !n.touched || n.revokedAt == n.lastTouch ||
        world.now() - n.lastTouch <= world.params().leaseSeconds + 1) {
      continue;
    }
    auto r = world.backend().revokeLeasesOf(world.etcdPrefix(), n.name);
    if (!r) {
      throw std::runtime_error("revoking the leases of " + n.name + ": " + r.error());
    }
    n.revokedAt = n.lastTouch;
    revoked += " node " + std::to_string(n.index) + " (" + std::to_string(*r) + " lease(s))";
  }
  return revoked;
}

using OpFn = std::function<std::string(World&, const Step&)>;

const std::map<std::string, OpFn>& opTable() {
  static const std::map<std::string, OpFn> table{
      {"add", opAdd},
      {"del", opDel},
      {"check", opCheck},
      {"cnigc", opCniGc},
      {"pass", opPass},
      {"time", opTime},
      {"agent-stop", opAgentStop},
      {"agent-start", opAgentStart},
      {"reboot", opReboot},
      {"pod-die", opPodDie},
      {"etcd-stop", opEtcdStop},
      {"etcd-start", opEtcdStart},
      {"quorum-loss", opQuorumLoss},
      {"quorum-restore", opQuorumRestore},
      {"emu-fault", opEmuFault},
      {"node-delete", opNodeDelete},
      {"node-recreate", opNodeRecreate},
      {"config", opConfig},
      {"revert", opRevert},
  };
  return table;
}

// "ok", "killed", "skipped", "error 108", ...: an outcome's class, for the run's counts.
std::string outcomeClass(const std::string& outcome) {
  for (const char* word : {"skipped", "killed", "ok", "hung"}) {
    if (outcome.rfind(word, 0) == 0) {
      return word;
    }
  }
  const auto e = outcome.find("(error ");
  if (e != std::string::npos) {
    return outcome.substr(e + 1, outcome.find(':', e) - e - 1);
  }
  return outcome.substr(0, outcome.find_first_of(" :"));
}

}  // namespace

std::string adoptAddResult(World& world, Pod& pod, const Invocation& inv) {
  const NetworkDef& def = world.nets.at(pod.net);
  if (def.guid) {
    pod.guid = jsonText(json::parse(inv.out, nullptr, false), "guid");
  } else {
    pod.addresses = resultAddresses(inv.out);
  }
  const std::string held = def.guid ? pod.guid : joined(pod.addresses);
  if (held.empty()) {
    pod.phase = PodPhase::kUnknown;
    world.violate("ERR", inv.what + " exited 0 without " + (def.guid ? "a guid" : "ips[].address") + ": " + inv.out);
    return def.guid ? "ok without a GUID" : "ok without an address";
  }
  pod.phase = PodPhase::kLive;
  if (def.guid) {
    checkGuidResult(world, pod, def);
  } else {
    checkAddResult(world, pod, def);
  }
  return "ok " + held;
}

const std::vector<std::string>& stepOps() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v;
    for (const auto& [name, fn] : opTable()) {
      v.push_back(name);
    }
    return v;
  }();
  return ops;
}

void runStep(World& world, Step& step) {
  const auto& table = opTable();
  auto it = table.find(step.op);
  step.outcome = it == table.end() ? skipped("unknown op " + step.op) : it->second(world, step);
  ++world.stats.ops[step.op];
  ++world.stats.outcomes[step.op + " " + outcomeClass(step.outcome)];
}

bool backendDisturbed(World& world) {
  if (!world.backend().quorum()) {
    return true;
  }
  if (world.apiFaultMaybeArmed) {
    if (world.backend().apiFaultArmed()) {
      return true;
    }
    world.apiFaultMaybeArmed = false;
  }
  return false;
}

std::string agentPass(World& world, int node, std::optional<KillPoint> kill, const std::string& killNet) {
  int ok = 0;
  std::string notes;
  std::set<std::string> guidPools;  // a GUID pool's pass is over its store, whichever network names it
  for (const auto& def : passDefinitions(world)) {
    if (def.guid && !guidPools.insert(def.pool).second) {
      continue;
    }
    const bool disturbed = backendDisturbed(world);
    const bool armed = kill && (killNet.empty() || killNet == def.name) && world.nets.contains(def.name) &&
                       world.nets.at(def.name) == def;
    const auto armedKill = armed ? kill : std::nullopt;
    const Invocation inv = def.guid ? world.guidPass(node, def, armedKill) : world.tool(node, "gc", def, {}, armedKill);
    checkProcess(world, inv);
    if (inv.killedByShim) {
      return "killed: " + std::string(def.guid ? "pass " : "gc ") + def.name + " (the pass is over);" + notes;
    }
    if (inv.ok()) {
      ++ok;
      continue;
    }
    checkPassFailure(world, inv, disturbed);
    notes += " gc " + def.name + "/" + def.pool + ": " + inv.brief() + ";";
  }
  return notes.empty() ? "ok (" + std::to_string(ok) + " gc)" : "failed:" + notes + " " + std::to_string(ok) + " gc ok";
}

std::string passEveryNode(World& world) {
  int passes = 0;
  for (int node : world.liveNodes()) {
    if (world.nodes[node].agentRunning && world.nodes[node].touched) {
      agentPass(world, node);
      ++passes;
    }
  }
  return std::to_string(passes) + " node pass(es)";
}

std::string passTime(World& world, int seconds) {
  world.advance(seconds);
  const std::string revoked = revokeLapsed(world);
  const std::string passes = passEveryNode(world);
  return "ok: clock +" + std::to_string(seconds) + "s (offset " + std::to_string(world.offset()) + "s), " + passes +
         (revoked.empty() ? "" : ", leases lapsed:" + revoked);
}

}  // namespace ibcni::chaos
