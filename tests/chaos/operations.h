// SPDX-License-Identifier: Apache-2.0
// The steps a schedule is made of, run against a World: the runtime's CNI operations (add, del,
// check, cnigc), the node agent's periodic pass and time passing (operations.cpp), and the faults
// (faults.cpp): kill -9 points, reboots, dying pods, etcd members stopped and quorum lost, the
// API fault proxy's injected answers, Nodes deleted and recreated, configuration changes.
//
// Every step is robust to a schedule that lost steps (shrinking removes them): a step whose
// preconditions do not hold (its pod was never added, its node is gone) is skipped and says why.
//
//   add node=N net=n1 pod=pK [name=sts-0] [ip=A] [kill=before|after:K]
//   del pod=pK [kill=...]        check pod=pK          cnigc node=N net=n1 [kill=...]
//   pass node=N [net=n1 kill=...]                       time secs=S
//   agent-stop node=N            agent-start node=N    reboot node=N          pod-die pod=pK
//   etcd-stop member=M           etcd-start member=M   quorum-loss            quorum-restore
//   emu-fault kind=500|drop|drop-after|delay [method=POST|PUT|DELETE|GET] [ms=N]
//   node-delete node=N           node-recreate node=N
//   config change=widen-n1|resv-n2|n3-overlap          revert net=n1
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "schedule.h"
#include "world.h"

namespace ibcni::chaos {

/// Every op a step may name.
[[nodiscard]] const std::vector<std::string>& stepOps();

/// Runs `step` (sets step.outcome; a violation is recorded in world.violation).
void runStep(World& world, Step& step);

/// The node agent's pass on `node`: `ibcni-ipam gc CONFIG_FILE` for each network (and for each
/// pool it may hold state of that no network names any more, as `ibcni reconcile` visits them).
/// `kill` applies to the network `killNet` only. Returns a short summary.
std::string agentPass(World& world, int node, std::optional<KillPoint> kill = std::nullopt,
                      const std::string& killNet = {});
/// A pass on every live node whose agent runs (and that ran anything in this schedule).
std::string passEveryNode(World& world);
/// Time passes: the virtual clock advances by `seconds`; the etcd leases of nodes that did
/// nothing for longer than the lease (agent stopped, decommissioned) lapse; every running agent
/// makes its pass.
std::string passTime(World& world, int seconds);
/// A successful ADD of `pod`: it holds the result's addresses (checked: ADDR). Returns "ok A".
std::string adoptAddResult(World& world, Pod& pod, const Invocation& inv);
/// Whether the backend is disturbed now (quorum lost, an API fault still armed).
[[nodiscard]] bool backendDisturbed(World& world);

// --- faults.cpp ---
std::string opReboot(World& world, const Step& step);
std::string opPodDie(World& world, const Step& step);
std::string opAgentStop(World& world, const Step& step);
std::string opAgentStart(World& world, const Step& step);
std::string opEtcdStop(World& world, const Step& step);
std::string opEtcdStart(World& world, const Step& step);
std::string opQuorumLoss(World& world, const Step& step);
std::string opQuorumRestore(World& world, const Step& step);
std::string opEmuFault(World& world, const Step& step);
std::string opNodeDelete(World& world, const Step& step);
std::string opNodeRecreate(World& world, const Step& step);
/// etcd, new code: `ibcni-ipam forget-node CONFIG_FILE NODE` for every pool, run from the first
/// live node (the operator's statement that a decommissioned node is gone). "" otherwise.
std::string forgetNode(World& world, int node);
std::string opConfig(World& world, const Step& step);
std::string opRevert(World& world, const Step& step);

/// "skipped: <why>": a step whose preconditions do not hold.
[[nodiscard]] inline std::string skipped(const std::string& why) { return "skipped: " + why; }

}  // namespace ibcni::chaos
