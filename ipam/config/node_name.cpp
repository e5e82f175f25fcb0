// SPDX-License-Identifier: Apache-2.0
#include "ipam/config/node_name.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "ibcni/os/file_io.h"

namespace ibcni::ipam {

namespace {

// The first line of `path`, without surrounding blanks; empty when it cannot be read.
std::string firstLine(const std::string& path) {
  auto text = os::readFile(path, 4096);
  if (!text) {
    return {};
  }
  std::string line = text->substr(0, text->find('\n'));
  const auto b = line.find_first_not_of(" \t\r");
  const auto e = line.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : line.substr(b, e - b + 1);
}

}  // namespace

cni::Result<NodeIdentity> clusterNodeIdentity(const config::ClusterConf& cluster, const std::string& nodeNameFile) {
  if (!cluster.nodeName.empty()) {
    return NodeIdentity{cluster.nodeName, cluster.path + ".nodeName"};
  }
  std::string from = nodeNameFile;
  std::string name = nodeNameFile.empty() ? std::string() : firstLine(nodeNameFile);
  std::string source = nodeNameFile;
  if (name.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0) {
      name = host;
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    }
    from = "the host name";
    source = "hostname";
  }
  if (!config::isNodeName(name)) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     cluster.path + ".nodeName is not set and " + from + " gives " + cni::quoted(name) +
                         ", which is not a Kubernetes node name; set " + cluster.path +
                         ".nodeName (the installer writes " +
                         std::string(config::kNodeNameFile) + ")");
  }
  return NodeIdentity{name, source};
}

cni::Result<std::string> clusterNodeName(const config::ClusterConf& cluster, const std::string& nodeNameFile) {
  auto id = clusterNodeIdentity(cluster, nodeNameFile);
  if (!id) {
    return std::unexpected(id.error());
  }
  return std::move(id->name);
}

}  // namespace ibcni::ipam
