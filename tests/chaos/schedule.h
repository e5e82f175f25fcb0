// SPDX-License-Identifier: Apache-2.0
// A chaos schedule: its parameters (backend, nodes, lease, ...) and its numbered steps, each an
// operation or a fault with key=value arguments and, once run, its outcome. The text form is what
// --out writes and --replay reads:
//
//   # ibcni_chaos schedule
//   backend etcd
//   compat new
//   seed 17
//   nodes 6
//   ...
//   steps
//   1 add node=3 net=n1 pod=p1            # ok 10.77.0.17
//   2 agent-stop node=3                   # ok
//   3 time secs=25                        # ok: 5 passes, revoked node-03
//
// Steps name nodes by index, networks by their symbolic name (n1, n2, n3) and pods by p<N>; the
// names the processes see (node names, pool names, container IDs) get a prefix fresh for every
// run of the schedule, so that a replay never meets what an earlier run left in the backend.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ibcni::chaos {

struct Step {
  std::string op;
  std::vector<std::pair<std::string, std::string>> args;
  std::string outcome;  ///< filled in when run ("ok 10.77.0.17", "exit 108", "killed", "skipped: ...")

  [[nodiscard]] bool has(const std::string& key) const;
  /// The value of `key`, or "" when absent.
  [[nodiscard]] std::string arg(const std::string& key) const;
  [[nodiscard]] int intArg(const std::string& key, int otherwise = -1) const;
  Step& set(const std::string& key, const std::string& value);
  Step& set(const std::string& key, int value) { return set(key, std::to_string(value)); }
  /// "add node=3 net=n1 pod=p1" (without the outcome).
  [[nodiscard]] std::string text() const;
  /// Parses text() (anything after a '#' is ignored).
  [[nodiscard]] static std::optional<Step> parse(const std::string& line);
};

/// What a schedule runs against and with, fixed before its first step.
struct ScheduleParams {
  std::string backend = "etcd";  ///< "etcd" | "kubernetes"
  bool baseline = false;         ///< --compat baseline: no keys the baseline does not know
  std::string plant;             ///< "" | "same-node-name" | "skip-guid-record"
  std::string profile = "all";
  std::uint64_t seed = 0;
  int nodes = 4;
  int networks = 3;              ///< 2: n1, n2 (one shared pool); 3: and n3 (a pool of its own)
  bool guids = false;            ///< and the GUID networks g1, g2 (one shared guidPool)
  int leaseSeconds = 15;         ///< ipam.cluster.leaseDurationSeconds
  int releaseAfterSeconds = 0;   ///< ipam.cluster.releaseAfterSeconds
  int minBlocksPerNode = 0;      ///< ipam.cluster.minBlocksPerNode (new code only)
  int timeoutMs = 2000;          ///< ipam.cluster.timeoutMs
};

struct Schedule {
  ScheduleParams params;
  std::vector<Step> steps;

  /// The schedule file: parameters, then one numbered step a line (with outcomes when asked).
  [[nodiscard]] std::string text(bool withOutcomes) const;
  [[nodiscard]] static std::expected<Schedule, std::string> parse(const std::string& text);
};

/// One line "  12 add node=3 net=n1 pod=p1   # ok 10.77.0.17".
[[nodiscard]] std::string stepLine(std::size_t number, const Step& step, bool withOutcome);

}  // namespace ibcni::chaos
