// SPDX-License-Identifier: Apache-2.0
#include <fcntl.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <ctime>
#include <optional>

#include "ipam/embedded_ipam.h"

#include "ipam/policy/allocator.h"
#include "ipam/store/file_store.h"
#include "ipam/store/record_codec.h"
#include "ipam/backends/kubeconfig.h"
#include "ibcni/os/file_io.h"
#include "ibcni/os/safe_path.h"
#include "ibcni/os/time_text.h"
#include "ibcni/os/unique_fd.h"
#include "lib/json/json_fields.h"
#include "lib/log/log.h"

namespace ibcni::ipam {

namespace {

// One invocation's configuration, store and policy. Not movable: the allocator refers to the
// configuration (the request's) and the store.
struct Session {
  const IpamConfig& config;
  std::string dir;
  std::unique_ptr<FileStore> store;
  std::unique_ptr<Allocator> allocator;
  std::unique_ptr<ClusterPool> pool;  ///< cluster mode only
};

ReleasedAllocation toReleased(const Allocation& a) {
  ReleasedAllocation r{a.key.containerId, a.key.ifName, a.pod.empty() ? "" : a.pod.toString(), a.netns, {}};
  for (const auto& ip : a.addresses) {
    r.addresses.push_back(ip.toString());
  }
  return r;
}

}  // namespace

EmbeddedIpam::EmbeddedIpam(EmbeddedIpamOptions options) : options_(std::move(options)) {
  if (!options_.netnsChecker) {
    options_.netnsChecker = os::systemNetnsChecker();
  }
  if (!options_.clock) {
    options_.clock = [] { return std::chrono::system_clock::now(); };
  }
  if (options_.defaultDataDir.empty()) {
    options_.defaultDataDir = std::string(config::kDefaultIpamDataDir);
  }
}

namespace {

// The store lives in <dataDir>/<name>. The configuration may come from someone with less power
// than root, so the directory is reached and created (0700) under the rules of os/safe_path.h:
// only root's symbolic links are followed, and every directory on the way is root's and writable
// by no one else. A refusal is error 7; a failing system call is `ioCode`.
cni::Result<void> prepareStoreDir(const std::string& dir, cni::Errc ioCode) {
  auto fd = os::openDirectory(dir, os::DirPolicy{.trustedOwners = true, .create = true, .mode = 0700});
  if (!fd) {
    if (os::isRefusal(fd.error())) {
      return cni::fail(cni::Errc::kInvalidConfig, "invalid ipam.dataDir: " + fd.error().op +
                                                      "; use a directory only root can change, such as the default " +
                                                      std::string(config::kDefaultIpamDataDir) +
                                                      " (README \"Security model\")");
    }
    // `dir` passed the spelling rules (printable, bounded) and the network name is an identifier.
    return cni::fail(ioCode, "ipam data directory " + dir + " cannot be opened or created", fd.error().describe());
  }
  return {};
}

cni::Result<std::unique_ptr<Session>> openSession(const Request& request, const EmbeddedIpamOptions& options,
                                                  cni::Errc ioCode = cni::Errc::kIoFailure, bool create = true) {
  const auto& parsed = request.conf.embeddedIpam;
  if (!parsed) {
    // config/ reads the ipam object for ipam.type "ibcni-ipam" and for ibcni-ipam's own role.
    return cni::fail(cni::Errc::kInvalidConfig, "ipam.type = " + cni::quoted(request.conf.ipamType) +
                                                    " is not served by the embedded IPAM: use \"ibcni-ipam\"");
  }
  if (!*parsed) {
    return std::unexpected(parsed->error());
  }
  auto s = std::make_unique<Session>(Session{**parsed, {}, {}, {}, {}});
  for (const auto& w : s->config.warnings) {
    log::warn("{}", w);
  }
  std::string dataDir = s->config.dataDir.empty() ? options.defaultDataDir : s->config.dataDir;
  std::string node;
  if (s->config.cluster) {
    if (!options.backends) {
      return cni::fail(cni::Errc::kInvalidEnvironment,
                       "ipam.cluster is not supported by this program: use ibcni or ibcni-ipam");
    }
    auto name = clusterNodeName(*s->config.cluster, options.nodeNameFile);
    if (!name) {
      return std::unexpected(name.error());
    }
    node = std::move(*name);
    s->dir = clusterPoolDir(dataDir, s->config.cluster->pool);
  } else {
    s->dir = dataDir + "/" + request.conf.name;
  }
  if (!create) {
    // Only reading: the directory is used when it is there (and passes the same rules).
    std::error_code ec;
    if (std::filesystem::is_directory(s->dir, ec)) {
      auto fd = os::openDirectory(s->dir, os::DirPolicy{.trustedOwners = true, .create = false});
      if (!fd) {
        return cni::fail(os::isRefusal(fd.error()) ? cni::Errc::kInvalidConfig : ioCode,
                         "ipam data directory " + s->dir + " cannot be opened", fd.error().describe());
      }
    }
  } else if (auto r = prepareStoreDir(s->dir, ioCode); !r) {
    return std::unexpected(r.error());
  }
  s->store = std::make_unique<FileStore>(FileStore::Options{s->dir, Allocator::spansOf(s->config), options.lockTimeout});
  s->allocator = std::make_unique<Allocator>(s->config, *s->store, *options.netnsChecker, options.clock);
  if (s->config.cluster) {
    // The pool is cut from the allocator's view of what can be handed out; then the allocator
    // hands out only inside the pool's blocks.
    s->pool = std::make_unique<ClusterPool>(s->config, request.conf.name, node, s->dir, *s->allocator,
                                            options.backends, options.bootClock, options.clock);
    s->allocator->useBlocks(*s->pool);
  }
  return s;
}

// The addresses an attachment asks for: one source, the most specific one (runtimeConfig > args >
// CNI_ARGS), each without its prefix length (the range an address falls in decides it).
void requestedAddresses(const Request& request, AddRequest& req) {
  const auto& conf = request.conf;
  const std::vector<net::IpPrefix>* from = &request.cniArgs.ips;
  req.requestedFrom = "CNI_ARGS IP";
  if (!conf.runtime.ips.empty()) {
    from = &conf.runtime.ips;
    req.requestedFrom = "runtimeConfig.ips";
  } else if (!conf.argsIps.empty()) {
    from = &conf.argsIps;
    req.requestedFrom = "args.cni.ips";
  }
  for (const auto& p : *from) {
    req.requested.push_back(p.address);
  }
}

// Keeps the pool's configuration in its directory (kNetworkFileName) when it differs from what is
// there: written aside and renamed over, so a reader sees one whole file. A failure is only
// logged: the allocation stands, and the file is what a node agent reclaims with, not what ADD
// needs.
void keepNetworkFile(const std::string& dir, const std::string& text) {
  const std::string path = dir + "/" + kNetworkFileName;
  if (text.empty()) {
    return;
  }
  if (auto now = os::readFile(path, std::size_t{1} << 20); now && *now == text) {
    return;
  }
  if (auto w = os::writeFileAtomic(path, text); !w) {
    log::warn("cannot write {}: {}", path, w.error().describe());
  }
}

// The DNS of an ADD's result, as host-local gives it: ipam.resolvConf read now (at ADD only: a
// resolv.conf that went away never fails DEL, CHECK or GC), each field ipam.dns sets replacing
// the file's. A regular file only: a FIFO would block ADD, and a device node may act when opened.
cni::Result<cni::Dns> resultDns(const IpamConfig& conf) {
  if (conf.resolvConf.empty()) {
    return conf.dns;
  }
  auto text = os::readRegularFile(conf.resolvConf, std::size_t{1} << 20);
  if (!text) {
    return config::fields::invalid("ipam.resolvConf", conf.resolvConf,
                                   "cannot be read (" + text.error().describe() +
                                       "); give the path of a readable resolv.conf file");
  }
  cni::Dns dns = config::parseResolvConf(*text);
  if (!conf.dns.nameservers.empty()) {
    dns.nameservers = conf.dns.nameservers;
  }
  if (conf.dnsDomainSet) {
    dns.domain = conf.dns.domain;
  }
  if (!conf.dns.search.empty()) {
    dns.search = conf.dns.search;
  }
  if (!conf.dns.options.empty()) {
    dns.options = conf.dns.options;
  }
  return dns;
}

}  // namespace

cni::Result<cni::AddResult> EmbeddedIpam::add(const Request& request) {
  auto s = openSession(request, options_);
  if (!s) {
    return std::unexpected(s.error());
  }
  const IpamConfig& conf = (*s)->config;
  auto dns = resultDns(conf);
  if (!dns) {
    return std::unexpected(dns.error());
  }
  AddRequest req;
  req.key = {request.args.containerId, request.args.ifName};
  req.pod = {request.cniArgs.podNamespace, request.cniArgs.podName, request.cniArgs.podUid};
  req.netns = request.args.netns;
  req.netnsInode = options_.netnsChecker->identify(request.args.netns);
  req.network = request.conf.name;
  requestedAddresses(request, req);
  auto leases = (*s)->allocator->allocate(req);
  if (!leases) {
    return std::unexpected(leases.error());
  }
  keepNetworkFile((*s)->dir, conf.networkFile);
  // What host-local returns: each address with its subnet's prefix length and its range's
  // gateway, then the configured routes and DNS.
  cni::AddResult result;
  for (const auto& l : *leases) {
    cni::IpConfig ip;
    ip.address = net::IpPrefix{l.address, l.range.subnet.prefixLen};
    ip.gateway = l.range.gateway;
    result.ips.push_back(ip);
  }
  result.routes = conf.routes;
  result.dns = std::move(*dns);
  return result;
}

cni::Result<void> EmbeddedIpam::del(const Request& request) {
  auto s = openSession(request, options_);
  if (!s) {
    return std::unexpected(s.error());
  }
  const AttachmentKey key{request.args.containerId, request.args.ifName};
  auto released = (*s)->allocator->release(key, request.conf.name, false);
  if (!released) {
    return std::unexpected(released.error());
  }
  if (*released) {
    return {};
  }
  // I6: DEL releases what was recorded whatever the configuration says now: an attachment made
  // under another pool name (or before the network joined a cluster pool) is found where it is.
  const std::string dataDir = (*s)->config.dataDir.empty() ? options_.defaultDataDir : (*s)->config.dataDir;
  if (auto other = releaseElsewhere(request, dataDir, key, (*s)->dir); !other || *other) {
    return other ? cni::Result<void>() : std::unexpected(other.error());
  }
  log::debug("nothing held by {}/{}: nothing to release", request.args.containerId, request.args.ifName);
  return {};
}

cni::Result<bool> EmbeddedIpam::releaseElsewhere(const Request& request, const std::string& dataDir,
                                                  const AttachmentKey& key, const std::string& skip) {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(clusterPoolDir(dataDir, ""), ec)) {
    dirs.push_back(entry.path().string());
  }
  for (const auto& entry : std::filesystem::directory_iterator(dataDir, ec)) {
    if (entry.path().filename().string().front() != '.') {
      dirs.push_back(entry.path().string());
    }
  }
  for (const auto& dir : dirs) {
    if (dir == skip || !std::filesystem::exists(dir + "/attachments/" + codec::recordName(key), ec)) {
      continue;
    }
    auto text = os::readFile(dir + "/" + kNetworkFileName, std::size_t{1} << 20);
    auto conf = text ? config::parseIpamNetworkFile(*text) : cni::Result<config::NetConf>(std::unexpected(
                                                                 cni::Error{cni::Errc::kIoFailure, "unreadable", {}}));
    if (!conf || !conf->embeddedIpam || !*conf->embeddedIpam) {
      log::warn("{} holds a record of {} but no readable {}: left to `ibcni-ipam gc`", dir, key.toString(),
                kNetworkFileName);
      continue;
    }
    (**conf->embeddedIpam).dataDir = dataDir;
    const cni::CmdArgs args;
    const cni::CniArgs cniArgs;
    auto s = openSession(Request{*conf, args, cniArgs, {}}, options_);
    if (!s || (*s)->dir != dir) {
      continue;
    }
    auto released = (*s)->allocator->release(key, request.conf.name, true);
    if (!released) {
      return std::unexpected(released.error());
    }
    if (*released) {
      log::info("released {} from {}, where it was recorded (the configuration now names another pool)",
                key.toString(), dir);
      return true;
    }
  }
  return false;
}

