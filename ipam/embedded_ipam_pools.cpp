// SPDX-License-Identifier: Apache-2.0
// The embedded IPAM's cluster pool commands: `ibcni-ipam pools` (the report), --redefine, --retire
// and forget-node.
#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ibcni/os/time_text.h"
#include "ipam/backends/kubeconfig.h"
#include "ipam/embedded_ipam.h"
#include "ipam/embedded_ipam_session.h"
#include "lib/log/log.h"

namespace ibcni::ipam {

namespace {

// Where the backend is reached, for messages: the etcd endpoints, or the kubeconfig's server.
std::string endpointOf(const config::ClusterConf& c) {
  if (c.backend == config::ClusterBackend::kEtcd) {
    std::string out;
    for (const auto& e : c.etcd.endpoints) {
      out += (out.empty() ? "" : ",") + e;
    }
    return out;
  }
  auto kc = loadKubeconfig(c.kubernetes.kubeconfig, c.kubernetes.context);
  return kc ? kc->server : "kubeconfig " + c.kubernetes.kubeconfig;
}

// Where this node's ledger (`ledgerState`, "" when absent) and the backend (`holder`, "" when
// absent) disagree about one claim. A claim this node is giving back, or knows it lost, agrees.
std::optional<PoolDisagreement> disagreement(const std::string& name, const std::string& ledgerState,
                                             const std::string& holder, const std::string& node) {
  const bool mineThere = holder == node;
  const bool holdsHere = ledgerState == "owned" || ledgerState == "releasing";
  const bool agree = mineThere ? holdsHere : (ledgerState.empty() || ledgerState == "lost" ||
                                              (holder.empty() && ledgerState == "releasing"));
  if (agree) {
    return std::nullopt;
  }
  return PoolDisagreement{name, ledgerState.empty() ? "absent" : ledgerState,
                          holder.empty() ? "absent" : (mineThere ? "this node" : "node " + holder)};
}

// The report's head: the pool, where its backend is, this node, and the blocks of each range set.
// @return how many blocks the pool has (at most the largest U128).
U128 describePool(PoolReport& r, const std::string& network, const Session& s, const std::string& nodeNameFile) {
  const IpamConfig& conf = s.config;
  const config::ClusterConf& cluster = *conf.cluster;
  const BlockGrid& grid = s.pool->grid();
  r.guids = spaceOf(conf).kind == SpaceKind::kGuid;
  r.network = network;
  r.pool = cluster.pool;
  r.backend = std::string(config::clusterBackendName(cluster.backend));
  r.endpoint = endpointOf(cluster);
  r.node = s.pool->node();
  if (auto id = clusterNodeIdentity(cluster, nodeNameFile); id) {
    r.nodeSource = id->source;
  }
  r.blockSize = grid.blockSize();
  r.storeDir = s.dir;
  r.fingerprint = grid.fingerprint();
  U128 total = 0;
  for (std::size_t i = 0; i < conf.rangeSets.size(); ++i) {
    r.rangeSets.push_back(conf.rangeSets[i].path + " = " + conf.rangeSets[i].describe());
    const U128 n = grid.count(i);
    r.setBlocks.push_back(toDecimal(n));
    total = total + n < total ? ~U128{0} : total + n;
  }
  r.totalBlocks = toDecimal(total);
  return total;
}

// This node's side of the pool: its ledger and its allocations.
struct NodeSide {
  Ledger ledger;
  std::map<std::string, std::uint64_t> inUse;  // block key -> addresses held on this node
};

// Reads this node's side under the store's lock, when the store is there. What cannot be read is
// a warning of the report, not an error.
cni::Result<NodeSide> readNodeSide(Session& s, PoolReport& r) {
  NodeSide side;
  std::error_code ec;
  if (std::filesystem::is_directory(s.dir, ec)) {
    auto lock = StoreLock::acquire(*s.store);
    if (!lock) {
      return std::unexpected(storeError(lock.error(), "cannot lock the ipam store"));
    }
    auto read = readLedger(s.dir);
    if (!read) {
      r.warnings.push_back("the block ledger cannot be read: " + read.error().describe());
    } else if (*read) {
      side.ledger = std::move(**read);
      r.ledgerPresent = true;
    }
    auto held = s.store->list();
    if (!held) {
      r.warnings.push_back("the allocations cannot be listed: " + held.error().describe());
    } else {
      for (const auto& a : *held) {
        for (const auto& ip : a.addresses) {
          if (auto blk = s.pool->grid().blockOf(ip); blk) {
            ++side.inUse[blk->key];
          }
        }
      }
    }
  }
  if (r.ledgerPresent && side.ledger.node != r.node) {
    r.warnings.push_back("the ledger's blocks were claimed as node " + cni::quoted(side.ledger.node) + ", not " +
                         cni::quoted(r.node) + ": ADD refuses this until " + s.config.cluster->path +
                         ".nodeName is set back");
  }
  return side;
}

// The backend's side of the pool.
struct BackendSide {
  std::vector<Claim> blocks;
  std::vector<Claim> addresses;  ///< the named addresses
};

// The backend's side: one list of the blocks (timed), one of the named addresses.
cni::Result<BackendSide> listBackend(const BackendFactory& backends, const IpamConfig& config, const Ledger& ledger,
                                     PoolReport& r) {
  const config::ClusterConf& cluster = *config.cluster;
  auto be = backends(cluster, BackendContext{r.node, ledger.etcdLease, {}});
  if (!be) {
    return std::unexpected(be.error());
  }
  const std::string what =
      " of pool " + cni::quoted(cluster.pool) + " (" + cluster.path + ".backend " + r.backend + ")";
  const std::string pool = spaceOf(config).backendPool(cluster.pool);
  const auto t0 = std::chrono::steady_clock::now();
  auto claims = (*be)->list(ClaimKind::kBlock, pool, std::nullopt);
  r.listTime = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  if (!claims) {
    return std::unexpected(toCniError(claims.error(), "listing the blocks" + what));
  }
  auto named = (*be)->list(ClaimKind::kAddress, pool, std::nullopt);
  if (!named) {
    return std::unexpected(toCniError(named.error(), "listing the named " + std::string(spaceOf(config).nouns) + what));
  }
  return BackendSide{std::move(*claims), std::move(*named)};
}

// The block rows of the report: each claim the backend lists, then each block only this node's
// ledger names; with the disagreements found on the way.
class BlockRows {
 public:
  BlockRows(PoolReport& r, const BlockGrid& grid, NodeSide& node) : r_(r), grid_(grid), node_(node) {
    for (const auto& e : node_.ledger.blocks) {
      inLedger_[e.name] = &e;
    }
  }

