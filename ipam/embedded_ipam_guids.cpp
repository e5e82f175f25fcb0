// SPDX-License-Identifier: Apache-2.0
// sriov mode's GUID pools: each call opens the pool's session (embedded_ipam_session.h) in the GUID
// space. allocate and gc open the configured pool; release, held and maintain open the store
// directory the ADD recorded, with the pool its pool.json keeps.
#include "ipam/embedded_ipam_guids.h"

#include <cerrno>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "ibcni/os/file_io.h"
#include "ibcni/os/file_lock.h"
#include "ibcni/os/safe_path.h"
#include "ipam/config/guid_pool.h"
#include "ipam/embedded_ipam_session.h"
#include "ipam/policy/allocation_text.h"
#include "lib/log/log.h"

namespace ibcni::ipam {

namespace {

constexpr std::size_t kMaxPoolFile = std::size_t{1} << 20;

// One call's pool, the machinery's configuration of it and the session over that configuration.
struct GuidSession {
  config::GuidPoolConf pool;
  IpamConfig config;
  std::unique_ptr<Session> s;  ///< refers to `config`: declared after it
};

bool isDirectory(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::is_directory(dir, ec);
}

std::string dataDirOf(const config::GuidPoolConf& pool, const EmbeddedIpamOptions& options) {
  return pool.dataDir.empty() ? options.defaultDataDir : pool.dataDir;
}

std::string rangeText(const config::GuidPoolConf& pool) {
  return pool.first.toString() + "-" + pool.last.toString();
}

// The session of `pool` over the store in `dir`, for `network` (the network a cluster pool's
// ledger and definition name). `create` false: the directory is not created.
cni::Result<std::unique_ptr<GuidSession>> openGuidSession(config::GuidPoolConf pool, const std::string& network,
                                                          const std::string& dir, const EmbeddedIpamOptions& options,
                                                          bool create) {
  auto g = std::make_unique<GuidSession>();
  g->pool = std::move(pool);
  g->config = config::guidIpamConfig(g->pool);
  g->s = std::make_unique<Session>(Session{g->config, dir, {}, {}, {}});
  std::string node;
  if (g->config.cluster) {
    auto name = clusterNode(*g->s, dataDirOf(g->pool, options), options);
    if (!name) {
      return std::unexpected(name.error());
    }
    node = std::move(*name);
    g->s->dir = dir;  // the directory asked for wins over the configured one (a recorded store)
  }
  if (auto r = openStore(*g->s, network, node, options, cni::Errc::kIoFailure, create); !r) {
    return std::unexpected(r.error());
  }
  return g;
}

// The pool's name: the store directory's ("<dataDir>/.guid/<pool>").
std::string poolOfDir(const std::string& storeDir) {
  auto p = std::filesystem::path(storeDir).lexically_normal();
  return p.has_filename() ? p.filename().string() : p.parent_path().filename().string();
}

// The session of the store at `storeDir` with the pool its pool.json keeps; nullptr when there is
// no store there, or no pool file (then nothing was ever allocated there: ADD writes it first).
cni::Result<std::unique_ptr<GuidSession>> recordedSession(const std::string& storeDir, const std::string& network,
                                                          const EmbeddedIpamOptions& options) {
  if (!isDirectory(storeDir)) {
    return std::unique_ptr<GuidSession>();
  }
  const std::string path = storeDir + "/" + kGuidPoolFileName;
  auto text = os::readFile(path, kMaxPoolFile);
  if (!text && text.error().err == ENOENT) {
    log::warn("{} has no {}: no GUID was handed out there", storeDir, kGuidPoolFileName);
    return std::unique_ptr<GuidSession>();
  }
  if (!text) {
    return cni::fail(cni::Errc::kIoFailure, "cannot read " + path, text.error().describe());
  }
  const std::string pool = poolOfDir(storeDir);
  auto conf = config::guidPoolFile(*text, pool);
  if (!conf) {
    return cni::fail(cni::Errc::kIoFailure, path + " holds no usable guidPool: " + conf.error().msg,
                     "restore it from the network's configuration, or remove the directory once no VF uses its GUIDs");
  }
  return openGuidSession(std::move(*conf), network.empty() ? pool : network, storeDir, options, false);
}

// A node-local pool hands out its whole range on this node: no other pool of this node holding
// GUIDs may share any of it (their pool.json). @return error 7 naming the other pool and both ranges.
cni::Result<void> checkNoOverlap(const config::GuidPoolConf& pool, const std::string& dataDir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(clusterPoolDir(dataDir, "", SpaceKind::kGuid), ec)) {
    const std::string name = entry.path().filename().string();
    const std::string dir = entry.path().string();
    std::error_code empty;
    if (name == pool.pool || std::filesystem::is_empty(dir + "/attachments", empty) || empty) {
      continue;  // itself, or a pool that holds no GUID now
    }
    auto text = os::readFile(dir + "/" + kGuidPoolFileName, kMaxPoolFile);
    if (!text) {
      continue;
    }
    auto other = config::guidPoolFile(*text, name);
    if (!other) {
      continue;
    }
    if (other->first.value <= pool.last.value && pool.first.value <= other->last.value) {
      return cni::fail(cni::Errc::kInvalidConfig,
                       "invalid guidPool.range = " + rangeText(pool) + " of GUID pool " + cni::quoted(pool.pool) +
                           ": overlaps " + rangeText(*other) + " of GUID pool " + cni::quoted(other->pool) +
                           ", which holds GUIDs on this node (" + dir +
                           "); give the pools ranges that do not overlap, or the same guidPool.pool");
    }
  }
  return {};
}

// The lock of the node-local GUID pools of `dataDir` (<dataDir>/.guid/.lock; <dataDir>/.guid made
// under os/safe_path.h's rules when missing): held from the overlap check to the allocation.
// @return 11 when another ADD holds it past `timeout`, 5 when it cannot be taken.
cni::Result<os::FileLock> lockNodeLocalPools(const std::string& dataDir, std::chrono::milliseconds timeout) {
  std::string dir = clusterPoolDir(dataDir, "", SpaceKind::kGuid);
  dir.pop_back();  // "<dataDir>/.guid/"
  auto fd = os::openDirectory(dir, os::DirPolicy{.trustedOwners = true, .create = true, .mode = 0755});
  if (!fd) {
    return cni::fail(cni::Errc::kIoFailure, "cannot open " + dir, fd.error().describe());
  }
  auto lock = os::FileLock::acquireAt(fd->get(), ".lock", dir + "/.lock", timeout);
  if (!lock) {
    return cni::fail(lock.error().err == ETIMEDOUT ? cni::Errc::kTryAgainLater : cni::Errc::kIoFailure,
                     "cannot lock the node-local GUID pools (" + dir + "/.lock)", lock.error().describe());
  }
  return std::move(*lock);
}

// maintain's sweep: every allocation no ibcni record accounts for is released (dry run: listed),
// judged under the store's lock (an ADD writes its record before it allocates).
cni::Result<void> sweep(Session& s, bool dryRun,
                        const std::function<bool(const std::string&, const cni::AttachmentKey&)>& recorded,
                        ReclaimOutcome& out) {
  auto locked = lockAndList(*s.store);
  if (!locked) {
    return std::unexpected(locked.error());
  }
  for (const auto& a : locked->held) {
    if (!a.loanTo.empty() || recorded(a.network, a.key)) {
      continue;  // a loan is the pool's, not an attachment's
    }
    if (!dryRun) {
      log::info("releasing GUID {} of {}: network {} has no ibcni record of it", joinAddresses(a.addresses),
                a.key.toString(), a.network.empty() ? "(not recorded)" : a.network);
      if (auto r = s.store->release(a.key); !r) {
        return std::unexpected(storeError(r.error(), "cannot release " + a.key.toString()));
      }
    }
    out.released.push_back(toReleased(a));
  }
  if (dryRun) {
    return {};
  }
  if (auto r = s.store->dropOrphans(); !r) {
    return std::unexpected(storeError(r.error(), "cannot drop orphaned claims"));
  }
  if (auto c = s.store->commit(); !c) {
    return std::unexpected(storeError(c.error(), "cannot save the GUID store's index"));
  }
  return {};
}

}  // namespace