cni::Result<void> EmbeddedIpam::check(const Request& request) {
  auto s = openSession(request, options_);
  if (!s) {
    return std::unexpected(s.error());
  }
  const IpamConfig& conf = (*s)->config;
  std::string who = "containerID " + request.args.containerId + " ifname " + request.args.ifName;
  auto held = (*s)->allocator->held({request.args.containerId, request.args.ifName});
  if (!held) {
    return std::unexpected(held.error());
  }
  if (held->empty()) {
    return cni::fail(cni::Errc::kCheckFailed,
                     "ipam: no addresses are held for " + who + " in network " + request.conf.name);
  }
  std::vector<bool> covered(conf.rangeSets.size(), false);
  const auto* prevIps = request.conf.prevResult ? &request.conf.prevResult->ips : nullptr;
  for (const auto& l : *held) {
    covered[l.rangeSet] = true;
    if (prevIps && !prevIps->empty()) {
      bool listed = std::any_of(prevIps->begin(), prevIps->end(),
                                [&](const cni::IpConfig& p) { return p.address.address == l.address; });
      if (!listed) {
        return cni::fail(cni::Errc::kCheckFailed,
                         "ipam: " + who + " holds " + l.address.toString() + ", which prevResult.ips does not list");
      }
    }
  }
  for (std::size_t i = 0; i < covered.size(); ++i) {
    if (!covered[i]) {
      return cni::fail(cni::Errc::kCheckFailed, "ipam: " + who + " holds no address in " + conf.rangeSets[i].path +
                                                    " = " + conf.rangeSets[i].describe());
    }
  }
  return {};
}

