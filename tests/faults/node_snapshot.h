// SPDX-License-Identifier: Apache-2.0
// The fault tier's view of "the node": everything an ADD or DEL may change, dumped as sorted text
// lines so that two moments compare with == and a difference prints as a short diff.
//
//   [<netns label>] link <name> index=<i> kind=<k> mtu=<m> mac=<mac> up|down alias="<alias>"
//   [<netns label>] addr <dev> <address>/<len> scope=<s>
//   [<netns label>] route <dst> table=<t> type=<t> dev=<d> via=<gw> proto=<p> scope=<s> metric=<m>
//   state <path>                      directories and files under ibcni's stateDir (records with
//                                     their content); a lock file only while it is held
//                                     ("lock <path> HELD"): lock files stay by design
//   ipam <path>                       ibcni-ipam's store (claims with their holder; record and
//                                     index files by name: an index holds the round-robin cursor,
//                                     which a released allocation legitimately moves; the lock
//                                     only while held)
//   host-local <path>                 host-local's store (claims with their holder; the cursor file
//                                     by name)
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "ibcni/os/netns.h"

namespace ibcni::faults {

namespace fs = std::filesystem;

class NodeSnapshot {
 public:
  /// A network namespace to dump, under `label` ("host", "pod").
  NodeSnapshot& netns(std::string label, const os::Netns& ns);
  /// ibcni's stateDir.
  NodeSnapshot& stateDir(fs::path dir);
  /// An IPAM store directory: <dataDir>/<network>. `kind` is "ipam" (ibcni-ipam) or "host-local".
  NodeSnapshot& ipamStore(std::string kind, fs::path dir);

  /// The node now, one line per item, sorted.
  [[nodiscard]] std::string take() const;

 private:
  std::vector<std::pair<std::string, const os::Netns*>> netns_;
  std::vector<fs::path> stateDirs_;
  std::vector<std::pair<std::string, fs::path>> stores_;
};

/// The lines only in `before` ("- ...") and only in `after` ("+ ..."); empty when equal.
[[nodiscard]] std::string lineDiff(const std::string& before, const std::string& after);

/// Links of `ns` whose name is one of ibcni's temporary names (ibc + 8 hex digits).
[[nodiscard]] std::vector<std::string> temporaryLinks(const os::Netns& ns);

/// Sets /proc/sys/<key> (e.g. "net/ipv6/conf/default/addr_gen_mode") inside `ns`.
/// @return false when it cannot be written.
bool setSysctl(const os::Netns& ns, const std::string& key, const std::string& value);

/// Problems ibcni-ipam's own consistency check (FileStore::verify) finds in the store of `network`
/// under `dataDir` for the ipam object `ipamJson`; "verify: ..." when it cannot run.
[[nodiscard]] std::vector<std::string> verifyIbcniIpamStore(const std::string& ipamJson, const fs::path& dataDir,
                                                            const std::string& network);

}  // namespace ibcni::faults
