// SPDX-License-Identifier: Apache-2.0
// The invariants checked after every step (invariants.h).
#include "invariants.h"

#include <map>
#include <sstream>

#include "operations.h"

namespace ibcni::chaos {

namespace {

std::string describePod(const Pod& pod) {
  return pod.id + " (" + pod.net + ", node " + std::to_string(pod.node) + ", ADD at step " + std::to_string(pod.step) +
         ")";
}

bool samePool(const World& world, const Pod& pod, const NetworkDef& def) {
  return world.nets.contains(pod.net) && world.nets.at(pod.net).pool == def.pool;
}

// Why I7 cannot be judged now ("" when it can): something the schedule did legitimately keeps
// addresses or blocks held for longer than one pass on every node.
std::string capacityNotJudged(World& world) {
  if (world.configChanged()) {
    return "the configuration changed in this schedule";
  }
  if (backendDisturbed(world)) {
    return "the backend is disturbed";
  }
  for (const auto& n : world.nodes) {
    if (!n.decommissioned && !n.agentRunning) {
      return "the agent of node " + std::to_string(n.index) + " is stopped";
    }
    if (n.decommissioned && n.touched) {
      const bool expired = world.params().backend == "etcd"
                               ? n.revokedAt == n.lastTouch
                               : world.now() - n.lastTouch > world.params().leaseSeconds + 2;
      if (!expired) {
        return "deleted node " + std::to_string(n.index) + "'s claims have not expired yet";
      }
    }
  }
  return {};
}

// "3 of 8 blocks": the blocks of `def` that hold none of `held`.
std::string emptyBlocks(const NetworkDef& def, const std::set<std::uint32_t>& held) {
  std::set<std::uint32_t> used;
  for (auto a : held) {
    used.insert(a / static_cast<std::uint32_t>(def.blockSize));
  }
  long total = 0;
  long empty = 0;
  for (const auto& set : def.rangeSets) {
    for (const auto& subnet : set) {
      const auto c = parseCidr(subnet);
      if (!c) {
        continue;
      }
      for (std::uint64_t b = c->first(); b <= c->last(); b += static_cast<std::uint64_t>(def.blockSize)) {
        ++total;
        empty += used.contains(static_cast<std::uint32_t>(b) / static_cast<std::uint32_t>(def.blockSize)) ? 0 : 1;
      }
    }
  }
  return std::to_string(empty) + " of " + std::to_string(total) + " blocks";
}

// Whether the pool of `pod` still has an address for it that no live pod holds; `why` says how
// many (or who holds the reserved one).
// The same for a GUID pool: a GUID stays held until its pod's DEL (not when the pod dies: the VF
// keeps it), so every pod the runtime still knows counts as holding one.
bool guidPoolHasRoom(const World& world, const Pod& pod, std::string& why) {
  const NetworkDef& def = world.nets.at(pod.net);
  const auto [first, last] = guidRangeOf(def);
  long free = static_cast<long>(last - first + 1);
  for (const auto& [id, other] : world.pods) {
    free -= id != pod.id && samePool(world, other, def) && other.known() ? 1 : 0;
  }
  why = std::to_string(free) + " of " + std::to_string(last - first + 1) + " GUIDs of pool " + def.pool +
        " held by no pod the runtime knows";
  return free > 0;
}

bool poolHasRoom(const World& world, const Pod& pod, std::string& why) {
  const NetworkDef& def = world.nets.at(pod.net);
  if (def.guid) {
    return guidPoolHasRoom(world, pod, why);
  }
  const auto reserved = def.reservations.find("chaos/" + pod.k8sName);
  std::set<std::uint32_t> held;
  int maybe = 0;  // pods whose ADD or DEL outcome is unknown and whose sandbox lives
  for (const auto& [id, other] : world.pods) {
    if (id == pod.id || !samePool(world, other, def)) {
      continue;
    }
    if (other.holding()) {
      for (const auto& a : other.addresses) {
        if (auto v = parseIpv4(a)) {
          held.insert(*v);
        }
      }
    } else if (other.alive() && (other.phase == PodPhase::kUnknown || other.phase == PodPhase::kDeleting)) {
      if (reserved == def.reservations.end() || other.k8sName == pod.k8sName) {
        ++maybe;
      }
    }
  }
  if (reserved != def.reservations.end()) {
    const auto a = parseIpv4(reserved->second);
    why = "reserved " + reserved->second + (held.contains(*a) ? " held by a live pod" : " held by no live pod") +
          (maybe > 0 ? ", a predecessor's DEL is pending" : "");
    return !held.contains(*a) && maybe == 0;
  }
  const auto all = allocatable(def);
  long free = 0;
  for (auto a : all) {
    free += held.contains(a) ? 0 : 1;
  }
  free -= maybe;
  why = std::to_string(free) + " of " + std::to_string(all.size()) + " allocatable addresses of pool " + def.pool +
        " held by no live pod, " + emptyBlocks(def, held) + " without a live pod's address";
  return free > 0;
}

}  // namespace

const std::vector<std::string>& violationKinds() {
  static const std::vector<std::string> kinds{"I1",  "ADDR", "I6",  "I7",   "I4",
                                              "LEDGER", "RESERVED", "CRASH", "HANG", "ERR"};
  return kinds;
}

void checkProcess(World& world, const Invocation& inv) {
  if (inv.timedOut) {
    world.violate("HANG", inv.what + " did not finish: " + inv.brief());
  } else if (inv.status > 128 && !inv.killedByShim) {
    world.violate("CRASH", inv.what + " died of signal " + std::to_string(inv.status - 128) + ": " + inv.err);
  } else if (inv.code == 999) {
    world.violate("CRASH", inv.what + " answered error 999: " + inv.brief());
  }
}

void checkNoAddressTwice(World& world) {
  std::map<std::string, std::vector<const Pod*>> holders;
  for (const auto& [id, pod] : world.pods) {
    if (pod.holding()) {
      for (const auto& a : pod.addresses) {
        holders[a].push_back(&pod);
      }
      if (!pod.guid.empty()) {
        holders["GUID " + pod.guid].push_back(&pod);
      }
    }
  }
  for (const auto& [address, pods] : holders) {
    if (pods.size() > 1) {
      std::string list;
      for (const Pod* p : pods) {
        list += (list.empty() ? "" : " and ") + describePod(*p);
      }
      world.violate("I1", address + " is held by " + std::to_string(pods.size()) + " live pods: " + list);
      return;
    }
  }
}

void checkAddResult(World& world, const Pod& pod, const NetworkDef& def) {
  const auto reserved = def.reservations.find("chaos/" + pod.k8sName);
  for (const auto& text : pod.addresses) {
    const auto a = parseIpv4(text);
    const std::string reason = a ? forbiddenReason(def, *a) : "not an IPv4 address";
    if (!reason.empty()) {
      world.violate("ADDR", describePod(pod) + " was given " + text + ": " + reason);
      return;
    }
    for (const auto& [owner, r] : def.reservations) {
      if (r == text && owner != "chaos/" + pod.k8sName) {
        world.violate("ADDR", describePod(pod) + " was given " + text + ", reserved for " + owner + " in " + def.name);
        return;
      }
    }
    if (reserved != def.reservations.end() && text != reserved->second) {
      world.violate("ADDR", describePod(pod) + " (" + reserved->first + ") was given " + text + ", not its reserved " +
                                reserved->second);
      return;
    }
    if (reserved == def.reservations.end() && !pod.requested.empty() && text != pod.requested) {
      world.violate("ADDR", describePod(pod) + " asked for " + pod.requested + " and was given " + text);
      return;
    }
  }
}

void checkGuidResult(World& world, const Pod& pod, const NetworkDef& def) {
  if (const std::string reason = guidForbiddenReason(def, pod.guid); !reason.empty()) {
    world.violate("ADDR", describePod(pod) + " was given GUID " + pod.guid + ": " + reason);
  } else if (!pod.requested.empty() && pod.guid != pod.requested) {
    world.violate("ADDR", describePod(pod) + " asked for GUID " + pod.requested + " and was given " + pod.guid);
  }
}

void checkMustSucceed(World& world, const Invocation& inv) {
  if (!inv.ok() && !inv.killedByShim) {
    world.violate("I6", inv.what + " must exit 0 and did not: " + inv.brief());
  }
}

void checkPassFailure(World& world, const Invocation& inv, bool disturbed) {
  if (inv.code == 11 || disturbed) {
    return;  // the backend did not answer in time: the next pass tries again
  }
  world.violate("I6", inv.what + " (the agent's pass) failed: " + inv.brief());
}

std::string judgeAddFailure(World& world, Pod& pod, const Invocation& inv, bool disturbed) {
  if (disturbed) {
    return "allowed: the backend was disturbed";
  }
  if (inv.code == 7) {
    if (world.configChanged()) {
      return "allowed: the configuration changed in this schedule";
    }
    world.violate("ERR", inv.what + " failed with 7 though no configuration changed in this schedule: " + inv.brief());
    return {};
  }
  if (inv.code != 11 && inv.code != 108) {
    world.violate("ERR", inv.what + " failed: " + inv.brief());
    return {};
  }
  if (!pod.requested.empty()) {
    return "allowed: a requested address";
  }
  std::string room;
  if (!poolHasRoom(world, pod, room)) {
    return "allowed: " + room;
  }
  ++world.stats.i7Checks;
  if (const std::string why = capacityNotJudged(world); !why.empty()) {
    ++world.stats.i7Inconclusive;
    return "I7 not judged (" + room + "): " + why;
  }
  const std::string passes = passEveryNode(world);
  const Invocation retry = world.cni("ADD", pod);
  checkProcess(world, retry);
  if (retry.ok()) {
    return "I7: " + room + "; after " + passes + " the retry: " + adoptAddResult(world, pod, retry);
  }
  if (retry.code == 11 && retry.msg.find("timeout") != std::string::npos) {
    ++world.stats.i7Inconclusive;  // a loaded host, not stranded capacity: I7 allows the backend's timeout
    return "I7 not judged (" + room + "): the retry timed out: " + retry.brief();
  }
  world.violate("I7", inv.what + " failed (" + inv.brief() + ") while " + room + "; after " + passes +
                          " the retried ADD failed again: " + retry.brief());
  return "I7 violated";
}

}  // namespace ibcni::chaos