cni::Result<void> EmbeddedIpam::gc(const Request& request) {
  auto s = openSession(request, options_);
  if (!s) {
    return std::unexpected(s.error());
  }
  // No list means no valid attachment (the spec's reading; `cnitool gc` sends none and means "all"):
  // every allocation of this network is released, as ibcni releases every device of it.
  const std::vector<AttachmentKey> none;
  const auto& valid = request.conf.validAttachments;
  if (!valid) {
    log::warn("gc: no cni.dev/valid-attachments in the configuration: every allocation of the network is stale");
  }
  auto released = (*s)->allocator->gc(valid ? *valid : none, request.conf.name);
  if (!released) {
    return std::unexpected(released.error());
  }
  return {};
}

cni::Result<void> EmbeddedIpam::status(const Request& request) {
  auto s = openSession(request, options_, cni::Errc::kPluginNotAvailable);
  if (!s) {
    return std::unexpected(s.error());
  }
  auto unavailable = [](const std::string& msg, const std::string& details = {}) {
    return cni::fail(cni::Errc::kPluginNotAvailable, msg, details);
  };
  const std::string& dir = (*s)->dir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return unavailable("ipam data directory " + dir + " cannot be created: " + ec.message());
  }
  std::string probe = dir + "/.status-probe." + std::to_string(::getpid());
  auto fd = os::UniqueFd::open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
  if (!fd) {
    return unavailable("ipam data directory " + dir + " is not writable", fd.error().describe());
  }
  ::unlink(probe.c_str());
  if ((*s)->pool) {
    // Cluster mode: full blocks are no reason to refuse ADD (it claims another one), and STATUS
    // does not call the backend; ADD answers 108 when the pool itself is full.
    return {};
  }
  auto full = (*s)->allocator->exhausted();
  if (!full) {
    return unavailable("ipam store " + dir + " cannot be read: " + full.error().msg, full.error().details);
  }
  if (full->empty()) {
    return {};
  }
  // A full pool whose holders include dead pods is not exhausted: ADD reclaims those first.
  auto dead = (*s)->allocator->reclaim(/*dryRun=*/true);
  if (dead && !dead->empty()) {
    return {};
  }
  auto usage = (*s)->allocator->usage();
  if (!usage) {
    return unavailable("ipam store " + dir + " cannot be read: " + usage.error().msg, usage.error().details);
  }
  const SetUsage& u = (*usage)[full->front()];
  return unavailable("ipam: " + u.path + " is exhausted: " + toDecimal(u.allocatable) +
                     " addresses can be handed out and " + std::to_string(u.inUse) + " are in use");
}

