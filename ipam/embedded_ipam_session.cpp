// SPDX-License-Identifier: Apache-2.0
#include "ipam/embedded_ipam_session.h"

#include <filesystem>
#include <string>

#include "ibcni/os/safe_path.h"
#include "lib/log/log.h"

namespace ibcni::ipam {

namespace {

// The store lives in <dataDir>/<name>. The configuration may come from someone with less power
// than root, so the directory is reached and created (0700) under the rules of os/safe_path.h:
// only root's symbolic links are followed, and every directory on the way is root's and writable
// by no one else. A refusal is error 7; a failing system call is `ioCode`. @return the directory,
// open: the store reaches its files relative to it.
cni::Result<os::UniqueFd> prepareStoreDir(const std::string& dir, const std::string& field, cni::Errc ioCode) {
  auto fd = os::openDirectory(dir, os::DirPolicy{.trustedOwners = true, .create = true, .mode = 0700});
  if (!fd) {
    if (os::isRefusal(fd.error())) {
      return cni::fail(cni::Errc::kInvalidConfig, "invalid " + field + ": " + fd.error().op +
                                                      "; use a directory only root can change, such as the default " +
                                                      std::string(config::kDefaultIpamDataDir) +
                                                      " (docs/security.md)");
    }
    // `dir` passed the spelling rules (printable, bounded) and the network name is an identifier.
    return cni::fail(ioCode, "ipam data directory " + dir + " cannot be opened or created", fd.error().describe());
  }
  return std::move(*fd);
}

// The `ipam` object config/ parsed for the request, or why the embedded IPAM cannot serve it.
cni::Result<const IpamConfig*> embeddedConfig(const Request& request) {
  const auto* parsed = request.settings;
  if (!parsed) {
    // config/ reads the ipam object for ipam.type "ibcni-ipam" and for ibcni-ipam's own role.
    return cni::fail(cni::Errc::kInvalidConfig, "ipam.type = " + cni::quoted(request.ipamType) +
                                                    " is not served by the embedded IPAM: use \"ibcni-ipam\"");
  }
  if (!*parsed) {
    return std::unexpected(parsed->error());
  }
  return &**parsed;
}

}  // namespace

cni::Result<os::UniqueFd> checkStoreDir(const std::string& dir, cni::Errc ioCode) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return os::UniqueFd();
  }
  auto fd = os::openDirectory(dir, os::DirPolicy{.trustedOwners = true, .create = false});
  if (!fd) {
    return cni::fail(os::isRefusal(fd.error()) ? cni::Errc::kInvalidConfig : ioCode,
                     "ipam data directory " + dir + " cannot be opened", fd.error().describe());
  }
  return std::move(*fd);
}

cni::Result<std::string> clusterNode(Session& s, const std::string& dataDir, const EmbeddedIpamOptions& options) {
  const SpaceKind kind = spaceOf(s.config).kind;
  if (!options.backends) {
    return cni::fail(cni::Errc::kInvalidEnvironment, s.config.cluster->path +
                                                         " is not supported by this program: use ibcni" +
                                                         (kind == SpaceKind::kIp ? " or ibcni-ipam" : ""));
  }
  auto name = clusterNodeName(*s.config.cluster, options.nodeNameFile);
  if (!name) {
    return std::unexpected(name.error());
  }
  s.dir = clusterPoolDir(dataDir, s.config.cluster->pool, kind);
  return name;
}

cni::Result<void> openStore(Session& s, const std::string& network, const std::string& node,
                            const EmbeddedIpamOptions& options, cni::Errc ioCode, bool create) {
  const SpaceKind kind = spaceOf(s.config).kind;
  const std::string field = kind == SpaceKind::kIp ? "ipam.dataDir" : "guidPool.dataDir";
  auto dirFd = create ? prepareStoreDir(s.dir, field, ioCode) : checkStoreDir(s.dir, ioCode);
  if (!dirFd) {
    return std::unexpected(dirFd.error());
  }
  FileStore::Options o{s.dir, Allocator::spansOf(s.config), options.lockTimeout, std::move(*dirFd)};
  o.space = kind;
  s.store = std::make_unique<FileStore>(std::move(o));
  s.allocator = std::make_unique<Allocator>(s.config, *s.store, *options.netnsChecker, options.clock);
  if (s.config.cluster) {
    // The pool is cut from the allocator's view of what can be handed out; then the allocator
    // hands out only inside the pool's blocks.
    s.pool = std::make_unique<ClusterPool>(s.config, network, node, s.dir, *s.allocator, options.backends,
                                           options.bootClock, options.clock);
    s.allocator->useBlocks(*s.pool);
  }
  return {};
}

cni::Result<std::unique_ptr<Session>> openSession(const Request& request, const EmbeddedIpamOptions& options,
                                                  cni::Errc ioCode, bool create) {
  auto conf = embeddedConfig(request);
  if (!conf) {
    return std::unexpected(conf.error());
  }
  auto s = std::make_unique<Session>(Session{**conf, {}, {}, {}, {}});
  for (const auto& w : s->config.warnings) {
    log::warn("{}", w);
  }
  std::string dataDir = s->config.dataDir.empty() ? options.defaultDataDir : s->config.dataDir;
  std::string node;
  if (s->config.cluster) {
    auto name = clusterNode(*s, dataDir, options);
    if (!name) {
      return std::unexpected(name.error());
    }
    node = std::move(*name);
  } else {
    s->dir = dataDir + "/" + std::string(request.network);
  }
  if (auto r = openStore(*s, std::string(request.network), node, options, ioCode, create); !r) {
    return std::unexpected(r.error());
  }
  return s;
}

}  // namespace ibcni::ipam