EmbeddedGuidPools::EmbeddedGuidPools(EmbeddedIpamOptions options) : options_(withDefaults(std::move(options))) {}

std::string EmbeddedGuidPools::storeDirOf(const config::GuidPoolConf& pool) const {
  return clusterPoolDir(dataDirOf(pool, options_), pool.pool, SpaceKind::kGuid);
}

cni::Result<GuidLease> EmbeddedGuidPools::allocate(const GuidRequest& request) {
  const config::GuidPoolConf& pool = request.pool;
  if (pool.poolFile.empty()) {
    return cni::fail(cni::Errc::kInvalidConfig, "guidPool " + cni::quoted(pool.pool) +
                                                    " was not read by guidPoolObject: it has no pool file to keep");
  }
  // A node-local pool's overlap check and its allocation are one step under the node's GUID pools
  // lock: two new pools over one range, first ADDs at once, cannot both pass it.
  std::optional<os::FileLock> overlapLock;
  if (!pool.cluster) {
    auto locked = lockNodeLocalPools(dataDirOf(pool, options_), options_.lockTimeout);
    if (!locked) {
      return std::unexpected(locked.error());
    }
    overlapLock.emplace(std::move(*locked));
    if (auto o = checkNoOverlap(pool, dataDirOf(pool, options_)); !o) {
      return std::unexpected(o.error());
    }
  }
  auto g = openGuidSession(pool, request.network, storeDirOf(pool), options_, true);
  if (!g) {
    return std::unexpected(g.error());
  }
  Session& s = *(*g)->s;
  // The pool first: DEL and the node agent find it there (the attachment's record keeps the directory).
  const std::string path = s.dir + "/" + kGuidPoolFileName;
  auto written = keepFile(path, pool.poolFile);
  if (!written) {
    return cni::fail(cni::Errc::kIoFailure, "cannot write " + path, written.error().describe());
  }
  if (*written && pool.cluster) {  // the index follows pool.json: nothing more when it is as it was
    keepPoolIndex(options_, pool.pool, {"guid", s.dir, kGuidPoolFileName, pool.poolFile});
  }
  AddRequest req;
  req.key = {request.args.containerId, request.args.ifName};
  req.pod = {request.cniArgs.podNamespace, request.cniArgs.podName, request.cniArgs.podUid};
  req.netns = request.args.netns;
  req.netnsInode = options_.netnsChecker->identify(request.args.netns);
  req.network = request.network;
  if (request.requested) {
    req.requested.push_back(net::IpAddress::fromGuid(*request.requested));
    req.requestedFrom = request.requestedFrom;
  }
  auto leases = s.allocator->allocate(req);
  if (!leases) {
    return std::unexpected(leases.error());
  }
  const auto guid = leases->front().address.guid();
  return GuidLease{guid.value_or(net::Guid{}), pool.pool, s.dir};
}

