// SPDX-License-Identifier: Apache-2.0
// The fault tier's world, on top of the conformance harness (conformance/harness.h): a throwaway
// host netns with veth ends standing in for VFs, pods, ibcni's stateDir and an IPAM store (the
// in-process ibcni-ipam or Debian's host-local), the plugins run by exec as a runtime runs them,
// and the node snapshot (node_snapshot.h) to compare before and after.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "conformance/harness.h"
#include "faults/node_snapshot.h"

namespace ibcni::faults {

using conformance::CniEnv;
using conformance::Exec;
using conformance::World;
using nlohmann::json;
using testing::TestNetns;

/// The built ibcni-faulty (compile definition; IBCNI_TEST_FAULTY_BINARY overrides).
[[nodiscard]] const std::string& faultyBinary();

enum class IpamKind {
  kIbcniIpam,  ///< "type": "ibcni-ipam", run in process by ibcni (dual stack: two addresses, two routes)
  kHostLocal,  ///< "type": "host-local", Debian's, exec'd from /usr/lib/cni (IPv4)
};
[[nodiscard]] const char* toString(IpamKind kind);

/// One test's node: a World plus what the fault tests need on it.
class FaultBench {
 public:
  /// Prepares `world` (which must be usable): IPv6 link-local addresses off in the host so that
  /// an interface coming up adds nothing by itself (the snapshots compare exactly).
  FaultBench(World& world, IpamKind kind);

  [[nodiscard]] World& world() { return world_; }
  [[nodiscard]] IpamKind kind() const { return kind_; }

  /// A pod namespace (owned by the world), loopback up, IPv6 link-local off.
  TestNetns& pod(const std::string& label = "pod");
  /// A pod namespace owned by the caller (to delete it mid-test); in the snapshot until forget().
  [[nodiscard]] std::unique_ptr<TestNetns> ownPod(const std::string& label = "pod");
  /// Leaves `pod` out of the snapshot from now on.
  void forget(const TestNetns& pod);
  /// A veth end standing in for a VF: up, MTU 1500, alias "admin note" (so that DEL must restore
  /// the state, the alias, the MTU and the MAC ADD changes).
  std::string vf();

  /// The ipam object of this bench's IPAM kind.
  [[nodiscard]] json ipam() const;
  /// ibcni's config for `vf`: sriov, mtu 4000, a MAC from runtimeConfig, this bench's IPAM (at most
  /// version 1.0.0 with host-local, which supports no later one).
  [[nodiscard]] json conf(const std::string& vf, const std::string& version = "1.1.0") const;
  /// The IPAM store directory of the network (<dataDir>/<network>).
  [[nodiscard]] fs::path storeDir() const;

  /// The host, every pod, the stateDir and the IPAM store.
  [[nodiscard]] std::string snapshot() const;
  /// Temporary link names (ibc*) in the host and every pod, as "netns:name".
  [[nodiscard]] std::vector<std::string> temporaryLinkNames() const;
  /// ibcni-ipam's own consistency check of the store (empty for host-local: it has none; its
  /// claims are in the snapshot).
  [[nodiscard]] std::vector<std::string> storeProblems() const;

  /// Runs `binary` for `command` as a runtime does, with `extraEnv` added (NAME=value), and checks
  /// the CNI protocol of what it printed (conformance::expectProtocol).
  Exec run(const std::string& binary, const std::string& command, const std::string& cid, const TestNetns& pod,
           const json& conf, const std::vector<std::string>& extraEnv = {}, const std::string& ifName = "net1",
           std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  /// run() without the protocol check, for a run that is meant to die.
  Exec runUnchecked(const std::string& binary, const std::string& command, const std::string& cid, const TestNetns& pod,
                    const json& conf, const std::vector<std::string>& extraEnv = {}, const std::string& ifName = "net1",
                    std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;

 private:
  World& world_;
  IpamKind kind_;
  std::vector<TestNetns*> pods_;
};

/// The lines of a file (a fault trace), without the trailing newline.
[[nodiscard]] std::vector<std::string> readLines(const fs::path& p);
/// The call of a trace line ("renameLink"), for comparing traces whose arguments differ.
[[nodiscard]] std::string traceOp(const std::string& line);

}  // namespace ibcni::faults
