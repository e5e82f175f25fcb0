// SPDX-License-Identifier: Apache-2.0
#include <fcntl.h>
#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <string>

#include "ipam/embedded_ipam.h"

#include "ipam/embedded_ipam_session.h"
#include "ipam/store/record_codec.h"
#include "ibcni/config/net_conf.h"
#include "ibcni/os/file_io.h"
#include "ibcni/os/safe_path.h"
#include "ibcni/os/unique_fd.h"
#include "lib/json/json_fields.h"
#include "lib/log/log.h"

namespace ibcni::ipam {

os::SysResult<bool> keepFile(const std::string& path, const std::string& text) {
  if (auto now = os::readFile(path, std::size_t{1} << 20); now && *now == text) {
    return false;
  }
  if (auto w = os::writeFileAtomic(path, text); !w) {
    return std::unexpected(w.error());
  }
  return true;
}

ReleasedAllocation toReleased(const Allocation& a) {
  ReleasedAllocation r{a.key.containerId, a.key.ifName, a.pod.empty() ? "" : a.pod.toString(), a.netns, {}, a.network};
  for (const auto& ip : a.addresses) {
    r.addresses.push_back(ip.toString());
  }
  return r;
}

EmbeddedIpamOptions withDefaults(EmbeddedIpamOptions options) {
  if (!options.netnsChecker) {
    options.netnsChecker = os::systemNetnsChecker();
  }
  if (!options.clock) {
    options.clock = [] { return std::chrono::system_clock::now(); };
  }
  if (options.defaultDataDir.empty()) {
    options.defaultDataDir = std::string(config::kDefaultIpamDataDir);
  }
  return options;
}

EmbeddedIpam::EmbeddedIpam(EmbeddedIpamOptions options) : options_(withDefaults(std::move(options))) {}

namespace {

// The addresses an attachment asks for: one source, the most specific one (runtimeConfig > args >
// CNI_ARGS), each without its prefix length (the range an address falls in decides it).
void requestedAddresses(const Request& request, AddRequest& req) {
  std::span<const net::IpPrefix> from = request.cniArgs.ips;
  req.requestedFrom = "CNI_ARGS IP";
  if (!request.runtimeIps.empty()) {
    from = request.runtimeIps;
    req.requestedFrom = "runtimeConfig.ips";
  } else if (!request.argsIps.empty()) {
    from = request.argsIps;
    req.requestedFrom = "args.cni.ips";
  }
  for (const auto& p : from) {
    req.requested.push_back(p.address);
  }
}

// Keeps the pool's configuration in its directory (kNetworkFileName). A failure is only logged:
// the allocation stands, and the file is what a node agent reclaims with, not what ADD needs.
// @return whether it was written (it was missing or differed).
bool keepNetworkFile(const std::string& dir, const std::string& text) {
  const std::string path = dir + "/" + kNetworkFileName;
  if (text.empty()) {
    return false;
  }
  auto w = keepFile(path, text);
  if (!w) {
    log::warn("cannot write {}: {}", path, w.error().describe());
  }
  return w && *w;
}

// `base` with each field `over` sets in its place: a list that is not empty, the domain when
// `overDomain` (an empty domain given replaces too).
cni::Dns overlay(cni::Dns base, const cni::Dns& over, bool overDomain) {
  if (!over.nameservers.empty()) {
    base.nameservers = over.nameservers;
  }
  if (overDomain) {
    base.domain = over.domain;
  }
  if (!over.search.empty()) {
    base.search = over.search;
  }
  if (!over.options.empty()) {
    base.options = over.options;
  }
  return base;
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
  return overlay(config::parseResolvConf(*text), conf.dns, conf.dnsDomainSet);
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
  req.network = std::string(request.network);
  requestedAddresses(request, req);
  auto leases = (*s)->allocator->allocate(req);
  if (!leases) {
    return std::unexpected(leases.error());
  }
  // The pool index follows the pool's own file: written with it (after a reboot, on the first ADD),
  // so that an ADD whose pool is as it was pays nothing more for it.
  if (keepNetworkFile((*s)->dir, conf.networkFile) && conf.cluster) {
    keepPoolIndex(options_, conf.cluster->pool, {"address", (*s)->dir, kNetworkFileName, conf.networkFile});
  }
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
  auto released = (*s)->allocator->release(key, std::string(request.network), false);
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
    const Request other{.args = args, .cniArgs = cniArgs, .network = conf->name, .settings = &*conf->embeddedIpam};
    auto s = openSession(other, options_);
    if (!s || (*s)->dir != dir) {
      continue;
    }
    auto released = (*s)->allocator->release(key, std::string(request.network), true);
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
                     "ipam: no addresses are held for " + who + " in network " + std::string(request.network));
  }
  std::vector<bool> covered(conf.rangeSets.size(), false);
  const auto* prevIps = request.prevResult ? &request.prevResult->ips : nullptr;
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
  const auto* valid = request.validAttachments;
  if (!valid) {
    log::warn("gc: no cni.dev/valid-attachments in the configuration: every allocation of the network is stale");
  }
  auto released = (*s)->allocator->gc(valid ? *valid : none, std::string(request.network));
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
  if (auto kept = keepBlocks(**s, dryRun, out); !kept) {
    return std::unexpected(kept.error());
  }
  const IpamConfig& conf = (*s)->config;
  if (conf.cluster && !dryRun && !conf.networkFile.empty()) {
    // A pool an older ibcni made (or whose entry went) is indexed here, off the ADD's path.
    keepPoolIndex(options_, conf.cluster->pool, {"address", (*s)->dir, kNetworkFileName, conf.networkFile});
  }
  return out;
}

cni::Result<LockedStore> lockAndList(Store& store) {
  auto lock = StoreLock::acquire(store);
  if (!lock) {
    return std::unexpected(storeError(lock.error(), "cannot lock the ipam store"));
  }
  auto held = store.list();
  if (!held) {
    return std::unexpected(storeError(held.error(), "cannot list allocations"));
  }
  return LockedStore{std::move(*lock), std::move(*held)};
}

cni::Result<void> keepBlocks(Session& s, bool dryRun, ReclaimOutcome& out) {
  if (!s.pool) {
    return {};
  }
  // Cluster mode: the periodic pass also keeps this node's blocks (renewal, lost answers, empty
  // blocks given back), under the store's lock.
  auto locked = lockAndList(*s.store);
  if (!locked) {
    return std::unexpected(locked.error());
  }
  if (auto b = s.pool->begin(); !b) {
    return std::unexpected(b.error());
  }
  auto kept = s.pool->maintain(locked->held, *s.allocator, dryRun);
  if (!kept) {
    return std::unexpected(kept.error());
  }
  out.upkeep = PoolUpkeep{s.config.cluster->pool, s.pool->node(), kept->renewed, kept->livenessRenewed,
                          kept->released, kept->lost, kept->adopted, kept->addressesReleased, kept->reclaimed,
                          kept->takenOver, kept->lent, kept->loansReturned};
  return {};
}

}  // namespace ibcni::ipam