cni::Result<bool> EmbeddedGuidPools::release(const std::string& storeDir, const cni::AttachmentKey& key,
                                             const std::string& network) {
  auto g = recordedSession(storeDir, network, options_);
  if (!g || !*g) {
    return g ? cni::Result<bool>(false) : std::unexpected(g.error());
  }
  return (*g)->s->allocator->release(key, network, false);
}

cni::Result<std::optional<net::Guid>> EmbeddedGuidPools::held(const std::string& storeDir,
                                                              const cni::AttachmentKey& key) {
  auto g = recordedSession(storeDir, "", options_);
  if (!g || !*g) {
    return g ? cni::Result<std::optional<net::Guid>>() : std::unexpected(g.error());
  }
  auto leases = (*g)->s->allocator->held(key);
  if (!leases) {
    return std::unexpected(leases.error());
  }
  return leases->empty() ? std::nullopt : leases->front().address.guid();
}

cni::Result<std::vector<ReleasedAllocation>> EmbeddedGuidPools::gc(const config::GuidPoolConf& pool,
                                                                   const std::string& network,
                                                                   const std::vector<cni::AttachmentKey>& keep) {
  const std::string dir = storeDirOf(pool);
  std::vector<ReleasedAllocation> out;
  if (!isDirectory(dir)) {
    return out;
  }
  auto g = openGuidSession(pool, network, dir, options_, false);
  if (!g) {
    return std::unexpected(g.error());
  }
  auto released = (*g)->s->allocator->gc(keep, network);
  if (!released) {
    return std::unexpected(released.error());
  }
  for (const auto& a : *released) {
    out.push_back(toReleased(a));
  }
  return out;
}

cni::Result<ReclaimOutcome> EmbeddedGuidPools::maintain(
    const std::string& storeDir, bool dryRun,
    const std::function<bool(const std::string& network, const cni::AttachmentKey&)>& recorded) {
  ReclaimOutcome out;
  auto g = recordedSession(storeDir, "", options_);
  if (!g || !*g) {
    return g ? cni::Result<ReclaimOutcome>(out) : std::unexpected(g.error());
  }
  if (auto r = sweep(*(*g)->s, dryRun, recorded, out); !r) {
    return std::unexpected(r.error());
  }
  if (auto k = keepBlocks(*(*g)->s, dryRun, out); !k) {
    return std::unexpected(k.error());
  }
  const config::GuidPoolConf& pool = (*g)->pool;
  if (pool.cluster && !dryRun) {
    // A pool an older ibcni made (or whose entry went) is indexed here, off the ADD's path.
    keepPoolIndex(options_, pool.pool, {"guid", storeDir, kGuidPoolFileName, pool.poolFile});
  }
  return out;
}

cni::Result<std::vector<ReleasedAllocation>> EmbeddedGuidPools::holders(const std::string& storeDir) {
  std::vector<ReleasedAllocation> out;
  auto g = recordedSession(storeDir, "", options_);
  if (!g || !*g) {
    return g ? cni::Result<std::vector<ReleasedAllocation>>(out) : std::unexpected(g.error());
  }
  auto locked = lockAndList(*(*g)->s->store);
  if (!locked) {
    return std::unexpected(locked.error());
  }
  for (const auto& a : locked->held) {
    if (a.loanTo.empty()) {
      out.push_back(toReleased(a));
    }
  }
  return out;
}

cni::Result<PoolReport> EmbeddedGuidPools::pools(const config::GuidPoolConf& pool, const std::string& network) {
  if (!pool.cluster) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     "guidPool " + cni::quoted(pool.pool) + " of network " + cni::quoted(network) +
                         " has no guidPool.cluster: it is node-local (every node hands out the whole range on its "
                         "own), so there are no blocks to list");
  }
  auto g = openGuidSession(pool, network, storeDirOf(pool), options_, false);
  if (!g) {
    return std::unexpected(g.error());
  }
  return reportPool(*(*g)->s, network, options_);
}

}  // namespace ibcni::ipam