  void addClaimed(const std::vector<Claim>& claims) {
    for (const auto& c : claims) {
      PoolBlockRow row = rowOf(c.name);
      row.holder = c.holder.node;
      row.mine = c.holder.node == r_.node;
      row.claimedAt = c.holder.claimedAt;
      row.renewedAt = c.holder.renewedAt;
      if (row.mine || !row.ledgerState.empty()) {
        row.inUse = node_.inUse[c.name];
      }
      listed_.insert(c.name);
      if (row.set) {
        ++r_.claimedBlocks;
      }
      ++r_.perNode[c.holder.node];
      if (auto d = disagreement(c.name, row.ledgerState, c.holder.node, r_.node)) {
        r_.disagreements.push_back(*d);
      }
      r_.blocks.push_back(std::move(row));
    }
  }

  // After addClaimed: the ledger's blocks the backend did not list.
  void addLedgerOnly() {
    for (const auto& e : node_.ledger.blocks) {
      if (listed_.contains(e.name)) {
        continue;
      }
      PoolBlockRow row = rowOf(e.name);
      row.inUse = node_.inUse[e.name];
      if (auto t = os::parseRfc3339(e.claimedAt); t) {
        row.claimedAt = *t;
      }
      if (auto d = disagreement(e.name, row.ledgerState, "", r_.node)) {
        r_.disagreements.push_back(*d);
      }
      r_.blocks.push_back(std::move(row));
    }
  }

 private:
  // A block's row as the grid and the ledger know it.
  PoolBlockRow rowOf(const std::string& key) const {
    PoolBlockRow row;
    row.key = key;
    row.size = grid_.blockSize();
    if (auto blk = grid_.byKey(key); blk) {
      row.cidr = blk->describe();
      row.set = blk->set;
    }
    if (auto it = inLedger_.find(key); it != inLedger_.end()) {
      row.ledgerState = ledgerStateName(it->second->state);
      if (auto empty = os::elapsed(it->second->emptySince, os::bootNow()); empty) {
        row.emptyForSeconds = std::chrono::duration_cast<std::chrono::seconds>(*empty).count();
      }
    }
    return row;
  }