cni::Result<std::vector<ReleasedAllocation>> EmbeddedIpam::reclaim(const Request& request, bool dryRun) {
  auto r = reclaimPool(request, dryRun);
  if (!r) {
    return std::unexpected(r.error());
  }
  return std::move(r->released);
}

cni::Result<ReclaimOutcome> EmbeddedIpam::reclaimPool(const Request& request, bool dryRun) {
  auto s = openSession(request, options_);
  if (!s) {
    return std::unexpected(s.error());
  }
  auto released = (*s)->allocator->reclaim(dryRun);
  if (!released) {
    return std::unexpected(released.error());
  }
  ReclaimOutcome out;
  for (const auto& a : *released) {
    out.released.push_back(toReleased(a));
  }
  if ((*s)->pool) {
    // Cluster mode: the periodic pass also keeps this node's blocks (renewal, lost answers,
    // empty blocks given back), under the store's lock.
    auto lock = StoreLock::acquire(*(*s)->store);
    if (!lock) {
      return std::unexpected(storeError(lock.error(), "cannot lock the ipam store"));
    }
    auto held = (*s)->store->list();
    if (!held) {
      return std::unexpected(storeError(held.error(), "cannot list allocations"));
    }
    if (auto b = (*s)->pool->begin(); !b) {
      return std::unexpected(b.error());
    }
    auto kept = (*s)->pool->maintain(*held, *(*s)->allocator, dryRun);
    if (!kept) {
      return std::unexpected(kept.error());
    }
    out.upkeep = PoolUpkeep{(*s)->config.cluster->pool, (*s)->pool->node(), kept->renewed, kept->livenessRenewed,
                            kept->released, kept->lost, kept->adopted, kept->addressesReleased, kept->reclaimed,
                            kept->takenOver, kept->lent, kept->loansReturned};
  }
  return out;
}

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

}  // namespace

