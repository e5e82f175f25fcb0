// SPDX-License-Identifier: Apache-2.0
// The end of every schedule: heal every fault, DEL every pod, let time pass with the agents
// running, then check what the backend and the ledgers still hold (I4, LEDGER) and that every
// reserved address can be had on another node (RESERVED).
#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "json_text.h"
#include "invariants.h"
#include "operations.h"

namespace ibcni::chaos {

namespace {

using nlohmann::json;

void healEverything(World& world) {
  if (auto r = world.backend().heal(); !r) {
    throw std::runtime_error("healing the backend: " + r.error());
  }
  world.apiFaultMaybeArmed = false;
  for (auto& n : world.nodes) {
    n.agentRunning = true;
  }
  for (const auto& name : networkNames(world.params().networks, world.params().guids)) {
    world.setNetwork(baseNetwork(name));
  }
}

// DEL of every pod the runtime still knows on a live node (each must exit 0: I6).
int deleteEveryPod(World& world) {
  int n = 0;
  for (auto& [id, pod] : world.pods) {
    if (!pod.known() || !world.live(pod.node)) {
      continue;
    }
    pod.phase = PodPhase::kDeleting;
    const Invocation inv = world.cni("DEL", pod);
    checkProcess(world, inv);
    checkMustSucceed(world, inv);
    if (inv.ok()) {
      pod.phase = PodPhase::kDeleted;
      pod.sandbox.reset();
    }
    ++n;
  }
  return n;
}

// Whether a live node goes by `name` (and, with `recreated`, was re-created in this schedule).
bool liveName(const World& world, const std::string& name, bool recreated = false) {
  for (const auto& n : world.nodes) {
    if (!n.decommissioned && n.name == name && (!recreated || n.recreated)) {
      return true;
    }
  }
  return false;
}

// I4 from one node's `ibcni-ipam pools --json` of the pool (a GUID pool's: the GUID driver's): no
// address (GUID) objects, no block of a gone node, no more blocks per live node and range set than it may keep.
void checkHoldings(World& world, const NetworkDef& def, const json& report) {
  const json addresses = jsonArray(report, def.guid ? "guids" : "addresses");
  if (!addresses.empty()) {
    world.violate("I4", "pool " + def.pool + " still has " + std::to_string(addresses.size()) +
                            (def.guid ? " GUID claim(s)" : " address object(s)") +
                            " after every pod was deleted, first " + addresses[0].dump());
    return;
  }
  const int keep = world.params().baseline ? 1 : world.params().minBlocksPerNode;
  std::map<std::pair<std::string, int>, int> perNodeSet;
  for (const auto& b : jsonArray(report, "blocks")) {
    const std::string holder = jsonText(b, "holder");
    if (holder.empty()) {
      continue;  // only in this node's ledger: LEDGER judges it
    }
    if (!liveName(world, holder)) {
      world.violate("I4", "pool " + def.pool + ": block " + jsonText(b, def.guid ? "range" : "cidr", "?") +
                              " is still held by " + holder +
                              ", which is not a live node");
      return;
    }
    if (def.guid && liveName(world, holder, true)) {
      // Not judged: a re-created node (a new machine of the same name, without its pool index) keeps
      // the GUID blocks its predecessor held until its next ADD of the pool: no pass knows the pool
      // (README: "What it proves").
      continue;
    }
    const int set = static_cast<int>(jsonInt(b, "set"));
    if (++perNodeSet[{holder, set}] > keep) {
      world.violate("I4", "pool " + def.pool + ": " + holder + " still holds " +
                              std::to_string(perNodeSet[{holder, set}]) + " blocks of range set " +
                              std::to_string(set) + " with no pod left (it may keep " + std::to_string(keep) + ")");
      return;
    }
  }
}

// I4 for a GUID pool, from each node's report: none of its blocks has a GUID in use on it (the node's
// store holds no allocation).
void checkNoGuidInUse(World& world, const NetworkDef& def, int node, const json& report) {
  for (const auto& b : jsonArray(report, "blocks")) {
    if (b.value("mine", false) && jsonInt(b, "inUse") > 0) {
      world.violate("I4", "pool " + def.pool + ": node " + std::to_string(node) + " still has " +
                              std::to_string(jsonInt(b, "inUse")) + " GUID(s) of block " + jsonText(b, "range", "?") +
                              " in use after every pod was deleted");
      return;
    }
  }
}

// I4 and LEDGER for every pool the schedule used, from every live node that ran anything.
void checkPools(World& world) {
  for (const auto& [pool, def] : world.pools) {
    bool holdingsChecked = false;
    for (int node : world.liveNodes()) {
      if (!world.nodes[node].touched || world.violation) {
        continue;
      }
      const Invocation inv = world.tool(node, "pools", def, {"--json"});
      checkProcess(world, inv);
      const json report = json::parse(inv.out, nullptr, false);
      if (inv.code == 7 && world.configChanged()) {
        break;  // the pool refused as defined otherwise by a change of this schedule
      }
      if (!inv.ok() || !report.is_object()) {
        world.violate("ERR", inv.what + " --json failed after every fault was healed: " + inv.brief());
        return;
      }
      if (!holdingsChecked) {
        checkHoldings(world, def, report);
        holdingsChecked = true;
      }
      if (def.guid) {
        checkNoGuidInUse(world, def, node, report);
      }
      json disagreements = report.contains("ledger") ? jsonArray(report["ledger"], "disagreements") : json::array();
      if (def.guid && world.nodes[node].recreated) {
        // Not judged, as in checkHoldings: the re-created node's GUID blocks its ledger never knew.
        disagreements.erase(std::remove_if(disagreements.begin(), disagreements.end(),
                                           [](const json& d) { return jsonText(d, "ledger") == "absent"; }),
                            disagreements.end());
      }
      if (!disagreements.empty()) {
        world.violate("LEDGER", "node " + std::to_string(node) + "'s ledger of pool " + pool +
                                    " disagrees with the backend: " + disagreements.dump());
      }
    }
  }
}

// A pod the end checks add themselves: `id` on network `net` under K8S_POD_NAME `k8sName`, on
// `node`, in a sandbox of its own.
Pod endPod(const std::string& id, const std::string& net, const std::string& k8sName, int node) {
  Pod pod;
  pod.id = id;
  pod.net = net;
  pod.k8sName = k8sName;
  pod.node = node;
  auto sandbox = PodProcess::start();
  if (!sandbox) {
    throw std::runtime_error("cannot start a pod sandbox: " + sandbox.error());
  }
  pod.sandbox = std::make_unique<PodProcess>(std::move(*sandbox));
  return pod;
}

// Whether a live node keeps the GUID pool of `def`: its store is there (a pass gives a wiped one
// back from the node's pool index first).
bool keptByLiveNode(const World& world, const NetworkDef& def) {
  for (int node : world.liveNodes()) {
    std::error_code ec;
    if (std::filesystem::exists(world.nodes[node].dataDir + "/.guid/" + world.poolName(def), ec) || ec) {
      return true;
    }
  }
  return false;
}

// A GUID pool that no live node keeps (every node that used it is gone) has no pass to take over
// its gone nodes' blocks: they are kept until the pool's next use (README: "What it proves"). That
// next use, proven here: an ADD and a DEL of the pool on a live node, then the agents' passes; I4
// is then judged as for every pool. Returns what was done ("" for nothing).
std::string useOrphanedGuidPools(World& world, std::mt19937_64& rng) {
  std::string done;
  for (const auto& [pool, def] : world.pools) {
    const auto live = world.liveNodes();
    if (!def.guid || live.empty() || keptByLiveNode(world, def) || !world.nets.contains(def.name)) {
      continue;
    }
    Pod pod = endPod("end-use-" + def.name, def.name, "end-use-" + def.name, live[rng() % live.size()]);
    const Invocation add = world.cni("ADD", pod);
    checkProcess(world, add);
    const Invocation del = world.cni("DEL", pod);
    checkProcess(world, del);
    checkMustSucceed(world, del);
    done += " pool " + pool + " used on node " + std::to_string(pod.node) + " (ADD: " + add.brief() + ");";
  }
  if (done.empty() || world.violation) {
    return done;
  }
  const int wait = world.params().releaseAfterSeconds + world.params().leaseSeconds + 5;
  const std::string first = passTime(world, wait);  // blocks of gone nodes taken over, empty ones noted
  return done + " " + first + "; " + passTime(world, wait);  // and given back
}

// The node of the last pod named `name` (-1: none).
int lastNodeOf(const World& world, const std::string& name) {
  int node = -1;
  int step = -1;
  for (const auto& [id, pod] : world.pods) {
    if (pod.k8sName == name && pod.step > step) {
      node = pod.node;
      step = pod.step;
    }
  }
  return node;
}

// RESERVED: the pod of every reservation, added on a live node other than its last one if
// there is one, gets its reserved address; then it is deleted.
void checkReservation(World& world, const NetworkDef& def, const std::string& owner, const std::string& address,
                      std::mt19937_64& rng) {
  const std::string name = owner.substr(owner.find('/') + 1);
  std::vector<int> candidates;
  for (int node : world.liveNodes()) {
    if (node != lastNodeOf(world, name)) {
      candidates.push_back(node);
    }
  }
  if (candidates.empty()) {
    candidates = world.liveNodes();
  }
  Pod pod = endPod("end-" + name + "-" + def.name, def.name, name, candidates[rng() % candidates.size()]);
  const Invocation add = world.cni("ADD", pod);
  checkProcess(world, add);
  if (add.code == 7 && world.configChanged()) {
    // A change of this schedule left the pool defined otherwise (a definition is recorded once).
  } else if (!add.ok() || add.out.find("\"" + address + "/") == std::string::npos) {
    world.violate("RESERVED", owner + " added on node " + std::to_string(pod.node) + " (" + def.name +
                                  ") at the end did not get its reserved " + address + ": " + add.brief() + " " +
                                  add.out);
  }
  const Invocation del = world.cni("DEL", pod);
  checkProcess(world, del);
  checkMustSucceed(world, del);
}

void checkReservations(World& world, std::mt19937_64& rng) {
  std::set<std::pair<std::string, std::string>> done;  // (pool, address)
  for (const auto& [net, def] : world.nets) {
    for (const auto& [owner, address] : def.reservations) {
      if (!world.violation && done.insert({def.pool, address}).second) {
        checkReservation(world, def, owner, address, rng);
      }
    }
  }
}

}  // namespace

std::string endChecks(World& world, std::mt19937_64& rng) {
  healEverything(world);
  const int deleted = deleteEveryPod(world);
  if (world.violation) {
    return "end: a DEL failed";
  }
  const int wait = world.params().releaseAfterSeconds + world.params().leaseSeconds + 5;
  const std::string first = passTime(world, wait);
  for (const auto& n : world.nodes) {
    if (n.decommissioned) {
      (void)forgetNode(world, n.index);  // the operator's statement again, now that the lease lapsed
    }
  }
  const std::string second = passTime(world, wait);
  if (world.violation) {
    return "end: " + first + "; " + second;
  }
  const std::string reused = useOrphanedGuidPools(world, rng);
  if (world.violation) {
    return "end: " + first + "; " + second + ";" + reused;
  }
  checkPools(world);
  if (!world.violation) {
    checkReservations(world, rng);
  }
  return "end: healed, " + std::to_string(deleted) + " pod(s) deleted; " + first + "; " + second +
         (reused.empty() ? "" : ";" + reused) + (world.violation ? "" : "; pools, ledgers and reservations checked");
}

}  // namespace ibcni::chaos
