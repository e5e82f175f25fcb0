// SPDX-License-Identifier: Apache-2.0
// ipam.cluster: the embedded IPAM's cluster mode (one pool for every node, blocks claimed through
// Kubernetes Leases or etcd); guidPool.cluster is read by the same code (clusterObjectAt), its field
// paths in every message. Every key is typed and range-checked here; the IPAM trusts them.
#include <set>

#include "ipam/config/ipam_config.h"
#include "ibcni/cni/error.h"
#include "ibcni/net/address_math.h"
#include "ibcni/os/safe_path.h"

namespace ibcni::config {

std::string_view clusterBackendName(ClusterBackend backend) {
  return backend == ClusterBackend::kEtcd ? "etcd" : "kubernetes";
}

namespace {

// 1 to `maxLength` lowercase letters, digits, '-' and '.', starting and ending with a letter or
// digit: a DNS-1123 subdomain when `maxLength` is 253.
bool isSubdomainName(std::string_view s, std::size_t maxLength) {
  if (s.empty() || s.size() > maxLength) {
    return false;
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s.front()) || !alnum(s.back())) {
    return false;
  }
  for (char c : s) {
    if (!alnum(c) && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

}  // namespace

bool isNodeName(std::string_view s) { return isSubdomainName(s, 253); }

bool validPoolName(std::string_view s) { return isSubdomainName(s, 63); }

cni::Result<void> refuseUnknownKeys(const json& obj, const std::string& path, const std::set<std::string>& known) {
  for (const auto& [key, value] : obj.items()) {
    if (!known.contains(key)) {
      std::string list;
      for (const auto& k : known) {
        list += (list.empty() ? "" : ", ") + k;
      }
      // A misspelt key of a cluster object (or of guidPool) would silently change where addresses (GUIDs)
      // come from: refused.
      return invalid(path + "." + key, value, "is not a key of " + path + " (known: " + list + ")");
    }
  }
  return {};
}

namespace {

// A bounded integer member: nullopt when absent.
cni::Result<std::optional<std::int64_t>> boundedField(const json& obj, const char* key, const std::string& path,
                                                      std::int64_t lo, std::int64_t hi, const std::string& unit) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    return std::optional<std::int64_t>();
  }
  const std::string range = "must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + unit;
  if (!it->is_number_integer()) {
    return invalid(path, *it, range);
  }
  if (it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) {
    return invalid(path, *it, range);
  }
  const auto v = it->get<std::int64_t>();
  if (v < lo || v > hi) {
    return invalid(path, *it, range);
  }
  return std::optional<std::int64_t>(v);
}

// An absolute file path (a kubeconfig, a CA or key file), spelled as the rules of os/safe_path.h want.
cni::Result<std::string> filePath(const json& obj, const char* key, const std::string& path, std::string fallback,
                                  const std::string& example) {
  std::optional<std::string> s;
  IBCNI_TRY_ASSIGN(s, stringField(obj, key, path));
  if (!s) {
    return fallback;
  }
  if (s->empty() || s->front() != '/') {
    return invalid(path, *s, "must be an absolute file path, e.g. \"" + example + "\"");
  }
  if (auto problem = os::pathSpellingProblem(*s); !problem.empty()) {
    return invalid(path, *s, problem + ", e.g. \"" + example + "\"");
  }
  return *s;
}

cni::Result<KubernetesClusterConf> kubernetesObject(const json& j, const std::string& path) {
  KubernetesClusterConf k;
  if (j.is_null()) {
    return k;
  }
  if (!j.is_object()) {
    return invalid(path, j, "must be an object {\"kubeconfig\": \"" + k.kubeconfig + "\", \"namespace\": \"kube-system\"}");
  }
  IBCNI_TRY_ASSIGN(k.kubeconfig, filePath(j, "kubeconfig", path + ".kubeconfig", k.kubeconfig, k.kubeconfig));
  std::optional<std::string> s;
  IBCNI_TRY_ASSIGN(s, stringField(j, "namespace", path + ".namespace"));
  if (s) {
    if (!validPoolName(*s) || s->find('.') != std::string::npos) {
      return invalid(path + ".namespace", *s, "must be a Kubernetes namespace name (lowercase letters, digits, '-'), "
                                              "e.g. \"kube-system\"");
    }
    k.leaseNamespace = *s;
  }
  IBCNI_TRY_ASSIGN(s, stringField(j, "context", path + ".context"));
  if (s) {
    if (s->empty() || s->size() > 253) {
      return invalid(path + ".context", *s, "must name a context of the kubeconfig");
    }
    k.context = *s;
  }
  if (auto u = refuseUnknownKeys(j, path, {"kubeconfig", "namespace", "context"}); !u) {
    return std::unexpected(u.error());
  }
  return k;
}

// The etcd object of the cluster object at `cluster`.
cni::Result<EtcdClusterConf> etcdObject(const json& j, const std::string& cluster) {
  EtcdClusterConf e;
  const std::string path = cluster + ".etcd";
  const std::string example = "{\"endpoints\": [\"https://10.0.0.1:2379\"]}";
  if (j.is_null()) {
    return invalid(path, j, "is required with " + cluster + ".backend \"etcd\": " + example);
  }
  if (!j.is_object()) {
    return invalid(path, j, "must be an object " + example);
  }
  IBCNI_TRY_ASSIGN(e.endpoints, stringList(j, "endpoints", path + ".endpoints"));
  if (e.endpoints.empty()) {
    return invalid(path + ".endpoints", j.contains("endpoints") ? j["endpoints"] : json(),
                   "must list at least one etcd client URL, e.g. [\"https://10.0.0.1:2379\"]");
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < e.endpoints.size(); ++i) {
    auto& ep = e.endpoints[i];
    const std::string p = path + ".endpoints[" + std::to_string(i) + "]";
    const bool http = ep.starts_with("http://");
    const bool https = ep.starts_with("https://");
    const std::string rest = http ? ep.substr(7) : https ? ep.substr(8) : std::string();
    while (!ep.empty() && ep.back() == '/') {
      ep.pop_back();
    }
    bool printable = true;
    for (unsigned char c : ep) {
      printable = printable && c > 0x20 && c < 0x7f;
    }
    if ((!http && !https) || rest.empty() || rest.front() == '/' || rest.front() == ':' || !printable ||
        rest.find_first_of("?#@") != std::string::npos || ep.size() > 2048) {
      return invalid(p, ep, "must be an etcd client URL http(s)://host:port, e.g. \"https://10.0.0.1:2379\"");
    }
    if (!seen.insert(ep).second) {
      return invalid(p, ep, "is listed twice");
    }
  }
  std::optional<std::string> prefix;
  IBCNI_TRY_ASSIGN(prefix, stringField(j, "prefix", path + ".prefix"));
  if (prefix) {
    bool printable = !prefix->empty() && prefix->size() <= 256;
    for (unsigned char c : *prefix) {
      printable = printable && c > 0x20 && c < 0x7f;
    }
    if (!printable || prefix->back() != '/') {
      return invalid(path + ".prefix", *prefix, "must be a printable key prefix ending in '/', e.g. \"/ibcni/\"");
    }
    e.prefix = *prefix;
  }
  IBCNI_TRY_ASSIGN(e.caFile, filePath(j, "caFile", path + ".caFile", "", "/etc/ibcni/etcd-ca.crt"));
  IBCNI_TRY_ASSIGN(e.certFile, filePath(j, "certFile", path + ".certFile", "", "/etc/ibcni/etcd-client.crt"));
  IBCNI_TRY_ASSIGN(e.keyFile, filePath(j, "keyFile", path + ".keyFile", "", "/etc/ibcni/etcd-client.key"));
  if (e.certFile.empty() != e.keyFile.empty()) {
    return invalid(path + (e.certFile.empty() ? ".keyFile" : ".certFile"),
                   e.certFile.empty() ? e.keyFile : e.certFile,
                   "needs " + path + (e.certFile.empty() ? ".certFile" : ".keyFile") +
                       " too: a client certificate is given with its key");
  }
  if (auto u = refuseUnknownKeys(j, path, {"endpoints", "prefix", "caFile", "certFile", "keyFile"}); !u) {
    return std::unexpected(u.error());
  }
  return e;
}

// ipam.cluster.backend: "kubernetes" (the default) or "etcd".
cni::Result<void> clusterBackend(const json& j, const std::string& path, ClusterConf& c) {
  std::optional<std::string> s;
  IBCNI_TRY_ASSIGN(s, stringField(j, "backend", path + ".backend"));
  if (s) {
    if (*s == "kubernetes") {
      c.backend = ClusterBackend::kKubernetes;
    } else if (*s == "etcd") {
      c.backend = ClusterBackend::kEtcd;
    } else {
      return invalid(path + ".backend", *s, "must be \"kubernetes\" (Leases through the API server) or \"etcd\"");
    }
  }
  return {};
}

cni::Result<void> clusterPool(const json& j, const std::string& path, ClusterConf& c) {
  std::optional<std::string> s;
  IBCNI_TRY_ASSIGN(s, poolNameField(j, path + ".pool"));
  if (s) {
    c.pool = *s;
    c.poolPath = path + ".pool";
  }
  return {};
}

cni::Result<void> clusterBlockSize(const json& j, const std::string& path, ClusterConf& c) {
  std::optional<std::uint32_t> n;
  IBCNI_TRY_ASSIGN(n, blockSizeField(j, path + ".blockSize", 4, 32));
  c.blockSize = n.value_or(c.blockSize);
  return {};
}

cni::Result<void> clusterNodeName(const json& j, const std::string& path, ClusterConf& c) {
  std::optional<std::string> s;
  IBCNI_TRY_ASSIGN(s, stringField(j, "nodeName", path + ".nodeName"));
  if (s) {
    if (!isNodeName(*s)) {
      return invalid(path + ".nodeName", *s,
                     "must be a Kubernetes node name (lowercase letters, digits, '-' and '.', at most 253), or be "
                     "left out to use " + std::string(kNodeNameFile) + " or the host name");
    }
    c.nodeName = *s;
  }
  return {};
}

// How long to wait and hold, and how many blocks to keep: timeoutMs, releaseAfterSeconds,
// leaseDurationSeconds, minBlocksPerNode.
cni::Result<void> clusterTuning(const json& j, const std::string& path, ClusterConf& c) {
  std::optional<std::int64_t> n;
  IBCNI_TRY_ASSIGN(n, boundedField(j, "timeoutMs", path + ".timeoutMs", 100, 600000, " (milliseconds)"));
  if (n) {
    c.timeout = std::chrono::milliseconds(*n);
  }
  IBCNI_TRY_ASSIGN(n, boundedField(j, "releaseAfterSeconds", path + ".releaseAfterSeconds", 0, 2592000, ""));
  if (n) {
    c.releaseAfter = std::chrono::seconds(*n);
  }
  IBCNI_TRY_ASSIGN(n, boundedField(j, "leaseDurationSeconds", path + ".leaseDurationSeconds", 10, 86400, ""));
  if (n) {
    c.leaseDuration = std::chrono::seconds(*n);
  }
  IBCNI_TRY_ASSIGN(n, boundedField(j, "minBlocksPerNode", path + ".minBlocksPerNode", 0, 1024, " (blocks per range set)"));
  if (n) {
    c.minBlocksPerNode = static_cast<std::size_t>(*n);
  }
  return {};
}

// ipam.cluster.kubernetes (always read) and ipam.cluster.etcd (read, and required, with the etcd
// backend only).
cni::Result<void> clusterBackendObjects(const json& j, const std::string& path, ClusterConf& c) {
  const json none;
  auto k8s = kubernetesObject(j.contains("kubernetes") ? j["kubernetes"] : none, path + ".kubernetes");
  if (!k8s) {
    return std::unexpected(k8s.error());
  }
  c.kubernetes = std::move(*k8s);
  if (c.backend == ClusterBackend::kEtcd) {
    auto etcd = etcdObject(j.contains("etcd") ? j["etcd"] : none, path);
    if (!etcd) {
      return std::unexpected(etcd.error());
    }
    c.etcd = std::move(*etcd);
  } else if (j.contains("etcd") && !j["etcd"].is_null()) {
    return invalid(path + ".etcd", j["etcd"], "is only read with " + path + ".backend \"etcd\"; the backend is \"" +
                                                  std::string(clusterBackendName(c.backend)) + "\"");
  }
  if (!j.contains("backend") && j.contains("etcd")) {
    return invalid(path + ".backend", json(), "must be \"etcd\" when " + path + ".etcd is given");
  }
  return {};
}

// Every range must hold whole blocks: a block is aligned on its size inside the subnet.
cni::Result<void> checkBlocksFit(const json& j, const std::string& path, const ClusterConf& c, const IpamConfig& ipam) {
  for (const auto& set : ipam.rangeSets) {
    for (const auto& r : set.ranges) {
      const net::U128 size = net::lastOf(r.subnet) - net::firstOf(r.subnet) + 1;
      if (size != 0 && size < c.blockSize) {
        return invalid(path + ".blockSize", j.contains("blockSize") ? j["blockSize"] : json(c.blockSize),
                       "is larger than " + r.path + " = " + r.subnet.toString() + " (" + net::toDecimal(size) +
                           " addresses); give a smaller power of two");
      }
    }
  }
  return {};
}

// pool and blockSize in a cluster object whose parent holds them (guidPool.cluster): refused, with
// where they go.
cni::Result<void> refuseParentKeys(const json& j, const std::string& path, const std::string& parent) {
  for (const char* key : {"pool", "blockSize"}) {
    if (const json* v = memberGiven(j, key)) {
      return invalid(path + "." + key, *v, "is not read here: give it as " + parent + "." + key);
    }
  }
  return {};
}

}  // namespace

cni::Result<std::optional<std::string>> poolNameField(const json& j, const std::string& path) {
  std::optional<std::string> s;
  IBCNI_TRY_ASSIGN(s, stringField(j, "pool", path));
  if (s && !validPoolName(*s)) {
    return invalid(path, *s,
                   "must be 1 to 63 lowercase letters, digits, '-' or '.', starting and ending with a letter or "
                   "digit, e.g. \"ib-partition-1\"");
  }
  return s;
}

cni::Result<std::string> networkPoolName(const std::string& network, const std::string& path) {
  if (!validPoolName(network)) {
    return invalid(path, json(), "is needed: the network name " + cni::quoted(network) +
                                     " is not a pool name (1 to 63 lowercase letters, digits, '-' or '.'); set " +
                                     path);
  }
  return network;
}

cni::Result<std::optional<std::uint32_t>> blockSizeField(const json& j, const std::string& path, std::uint32_t smallest,
                                                         std::uint32_t example) {
  std::optional<std::int64_t> n;
  IBCNI_TRY_ASSIGN(n, boundedField(j, "blockSize", path, smallest, 65536, " (a power of two)"));
  if (!n) {
    return std::optional<std::uint32_t>();
  }
  if ((*n & (*n - 1)) != 0) {
    return invalid(path, j["blockSize"], "must be a power of two from " + std::to_string(smallest) +
                                             " to 65536, e.g. " + std::to_string(example));
  }
  return std::optional<std::uint32_t>(static_cast<std::uint32_t>(*n));
}

cni::Result<ClusterConf> clusterObjectAt(const json& j, const ClusterObjectRules& rules) {
  const std::string& path = rules.path;
  const bool ownPoolKeys = rules.poolKeysIn.empty();
  if (!j.is_object()) {
    return invalid(path, j, ownPoolKeys ? "must be an object, e.g. {\"backend\": \"kubernetes\", \"blockSize\": 32}"
                                        : "must be an object, e.g. {\"backend\": \"kubernetes\"}");
  }
  ClusterConf c;
  c.path = path;
  c.poolKeysPath = ownPoolKeys ? path : rules.poolKeysIn;
  if (!ownPoolKeys) {
    if (auto r = refuseParentKeys(j, path, rules.poolKeysIn); !r) {
      return std::unexpected(r.error());
    }
  }
  for (auto section : {clusterBackend, clusterPool, clusterBlockSize, clusterNodeName, clusterTuning,
                       clusterBackendObjects}) {
    if (auto r = section(j, path, c); !r) {
      return std::unexpected(r.error());
    }
  }
  if (rules.check) {
    if (auto b = rules.check(c); !b) {
      return std::unexpected(b.error());
    }
  }
  std::set<std::string> known = {"backend",  "nodeName", "timeoutMs", "releaseAfterSeconds", "leaseDurationSeconds",
                                 "minBlocksPerNode", "kubernetes", "etcd"};
  if (ownPoolKeys) {
    known.insert({"pool", "blockSize"});
  }
  if (auto u = refuseUnknownKeys(j, path, known); !u) {
    return std::unexpected(u.error());
  }
  return c;
}

cni::Result<ClusterConf> clusterObject(const json& j, const IpamConfig& ipam) {
  const std::string path = "ipam.cluster";
  return clusterObjectAt(j, {.path = path, .poolKeysIn = {}, .check = [&](const ClusterConf& c) {
                               return checkBlocksFit(j, path, c, ipam);
                             }});
}

}  // namespace ibcni::config
