// SPDX-License-Identifier: Apache-2.0
// The simulated cluster of one run of one schedule: its nodes (each a data dir and a node name),
// its pods (each a sandbox process with a network namespace of its own), the networks as
// configured now, the virtual clock, and the way every ibcni-ipam process is exec'd: as a
// container runtime execs a CNI IPAM plugin (exactly the CNI environment, the network
// configuration on stdin), under libfaketime (the virtual clock) and the kill shim (kill -9 at
// the k-th mutating call).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend.h"
#include "network.h"
#include "pod_process.h"
#include "schedule.h"

namespace ibcni::chaos {

/// Where the run's helpers are (found once by main).
struct Tools {
  std::string plugin;     ///< the ibcni-ipam under test
  std::string guidDriver; ///< ibcni-guidpool-preloadable (GUID networks); empty: none drawn
  std::string faketime;   ///< libfaketime.so.1
  std::string killShim;   ///< kill_shim.so
  std::string root;       ///< a private temporary directory for the data dirs
  std::string runId;      ///< a few characters unique to this run (etcd prefixes, pool names)
};

/// kill -9 at the k-th mutating call of the process, before or after it.
struct KillPoint {
  int at = 0;
  bool after = false;
  [[nodiscard]] std::string text() const { return (after ? "after:" : "before:") + std::to_string(at); }
  [[nodiscard]] static std::optional<KillPoint> parse(const std::string& text);
};

/// One ibcni-ipam process and what came of it.
struct Invocation {
  std::string what;    ///< "ADD p3 (n1) on node 2"
  int status = -1;     ///< exit status; 128 + signal when killed
  std::string out;
  std::string err;
  int code = 0;        ///< the CNI error code of a JSON error object on stdout, else 0
  std::string msg;     ///< its "msg"
  bool killedByShim = false;
  bool timedOut = false;
  double ms = 0;

  [[nodiscard]] bool ok() const { return status == 0; }
  /// "ok", "killed", "exit 1 (error 7: ...)".
  [[nodiscard]] std::string brief() const;
};

enum class PodPhase {
  kLive,      ///< ADD succeeded: holds its addresses
  kUnknown,   ///< ADD failed or was killed: the runtime owes it a DEL
  kDeleting,  ///< a DEL was started (killed or failed): the runtime retries it
  kDeleted,   ///< DEL succeeded
  kForgotten  ///< its node was decommissioned: nobody DELs it
};

struct Pod {
  std::string id;       ///< "p12"
  int node = 0;
  std::string net;      ///< "n1"
  std::string k8sName;  ///< K8S_POD_NAME: the id, or "sts-0"/"sts-1" for a reserved pod
  std::string requested;  ///< CNI_ARGS IP=, or ""
  std::unique_ptr<PodProcess> sandbox;
  PodPhase phase = PodPhase::kUnknown;
  std::vector<std::string> addresses;  ///< its ADD's ips[].address, without the prefix length
  std::string guid;                    ///< a GUID network's: its ADD's "guid"
  int step = 0;                        ///< the step of its ADD

  [[nodiscard]] bool alive() const { return sandbox && sandbox->alive(); }
  /// Holds its addresses (or GUID) as a running pod: ADD succeeded, no DEL started, sandbox alive.
  [[nodiscard]] bool holding() const { return phase == PodPhase::kLive && alive(); }
  /// The runtime still knows it (it is owed or may be owed a DEL).
  [[nodiscard]] bool known() const { return phase != PodPhase::kDeleted && phase != PodPhase::kForgotten; }
};

struct NodeState {
  int index = 0;
  std::string name;      ///< ipam.cluster.nodeName (two nodes share it with --plant same-node-name)
  std::string dataDir;
  std::string indexDir;  ///< the GUID driver's pool index: survives a reboot, not a re-created node
  bool agentRunning = true;
  bool decommissioned = false;
  bool wiped = false;          ///< its data dir was wiped (reboot, node-recreate) in this schedule
  bool recreated = false;      ///< re-created (node-recreate): a new machine, without the pool index
  bool touched = false;        ///< ran any ibcni-ipam process in this schedule
  double lastTouch = -1e9;     ///< virtual time at the end of its last process
  double revokedAt = -1e9;     ///< lastTouch when its etcd leases were last revoked
  double deletedAt = -1e9;     ///< virtual time of its Node's deletion
};

struct Violation {
  std::string kind;     ///< "I1", "ADDR", "I4", "I6", "I7", "LEDGER", "RESERVED", "CRASH", "ERR", "HANG"
  std::string message;
  int step = 0;         ///< 1-based; 0: the end-of-schedule checks
};

/// Counts over a whole run (summed over schedules).
struct Stats {
  std::map<std::string, long> ops;       ///< per step kind
  std::map<std::string, long> outcomes;  ///< "add ok", "add exit 108", "del killed", ...
  long invocations = 0;
  long i7Checks = 0;
  long i7Inconclusive = 0;
  void merge(const Stats& other);
};

class World {
 public:
  World(const ScheduleParams& params, Backend& backend, const Tools& tools, const std::string& tag, Stats& stats);
  World(const World&) = delete;
  World& operator=(const World&) = delete;
  ~World();

