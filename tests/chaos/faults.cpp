// SPDX-License-Identifier: Apache-2.0
// The faults a schedule injects (operations.h lists their steps).
#include <filesystem>
#include <nlohmann/json.hpp>

#include "invariants.h"
#include "operations.h"

namespace ibcni::chaos {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Kills the sandboxes of every pod of `node` (they keep their phase: the runtime still owes
// them a DEL unless `forget`).
int killPodsOf(World& world, int node, bool forget) {
  int killed = 0;
  for (auto& [id, pod] : world.pods) {
    if (pod.node != node) {
      continue;
    }
    if (pod.alive()) {
      pod.sandbox->kill();
      ++killed;
    }
    if (forget && pod.known()) {
      pod.phase = PodPhase::kForgotten;
    }
  }
  return killed;
}

std::string nodeOrSkip(const World& world, int node) {
  return world.live(node) ? std::string() : skipped("node " + std::to_string(node) + " is not a live node");
}

}  // namespace

std::string opReboot(World& world, const Step& step) {
  const int node = step.intArg("node");
  if (auto s = nodeOrSkip(world, node); !s.empty()) {
    return s;
  }
  const int killed = killPodsOf(world, node, false);
  std::error_code ec;
  fs::remove_all(world.nodes[node].dataDir, ec);
  world.nodes[node].wiped = true;
  world.nodes[node].agentRunning = true;  // the agent's pod comes back with the node
  return "ok: " + std::to_string(killed) + " pod(s) died, data dir wiped";
}

std::string opPodDie(World& world, const Step& step) {
  auto it = world.pods.find(step.arg("pod"));
  if (it == world.pods.end() || !it->second.alive()) {
    return skipped("pod " + step.arg("pod") + " has no live sandbox");
  }
  it->second.sandbox->kill();
  return "ok: its network namespace is gone";
}

std::string opAgentStop(World& world, const Step& step) {
  const int node = step.intArg("node");
  if (auto s = nodeOrSkip(world, node); !s.empty()) {
    return s;
  }
  world.nodes[node].agentRunning = false;
  return "ok";
}

std::string opAgentStart(World& world, const Step& step) {
  const int node = step.intArg("node");
  if (auto s = nodeOrSkip(world, node); !s.empty()) {
    return s;
  }
  if (world.nodes[node].agentRunning) {
    return skipped("its agent runs");
  }
  world.nodes[node].agentRunning = true;
  return "ok, first pass: " + agentPass(world, node);
}

std::string opEtcdStop(World& world, const Step& step) {
  const int m = step.intArg("member");
  if (m < 0 || m >= world.backend().members() || !world.backend().running(m)) {
    return skipped("member " + std::to_string(m) + " is not running");
  }
  if (auto r = world.backend().stopMember(m); !r) {
    throw std::runtime_error("stopping etcd member " + std::to_string(m) + ": " + r.error());
  }
  return "ok: " + std::to_string(world.backend().runningMembers()) + " of 3 members run";
}

std::string opEtcdStart(World& world, const Step& step) {
  const int m = step.intArg("member");
  if (m < 0 || m >= world.backend().members() || world.backend().running(m)) {
    return skipped("member " + std::to_string(m) + " is running");
  }
  if (auto r = world.backend().startMember(m); !r) {
    throw std::runtime_error("starting etcd member " + std::to_string(m) + ": " + r.error());
  }
  if (world.backend().quorum()) {
    if (auto r = world.backend().waitHealthy(); !r) {
      throw std::runtime_error(r.error());
    }
  }
  return "ok";
}

std::string opQuorumLoss(World& world, const Step&) {
  int stopped = 0;
  for (int m = world.backend().members() - 1; m >= 0 && world.backend().quorum(); --m) {
    if (world.backend().running(m)) {
      if (auto r = world.backend().stopMember(m); !r) {
        throw std::runtime_error("stopping etcd member " + std::to_string(m) + ": " + r.error());
      }
      ++stopped;
    }
  }
  return stopped == 0 ? skipped("no quorum already") : "ok: " + std::to_string(stopped) + " member(s) stopped";
}

std::string opQuorumRestore(World& world, const Step&) {
  if (world.backend().runningMembers() == world.backend().members()) {
    return skipped("every member runs");
  }
  if (auto r = world.backend().heal(); !r) {
    throw std::runtime_error(r.error());
  }
  return "ok";
}

std::string opEmuFault(World& world, const Step& step) {
  if (!world.backend().kubernetes()) {
    return skipped("not the kubernetes backend");
  }
  const std::string kind = step.arg("kind");
  json f = {{"count", 1}};
  if (kind == "500") {
    f["status"] = 500;
  } else if (kind == "drop") {
    f["drop"] = true;
  } else if (kind == "drop-after") {
    f["drop"] = true;
    f["after"] = true;
  } else if (kind == "delay") {
    f["delayMs"] = step.intArg("ms", 1000);
  } else {
    return skipped("unknown fault kind " + kind);
  }
  if (step.has("method")) {
    f["methods"] = json::array({step.arg("method")});
  }
  if (auto r = world.backend().apiFault(f.dump()); !r) {
    throw std::runtime_error("arming an API fault: " + r.error());
  }
  world.apiFaultMaybeArmed = true;
  return "ok: armed " + f.dump();
}

std::string opNodeDelete(World& world, const Step& step) {
  const int node = step.intArg("node");
  if (auto s = nodeOrSkip(world, node); !s.empty()) {
    return s;
  }
  if (world.liveNodes().size() <= 2) {
    return skipped("two live nodes are the fewest a schedule keeps");
  }
  if (!world.backend().quorum()) {
    return skipped("without etcd's quorum neither the Node object nor the node's registration can be removed");
  }
  const int killed = killPodsOf(world, node, true);
  NodeState& n = world.nodes[node];
  n.decommissioned = true;
  n.deletedAt = world.now();
  std::string outcome = "ok: " + std::to_string(killed) + " pod(s) died";
  if (world.backend().kubernetes()) {
    if (auto r = world.backend().deleteNode(n.name); !r) {
      throw std::runtime_error("deleting Node " + n.name + ": " + r.error());
    }
    return outcome + ", Node object deleted";
  }
  // etcd: the decommissioned node's lease lapses; then the operator forgets it (new code).
  outcome += "; " + passTime(world, world.params().leaseSeconds + 5);
  return outcome + forgetNode(world, node);
}

std::string forgetNode(World& world, int node) {
  if (world.params().baseline || world.params().backend != "etcd") {
    return {};
  }
  std::string outcome;
  const int other = world.liveNodes().front();
  for (const auto& [pool, def] : world.pools) {
    if (def.guid) {
      continue;  // a node's liveness is the etcd prefix's: forgetting it through an address pool covers the GUID pool
    }
    const Invocation inv = world.tool(other, "forget-node", def, {world.nodes[node].name});
    checkProcess(world, inv);
    outcome += "; forget-node " + world.nodes[node].name + " (" + pool + ") from node " + std::to_string(other) +
               ": " + inv.brief();
  }
  return outcome;
}

std::string opNodeRecreate(World& world, const Step& step) {
  const int node = step.intArg("node");
  if (node < 0 || node >= static_cast<int>(world.nodes.size()) || !world.nodes[node].decommissioned) {
    return skipped("node " + std::to_string(node) + " was not deleted");
  }
  if (!world.backend().quorum()) {
    return skipped("without etcd's quorum the Node object cannot be created");
  }
  NodeState& n = world.nodes[node];
  std::error_code ec;
  fs::remove_all(n.dataDir, ec);
  fs::remove_all(n.indexDir, ec);  // a new machine
  n.wiped = true;
  n.recreated = true;
  n.decommissioned = false;
  n.agentRunning = true;
  if (auto r = world.backend().createNode(n.name); !r) {
    throw std::runtime_error("creating Node " + n.name + ": " + r.error());
  }
  return "ok: back with a wiped data dir";
}

std::string opConfig(World& world, const Step& step) {
  const std::string change = step.arg("change");
  const auto& changes = configChanges();
  auto it = changes.find(change);
  if (it == changes.end() || !world.nets.contains(it->second)) {
    return skipped("no change " + change + " for this schedule's networks");
  }
  world.setNetwork(applyChange(world.nets.at(it->second), change));
  return "ok: " + it->second + " changed from this step on";
}

std::string opRevert(World& world, const Step& step) {
  const std::string net = step.arg("net");
  if (!world.nets.contains(net) || world.nets.at(net) == baseNetwork(net)) {
    return skipped(net + " is as the schedule started with it");
  }
  world.setNetwork(baseNetwork(net));
  return "ok";
}

}  // namespace ibcni::chaos
