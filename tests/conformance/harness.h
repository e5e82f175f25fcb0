// SPDX-License-Identifier: Apache-2.0
// The conformance suite's harness: the BUILT ibcni and ibcni-ipam run by direct exec, as the
// checklist's `cni()` helper runs them (a fresh environment, the configuration on stdin, stdout,
// stderr and the exit status captured), inside a throwaway "host" network namespace with veth ends
// standing in for VFs and fresh namespaces for pods.
//
// Every run is checked against the protocol before the test looks at it: exit status 0 or 1, on
// success one JSON object for ADD and VERSION and nothing for the other verbs, on failure one error
// object; ADD results are validated field by field against their version's schema
// (result_schema.h), error objects and VERSION answers too.
#pragma once

#include "support/exec_program.h"

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "conformance/result_schema.h"
#include "support/ip_links.h"
#include "support/test_netns.h"

namespace ibcni::conformance {

using nlohmann::json;
namespace fs = std::filesystem;
using testing::TestNetns;

/// The built plugins (compile definitions; IBCNI_TEST_BINARY / IBCNI_TEST_IPAM_BINARY override).
[[nodiscard]] const std::string& ibcniBinary();
[[nodiscard]] const std::string& ipamBinary();

/// The spec versions ibcni and ibcni-ipam support, oldest first.
inline const std::vector<std::string> kVersions = {"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"};

using testing::kPathEnv;

/// What a finished child left behind (support/exec_program.h), with its CNI answer read.
struct Exec : testing::ProgramRun {
  /// stdout as one JSON document (an empty object when it is not exactly one).
  [[nodiscard]] nlohmann::json parsed() const;
  /// The error code on stdout (0 when there is none).
  [[nodiscard]] unsigned code() const;
  /// The error message on stdout ("" when there is none).
  [[nodiscard]] std::string msg() const;
};

/// Runs `path` with exactly `env` as its environment. `input` goes to a stdin pipe; std::nullopt
/// runs the child with stdin closed (`<&-`). The child inherits the calling thread's network
/// namespace. Killed after `timeout`.
[[nodiscard]] Exec execProgram(const std::string& path, const std::vector<std::string>& env,
                               const std::optional<std::string>& input,
                               std::chrono::milliseconds timeout = std::chrono::seconds(30));

using testing::CniEnv;

using testing::oneJsonDocument;

/// The protocol every run must follow (see the file comment); records GoogleTest failures.
/// For ADD, `ctx` relates the result to the request (its version, CNI_IFNAME, CNI_NETNS).
void expectProtocol(const Exec& run, const std::string& verb, const std::optional<ResultContext>& ctx);

/// Expects `run` to have failed with `code` and its msg to contain each of `words`.
void expectError(const Exec& run, unsigned code, const std::vector<std::string>& words = {});

// Links and addresses as `ip -j` reports them (support/ip_links.h).
using testing::addresses;
using testing::LinkState;
using testing::linkNames;
using testing::linkState;

/// Runs `ip` in `ns`; fails the test (and returns "") when it fails.
std::string ip(const os::Netns& ns, const std::vector<std::string>& args);

using testing::readFile;
void writeFile(const fs::path& p, const std::string& text);
/// Writes an executable shell script.
void writeScript(const fs::path& p, const std::string& text);

/// A recorder plugin ("REC" in the checklist) in a directory of its own: a shell script that logs,
/// per call, its CNI_* (and CONFORMANCE_*) environment, its stdin, its network namespace and the
/// verb, writes a line to stderr, and answers: `fail-<VERB>` in its directory is printed with exit
/// status 1; otherwise ADD prints `result-ADD` (when present) and every verb exits 0.
class Recorder {
 public:
  /// One call, in call order.
  struct Call {
    std::string verb;
    std::string stdinText;
    std::map<std::string, std::string> env;  ///< CNI_* and CONFORMANCE_* variables
    std::string netns;                       ///< readlink /proc/self/ns/net of the call
  };

  /// Creates `dir`/`name` (dir is created) logging into `dir`/`name`.log/.
  Recorder(const fs::path& dir, const std::string& name);

  [[nodiscard]] const fs::path& dir() const { return dir_; }
  void setResult(const json& result) const;
  void failVerb(const std::string& verb, const json& error) const;
  void clearFailure(const std::string& verb) const;
  [[nodiscard]] std::vector<Call> calls() const;
  [[nodiscard]] std::vector<std::string> verbs() const;

 private:
  fs::path dir_;
  fs::path log_;
};

/// One test's world: a fresh "host" network namespace that the calling thread enters (so every
/// plugin it runs starts there and the machine's own namespace is never touched), pods, veth pairs
/// standing in for VFs, and a temporary directory for ibcni's stateDir and ibcni-ipam's dataDir.
/// Everything is removed by the destructor, also when an assertion fails.
class World {
 public:
  /// Builds the world; when that is not possible, skipReason() (no privileges) or failure() says why.
  World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;
  ~World();

  [[nodiscard]] const std::string& skipReason() const { return skip_; }
  [[nodiscard]] const std::string& failure() const { return failure_; }

  [[nodiscard]] const os::Netns& host() const { return host_->netns(); }
  [[nodiscard]] const std::string& hostPath() const { return host_->path(); }
  [[nodiscard]] const fs::path& tmp() const { return tmp_; }
  [[nodiscard]] const fs::path& stateDir() const { return stateDir_; }
  [[nodiscard]] const fs::path& dataDir() const { return dataDir_; }
  [[nodiscard]] const std::string& network() const { return network_; }

  /// A fresh pod namespace owned by the world.
  TestNetns& pod(const std::string& label = "pod");
  /// A fresh pod namespace owned by the caller (to delete it mid-test).
  [[nodiscard]] std::unique_ptr<TestNetns> ownPod(const std::string& label = "doomed");