  // --- Names (every run of a schedule gets a tag of its own) ---
  [[nodiscard]] const ScheduleParams& params() const noexcept { return params_; }
  [[nodiscard]] Backend& backend() noexcept { return backend_; }
  [[nodiscard]] const Backend& backend() const noexcept { return backend_; }
  [[nodiscard]] const std::string& tag() const noexcept { return tag_; }
  [[nodiscard]] std::string networkName(const std::string& net) const { return tag_ + "-" + net; }
  [[nodiscard]] std::string poolName(const NetworkDef& def) const;
  [[nodiscard]] std::string containerId(const Pod& pod) const { return tag_ + "-" + pod.id; }
  [[nodiscard]] std::string etcdPrefix() const;

  // --- State ---
  std::vector<NodeState> nodes;
  std::map<std::string, Pod> pods;  ///< by id
  std::map<std::string, NetworkDef> nets;  ///< symbolic name -> as configured now
  /// Every pool a node may have state of: symbolic pool -> the last definition that used it.
  std::map<std::string, NetworkDef> pools;
  std::optional<Violation> violation;
  int step = 0;  ///< the step being run (1-based)
  bool apiFaultMaybeArmed = false;  ///< an emu-fault step ran and its fault may not be spent yet
  Stats& stats;

  [[nodiscard]] bool live(int node) const;
  [[nodiscard]] std::vector<int> liveNodes() const;
  /// Whether some network was, at some step so far, not as the schedule started with it (what a
  /// change left in the backend, such as a pool's recorded definition, outlives its revert).
  [[nodiscard]] bool configChanged() const;
  void setNetwork(const NetworkDef& def);
  /// The first violation is kept; the runner stops the schedule after the step.
  void violate(const std::string& kind, const std::string& message);

  // --- The virtual clock (libfaketime's FAKETIME="+offset" for every process) ---
  [[nodiscard]] double now() const;
  void advance(int seconds) { offset_ += seconds; }
  [[nodiscard]] long offset() const noexcept { return offset_; }

  // --- Processes ---
  /// The network configuration `node` gives ibcni-ipam for `def` (cniVersion as given).
  [[nodiscard]] std::string config(int node, const NetworkDef& def, const std::string& cniVersion = "1.0.0") const;
  /// The same in a file (for `ibcni-ipam gc/pools/forget-node CONFIG_FILE`).
  [[nodiscard]] std::string configFile(int node, const NetworkDef& def) const;
  /// ADD, DEL or CHECK of `pod` (as its network is configured now).
  Invocation cni(const std::string& verb, Pod& pod, std::optional<KillPoint> kill = std::nullopt);
  /// CNI GC of `net` on `node`: cni.dev/valid-attachments = the pods the runtime knows there.
  Invocation cniGc(int node, const std::string& net, std::optional<KillPoint> kill = std::nullopt);
  /// `ibcni-ipam ARGS... CONFIG_FILE-of(node, def) [EXTRA...]` (gc, pools, forget-node); for a
  /// GUID network the GUID driver's (pools).
  Invocation tool(int node, const std::string& command, const NetworkDef& def,
                  const std::vector<std::string>& extra = {}, std::optional<KillPoint> kill = std::nullopt);
  /// The node agent's pass over the GUID pool of `def` on `node`: `ibcni-guidpool-preloadable pass
  /// <dataDir>/.guid/<pool>` (sriov mode's reconcile: allocations without a record are released).
  Invocation guidPass(int node, const NetworkDef& def, std::optional<KillPoint> kill = std::nullopt);

 private:
  [[nodiscard]] std::vector<std::string> baseEnv(std::optional<KillPoint> kill) const;
  Invocation run(int node, const std::string& what, const std::vector<std::string>& argv,
                 std::vector<std::string> env, const std::string& input, std::optional<KillPoint> kill);
  [[nodiscard]] std::string clusterKeys(int node, const NetworkDef& def) const;
  [[nodiscard]] nlohmann::json clusterObject(int node) const;
  [[nodiscard]] const std::string& program(const NetworkDef& def) const;

  ScheduleParams params_;
  Backend& backend_;
  const Tools& tools_;
  std::string tag_;
  std::string dir_;
  long offset_ = 0;
  bool configEverChanged_ = false;
  std::chrono::steady_clock::time_point started_;
};

/// "00", "01", ...: a node's index as its name shows it.
[[nodiscard]] std::string twoDigits(int n);

}  // namespace ibcni::chaos
