// SPDX-License-Identifier: Apache-2.0
// The invariants, checked after every step (invariants.cpp) and at the end of every schedule
// (end_checks.cpp). Each violation names its kind:
//
//   I1       an address held by two live pods (cluster-wide, whatever their networks); a VF GUID held
//            by two live pods
//   ADDR     an ADD result outside its network's ranges, on a network/broadcast/gateway/excluded
//            address, a reserved address given to another pod, a reserved pod not given its
//            address, a requested address (IP=) not honoured; a GUID outside its guidPool.range, the
//            all-zero or all-ones GUID, a requested GUID (GUID=) not honoured
//   I6       DEL or CNI GC did not exit 0 (not killed by the shim); an agent pass failed with
//            anything but "backend unavailable" (11) while the backend was not disturbed
//   I7       an ADD failed with 108/11 while its pool had addresses no live pod holds, and failed
//            again after one agent pass on every node
//   I4       at the end: address objects left, blocks of gone nodes, more blocks per live node
//            than minBlocksPerNode per range set (the baseline: 1, its documented keep-one rule);
//            for a GUID pool: GUID claims or a node's GUID allocations left, blocks of gone nodes
//   LEDGER   at the end: `ibcni-ipam pools --json` lists ledger.disagreements on a live node
//   RESERVED at the end: a reserved pod on another node did not get its reserved address
//   CRASH    a process died of a signal the shim did not send, or answered error code 999
//   HANG     a process did not finish within 30 s
//   ERR      an ADD failed with an error the schedule gives no reason for
#pragma once

#include <random>
#include <string>

#include "world.h"

namespace ibcni::chaos {

/// Every violation kind, for --expect and the summary.
[[nodiscard]] const std::vector<std::string>& violationKinds();

/// CRASH / HANG: any ibcni-ipam process.
void checkProcess(World& world, const Invocation& inv);
/// I1 over every pod holding addresses or a GUID now.
void checkNoAddressTwice(World& world);
/// ADDR: a successful ADD of `pod` under `def`.
void checkAddResult(World& world, const Pod& pod, const NetworkDef& def);
/// ADDR: a successful ADD of `pod` under the GUID network `def`.
void checkGuidResult(World& world, const Pod& pod, const NetworkDef& def);
/// I6: DEL and CNI GC exit 0 unless the shim killed them.
void checkMustSucceed(World& world, const Invocation& inv);
/// I6 for an agent pass that failed (not killed); `disturbed`: the backend was, at its start.
void checkPassFailure(World& world, const Invocation& inv, bool disturbed);
/// An ADD of `pod` that failed (not killed): allowed or not; I7's retry for 108/11. Returns the
/// outcome's note ("108 allowed: pool full", "ok after one pass on every node", ...).
std::string judgeAddFailure(World& world, Pod& pod, const Invocation& inv, bool disturbed);

/// At the end of a schedule: heal, DEL everything, let time pass, check I4, the ledgers and the
/// reserved addresses. Returns a summary for the schedule's last line.
std::string endChecks(World& world, std::mt19937_64& rng);

}  // namespace ibcni::chaos