  /// A veth pair in the host; returns the end that stands in for the VF.
  std::string vf(unsigned mtu = 1500, bool up = false);
  /// What most checklist tests start from: a fresh pod, a VF (vf(mtu, up)) and the VF's link
  /// state before the test, to compare with after it.
  struct PodAndVf {
    TestNetns& pod;
    std::string vf;
    std::optional<LinkState> before;
  };
  PodAndVf podAndVf(unsigned mtu = 1500, bool up = false);
  [[nodiscard]] std::string peerOf(const std::string& vf) const { return peers_.at(vf); }

  /// The embedded IPAM object {"type": "ibcni-ipam", ranges, routes, dataDir}.
  [[nodiscard]] json ipam(const std::string& subnet = "10.77.0.0/24") const;
  /// ibcni's configuration for `vf` (logLevel debug, stateDir in tmp), with `ipam` when given.
  [[nodiscard]] json conf(const std::string& version, const std::string& vf,
                          const std::optional<json>& ipam = std::nullopt) const;
  /// A request for the standalone ibcni-ipam (network ipamNetwork()): what macvlan would pass it.
  [[nodiscard]] json ipamConf(const std::string& version, const std::string& subnet = "10.78.0.0/24") const;

  /// The environment of a request for `pod` (CNI_PATH: Debian's plugins).
  [[nodiscard]] static CniEnv env(const std::string& command, const std::string& cid, const TestNetns& pod,
                                  const std::string& ifName = "net1");
  /// The environment of an ibcni-ipam request (the netns path is only recorded by an IPAM).
  [[nodiscard]] static CniEnv ipamEnv(const std::string& command, const std::string& cid, const std::string& netns,
                                      const std::string& ifName = "net1");

  /// Runs the built ibcni / ibcni-ipam and checks the protocol of what it printed.
  /// The Raw variants take stdin as text (std::nullopt: stdin closed).
  Exec ibcniRaw(const CniEnv& env, const std::optional<std::string>& input) const;
  Exec ibcni(const CniEnv& env, const json& input) const { return ibcniRaw(env, input.dump()); }
  Exec ipamRaw(const CniEnv& env, const std::optional<std::string>& input) const;
  Exec ipamPlugin(const CniEnv& env, const json& input) const { return ipamRaw(env, input.dump()); }

  /// ibcni's attachment records of `network` (default: this world's).
  [[nodiscard]] std::vector<fs::path> records(const std::string& network = "") const;
  /// ibcni-ipam's allocations of `network` (default: this world's, ibcni's embedded IPAM):
  /// containerID:ifname.
  [[nodiscard]] std::vector<std::string> allocations(const std::string& network = "") const;
  /// The network of ipamConf() requests (the standalone ibcni-ipam's own), and its allocations.
  [[nodiscard]] std::string ipamNetwork() const { return network_ + "-ipam"; }
  [[nodiscard]] std::vector<std::string> ipamAllocations() const { return allocations(ipamNetwork()); }
  /// Neither ibcni's embedded IPAM nor the standalone ibcni-ipam holds an address.
  [[nodiscard]] bool noAllocations() const { return allocations().empty() && ipamAllocations().empty(); }
  /// The pod holds nothing of ours: only lo.
  void expectPodEmpty(const TestNetns& pod) const;
  /// Nothing of a test is left: the pod holds only lo and no IPAM holds an address.
  void expectNothingLeft(const TestNetns& pod) const;
  /// Nothing of a test is left and `vf` is back in the host as it was (`before`).
  void expectNothingLeft(const TestNetns& pod, const std::string& vf, const std::optional<LinkState>& before) const;

 private:
  std::string skip_;
  std::string failure_;
  // Destroyed in reverse order: the temporary files go first, then the thread returns to its own
  // namespace, then the pods and the host namespace (with its veths) are released.
  std::optional<TestNetns> host_;
  std::vector<std::unique_ptr<TestNetns>> pods_;
  std::optional<testing::ScopedHostNetns> scope_;
  fs::path tmp_;
  fs::path stateDir_;
  fs::path dataDir_;
  std::string network_;
  std::map<std::string, std::string> peers_;
};

/// Runs the jobs at once, each on its own thread that first enters `host` (a plugin started from a
/// thread inherits that thread's network namespace).
[[nodiscard]] std::vector<Exec> runParallel(const os::Netns& host, const std::vector<std::function<Exec()>>& jobs);

/// `conf` with `prevResult` set.
[[nodiscard]] inline json withPrev(json conf, const json& prev) {
  conf["prevResult"] = prev;
  return conf;
}

/// GC's or STATUS's environment as libcni >= 1.2 sets it: the attachment variables set and empty.
[[nodiscard]] inline CniEnv networkEnv(const std::string& command, const std::string& path = "/usr/lib/cni") {
  CniEnv e;
  e.command = command;
  e.containerId = "";
  e.netns = "";
  e.ifName = "";
  e.args = "";
  e.path = path;
  return e;
}

/// The "address" of each ips[] entry of a result.
[[nodiscard]] inline std::vector<std::string> resultAddresses(const json& result) {
  std::vector<std::string> out;
  for (const auto& ip : result.value("ips", json::array())) {
    out.push_back(ip.value("address", ""));
  }
  return out;
}

/// Declares `w`, a World; skips the test with the reason when the machine cannot give one (no
/// root), fails it when building one failed otherwise.
#define CONFORMANCE_WORLD(w)          \
  ::ibcni::conformance::World w;      \
  if (!(w).skipReason().empty()) {    \
    GTEST_SKIP() << (w).skipReason(); \
  }                                   \
  ASSERT_TRUE((w).failure().empty()) << (w).failure()

}  // namespace ibcni::conformance