namespace {

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

}  // namespace

cni::Result<PoolReport> EmbeddedIpam::pools(const Request& request) {
  const auto& parsed = request.conf.embeddedIpam;
  if (parsed && *parsed && !(**parsed).cluster) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     "network " + cni::quoted(request.conf.name) +
                         " has no ipam.cluster: its pool is node-local (every node allocates from the whole range on "
                         "its own), so there are no blocks to list");
  }
  auto s = openSession(request, options_, cni::Errc::kIoFailure, /*create=*/false);
  if (!s) {
    return std::unexpected(s.error());
  }
  const IpamConfig& conf = (*s)->config;
  const config::ClusterConf& cluster = *conf.cluster;
  const ClusterPool& pool = *(*s)->pool;
  const BlockGrid& grid = pool.grid();
  PoolReport r;
  r.network = request.conf.name;
  r.pool = cluster.pool;
  r.backend = std::string(config::clusterBackendName(cluster.backend));
  r.endpoint = endpointOf(cluster);
  r.node = pool.node();
  if (auto id = clusterNodeIdentity(cluster, options_.nodeNameFile); id) {
    r.nodeSource = id->source;
  }
  r.blockSize = grid.blockSize();
  r.storeDir = (*s)->dir;
  r.fingerprint = grid.fingerprint();
  U128 total = 0;
  for (std::size_t i = 0; i < conf.rangeSets.size(); ++i) {
    r.rangeSets.push_back(conf.rangeSets[i].path + " = " + conf.rangeSets[i].describe());
    const U128 n = grid.count(i);
    r.setBlocks.push_back(toDecimal(n));
    total = total + n < total ? ~U128{0} : total + n;
  }
  r.totalBlocks = toDecimal(total);

  // This node's side: its ledger and its allocations (read under the store's lock).
  Ledger ledger;
  std::map<std::string, std::uint64_t> inUse;  // block key -> addresses held on this node
  std::error_code ec;
  if (std::filesystem::is_directory((*s)->dir, ec)) {
    auto lock = StoreLock::acquire(*(*s)->store);
    if (!lock) {
      return std::unexpected(storeError(lock.error(), "cannot lock the ipam store"));
    }
    auto read = readLedger((*s)->dir);
    if (!read) {
      r.warnings.push_back("the block ledger cannot be read: " + read.error().describe());
    } else if (*read) {
      ledger = std::move(**read);
      r.ledgerPresent = true;
    }
    auto held = (*s)->store->list();
    if (!held) {
      r.warnings.push_back("the allocations cannot be listed: " + held.error().describe());
    } else {
      for (const auto& a : *held) {
        for (const auto& ip : a.addresses) {
          if (auto blk = grid.blockOf(ip); blk) {
            ++inUse[blk->key];
          }
        }
      }
    }
  }
  if (r.ledgerPresent && ledger.node != r.node) {
    r.warnings.push_back("the ledger's blocks were claimed as node " + cni::quoted(ledger.node) + ", not " +
                         cni::quoted(r.node) + ": ADD refuses this until ipam.cluster.nodeName is set back");
  }

  // The backend's side: one list of the blocks, one of the named addresses.
  auto be = options_.backends(cluster, BackendContext{r.node, ledger.etcdLease, {}});
  if (!be) {
    return std::unexpected(be.error());
  }
  const std::string what = " of pool " + cni::quoted(cluster.pool) + " (ipam.cluster.backend " + r.backend + ")";
  const auto t0 = std::chrono::steady_clock::now();
  auto claims = (*be)->list(ClaimKind::kBlock, cluster.pool, std::nullopt);
  r.listTime = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  if (!claims) {
    return std::unexpected(toCniError(claims.error(), "listing the blocks" + what));
  }
  auto named = (*be)->list(ClaimKind::kAddress, cluster.pool, std::nullopt);
  if (!named) {
    return std::unexpected(toCniError(named.error(), "listing the named addresses" + what));
  }

  std::map<std::string, const LedgerEntry*> inLedger;
  for (const auto& e : ledger.blocks) {
    inLedger[e.name] = &e;
  }
  auto rowOf = [&](const std::string& key) {
    PoolBlockRow row;
    row.key = key;
    row.size = grid.blockSize();
    if (auto blk = grid.byKey(key); blk) {
      row.cidr = blk->describe();
      row.set = blk->set;
    }
    if (auto it = inLedger.find(key); it != inLedger.end()) {
      row.ledgerState = ledgerStateName(it->second->state);
      if (auto empty = os::elapsed(it->second->emptySince, os::bootNow()); empty) {
        row.emptyForSeconds = std::chrono::duration_cast<std::chrono::seconds>(*empty).count();
      }
    }
    return row;
  };
  std::set<std::string> listed;
  for (const auto& c : *claims) {
    PoolBlockRow row = rowOf(c.name);
    row.holder = c.holder.node;
    row.mine = c.holder.node == r.node;
    row.claimedAt = c.holder.claimedAt;
    row.renewedAt = c.holder.renewedAt;
    if (row.mine || !row.ledgerState.empty()) {
      row.inUse = inUse[c.name];
    }
    listed.insert(c.name);
    if (row.set) {
      ++r.claimedBlocks;
    }
    ++r.perNode[c.holder.node];
    if (auto d = disagreement(c.name, row.ledgerState, c.holder.node, r.node)) {
      r.disagreements.push_back(*d);
    }
    r.blocks.push_back(std::move(row));
  }
  for (const auto& e : ledger.blocks) {
    if (listed.contains(e.name)) {
      continue;
    }
    PoolBlockRow row = rowOf(e.name);
    row.inUse = inUse[e.name];
    if (auto t = os::parseRfc3339(e.claimedAt); t) {
      row.claimedAt = *t;
    }
    if (auto d = disagreement(e.name, row.ledgerState, "", r.node)) {
      r.disagreements.push_back(*d);
    }
    r.blocks.push_back(std::move(row));
  }
  std::set<std::string> namedListed;
  for (const auto& c : *named) {
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
  r.confirmedAgoSeconds = [&]() -> std::optional<std::int64_t> {
    auto ago = os::elapsed(ledger.confirmed, os::bootNow());
    if (!ago) {
      return std::nullopt;
    }
    return std::chrono::duration_cast<std::chrono::seconds>(*ago).count();
  }();
  const U128 claimed = r.claimedBlocks;
  r.freeBlocks = toDecimal(total > claimed ? total - claimed : 0);
  for (const auto& c : *named) {
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
  const auto& parsed = request.conf.embeddedIpam;
  if (parsed && *parsed && !(**parsed).cluster) {
    return cni::fail(cni::Errc::kInvalidConfig, "network " + cni::quoted(request.conf.name) +
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
  const auto& parsed = request.conf.embeddedIpam;
  if (!parsed || !*parsed || !(**parsed).cluster) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     "network " + cni::quoted(request.conf.name) + " has no ipam.cluster: no node holds anything of it");
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