  PoolReport& r_;
  const BlockGrid& grid_;
  NodeSide& node_;
  std::map<std::string, const LedgerEntry*> inLedger_;
  std::set<std::string> listed_;
};

// Where the ledger and the backend disagree about the named addresses: those the backend lists,
// then those only the ledger names.
void addAddressDisagreements(PoolReport& r, const Ledger& ledger, const std::vector<Claim>& named) {
  std::set<std::string> namedListed;
  for (const auto& c : named) {
    namedListed.insert(c.name);
    const auto e = std::find_if(ledger.addresses.begin(), ledger.addresses.end(),
                                [&](const auto& x) { return x.name == c.name; });
    const std::string state = e == ledger.addresses.end() ? "" : ledgerStateName(e->state);
    if (auto d = disagreement(c.name, state, c.holder.node, r.node)) {
      r.disagreements.push_back(*d);
    }
  }
  for (const auto& e : ledger.addresses) {
    if (auto d = namedListed.contains(e.name) ? std::nullopt : disagreement(e.name, ledgerStateName(e.state), "", r.node)) {
      r.disagreements.push_back(*d);
    }
  }
}

// How long ago the backend last confirmed the ledger's holds (nullopt: never on this boot).
std::optional<std::int64_t> confirmedAgoSeconds(const Ledger& ledger) {
  auto ago = os::elapsed(ledger.confirmed, os::bootNow());
  if (!ago) {
    return std::nullopt;
  }
  return std::chrono::duration_cast<std::chrono::seconds>(*ago).count();
}

}  // namespace

cni::Result<PoolReport> EmbeddedIpam::pools(const Request& request) {
  const auto* parsed = request.settings;
  if (parsed && *parsed && !(**parsed).cluster) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     "network " + cni::quoted(request.network) +
                         " has no ipam.cluster: its pool is node-local (every node allocates from the whole range on "
                         "its own), so there are no blocks to list");
  }
  auto s = openSession(request, options_, cni::Errc::kIoFailure, /*create=*/false);
  if (!s) {
    return std::unexpected(s.error());
  }
  return reportPool(**s, std::string(request.network), options_);
}

cni::Result<PoolReport> reportPool(Session& s, const std::string& network, const EmbeddedIpamOptions& options) {
  PoolReport r;
  const U128 total = describePool(r, network, s, options.nodeNameFile);
  auto node = readNodeSide(s, r);
  if (!node) {
    return std::unexpected(node.error());
  }
  auto backend = listBackend(options.backends, s.config, node->ledger, r);
  if (!backend) {
    return std::unexpected(backend.error());
  }
  BlockRows rows(r, s.pool->grid(), *node);
  rows.addClaimed(backend->blocks);
  rows.addLedgerOnly();
  addAddressDisagreements(r, node->ledger, backend->addresses);
  r.confirmedAgoSeconds = confirmedAgoSeconds(node->ledger);
  const U128 claimed = r.claimedBlocks;
  r.freeBlocks = toDecimal(total > claimed ? total - claimed : 0);
  for (const auto& c : backend->addresses) {
    r.addresses.push_back(PoolAddressRow{c.name, c.holder.node, c.holder.attrs.owner, c.holder.attrs.pod,
                                         c.holder.attrs.lender, c.holder.claimedAt});
  }
  return r;
}

namespace {

// `ibcni-ipam pools --redefine` / `--retire`: `change` on the network's cluster pool, under the
// store's lock.
template <typename T, typename Change>
cni::Result<T> changePool(const Request& request, const EmbeddedIpamOptions& options, const char* what,
                          Change change) {
  const auto* parsed = request.settings;
  if (parsed && *parsed && !(**parsed).cluster) {
    return cni::fail(cni::Errc::kInvalidConfig, "network " + cni::quoted(request.network) +
                                                    " has no ipam.cluster: there is no pool to " + what);
  }
  auto s = openSession(request, options);
  if (!s) {
    return std::unexpected(s.error());
  }
  auto lock = StoreLock::acquire(*(*s)->store);
  if (!lock) {
    return std::unexpected(storeError(lock.error(), "cannot lock the ipam store"));
  }
  if (auto b = (*s)->pool->begin(); !b) {
    return std::unexpected(b.error());
  }
  return change(*(*s)->pool);
}

}  // namespace

cni::Result<PoolDefinition> EmbeddedIpam::redefinePool(const Request& request) {
  return changePool<PoolDefinition>(request, options_, "redefine", [](ClusterPool& p) { return p.redefine(); });
}

cni::Result<void> EmbeddedIpam::retirePool(const Request& request) {
  return changePool<void>(request, options_, "retire", [](ClusterPool& p) { return p.retire(); });
}

cni::Result<void> EmbeddedIpam::forgetNode(const Request& request, const std::string& node) {
  const auto* parsed = request.settings;
  if (!parsed || !*parsed || !(**parsed).cluster) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     "network " + cni::quoted(request.network) + " has no ipam.cluster: no node holds anything of it");
  }
  if (!options_.backends) {
    return cni::fail(cni::Errc::kInvalidEnvironment, "ipam.cluster is not supported by this program");
  }
  const config::ClusterConf& cluster = *(**parsed).cluster;
  if (!config::isNodeName(node)) {
    return cni::fail(cni::Errc::kInvalidConfig, "node " + cni::quoted(node) + " is not a Kubernetes node name");
  }
  auto be = options_.backends(cluster, BackendContext{node, 0, {}});
  if (!be) {
    return std::unexpected(be.error());
  }
  if (auto f = (*be)->forgetNode(node); !f) {
    return std::unexpected(toCniError(f.error(), "forgetting node " + node));
  }
  log::info("node {} is forgotten: the other nodes' agents take over its claims", node);
  return {};
}

}  // namespace ibcni::ipam
