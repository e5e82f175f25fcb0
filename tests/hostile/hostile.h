// SPDX-License-Identifier: Apache-2.0
// The hostile-input tier: the BUILT ibcni and ibcni-ipam, driven by the conformance harness
// (tests/conformance/harness.h: a throwaway "host" netns, veth ends as VFs, pods), fed values a
// runtime bug, a careless administrator or a less privileged NetworkAttachmentDefinition author
// could hand them. Every refusal must be exactly one CNI error with the right code, a message that
// names the field or variable, shows the value escaped and bounded, and says what to do; and it
// must change nothing (NodeState).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "conformance/harness.h"

namespace ibcni::hostile {

using conformance::CniEnv;
using conformance::Exec;
using conformance::World;
using nlohmann::json;
using testing::TestNetns;
namespace fs = std::filesystem;

/// The longest msg a refusal may print: every value in it is quoted (cut after 64 or 256 bytes).
inline constexpr std::size_t kMaxMsgBytes = 1500;

/// What a refused request must leave exactly as it was: links, addresses and routes of the host
/// and of each pod (as `ip -o` prints them), every file and directory under the world's temporary
/// directory (type, mode, owner; for files also size, modification time and links) and each
/// `watched` path itself.
struct NodeState {
  std::string host;
  std::vector<std::string> pods;
  std::vector<std::string> files;
  bool operator==(const NodeState&) const = default;
};
std::ostream& operator<<(std::ostream& os, const NodeState& s);

[[nodiscard]] NodeState capture(const World& w, const std::vector<const TestNetns*>& pods,
                                const std::vector<fs::path>& watched = {});

/// Expects `run` to be exactly one CNI error with `code` (exit status 1, not killed), a msg of at
/// most kMaxMsgBytes without control characters, naming each of `words`.
void expectRefused(const Exec& run, unsigned code, const std::vector<std::string>& words);

/// A world with a pod and a veth "VF" in the host, ready for ADD.
struct Scene {
  World w;
  TestNetns* pod = nullptr;
  std::string vf;
};

/// Creates the pod and the VF, then runs one ADD and DEL through ibcni (embedded IPAM) and through
/// ibcni-ipam, so that the state and data directories and the VF's lock file exist and a later
/// refusal can be compared with the tree as it stands. Records a failure when that does not work.
void prime(Scene& s);

/// Builds the scene; skips (no root) or fails like CONFORMANCE_WORLD.
#define HOSTILE_SCENE(s)                                   \
  ::ibcni::hostile::Scene s;                               \
  if (!(s).w.skipReason().empty()) {                       \
    GTEST_SKIP() << (s).w.skipReason();                    \
  }                                                        \
  ASSERT_TRUE((s).w.failure().empty()) << (s).w.failure(); \
  ASSERT_NO_FATAL_FAILURE(::ibcni::hostile::prime(s))

}  // namespace ibcni::hostile
