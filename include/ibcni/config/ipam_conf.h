// SPDX-License-Identifier: Apache-2.0
// The embedded IPAM's configuration (ipam.type "ibcni-ipam"): the `ipam` object of a network
// configuration, a superset of host-local's, after config/ parsed, canonicalized and validated it.
// The IPAM's policy (ipam/) trusts every field.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ibcni/cni/error.h"
#include "ibcni/cni/result.h"
#include "ibcni/net/ip.h"

namespace ibcni::config {

/// The ipam.type that selects the embedded IPAM, in process or as the ibcni-ipam executable.
inline constexpr std::string_view kEmbeddedIpamType = "ibcni-ipam";

/// Where the embedded IPAM keeps its allocations unless ipam.dataDir says otherwise: on tmpfs, so
/// that a reboot (which ends every pod) also frees every address.
inline constexpr std::string_view kDefaultIpamDataDir = "/run/ibcni-ipam";

/// One canonical range: every field is set, the subnet has no host bits, and
/// network <= rangeStart <= rangeEnd <= last address of the subnet, with neither end being the
/// network or (IPv4) broadcast address.
struct Range {
  net::IpPrefix subnet;       ///< network address and prefix length ("10.1.2.0/24")
  net::IpAddress rangeStart;  ///< default: network+1, or network+2 when that is the gateway
  net::IpAddress rangeEnd;    ///< default: IPv4 broadcast-1, IPv6 last address (as host-local)
  net::IpAddress gateway;     ///< default: network+1; never handed out
  std::string path;           ///< where it was configured: "ipam.ranges[0][1]", or "ipam" (legacy keys)

  /// True when `ip` lies in [rangeStart, rangeEnd].
  [[nodiscard]] bool contains(const net::IpAddress& ip) const;
  /// "10.1.2.0/24 (10.1.2.2-10.1.2.254)", for messages; a GUID range (family net::kFamilyGuid) has no
  /// subnet: "02:00:00:00:00:00:00:00-02:00:00:00:00:ff:ff:ff".
  [[nodiscard]] std::string describe() const;
};

/// A list of ranges of one address family; ADD takes one address from each range set.
struct RangeSet {
  std::vector<Range> ranges;
  std::string path;  ///< "ipam.ranges[0]"
  /// AF_INET or AF_INET6; net::kFamilyGuid for a set of GUIDs (never parsed from an `ipam`
  /// object: its ranges have no gateway, and ipam::spaceOf() makes the store and the allocator
  /// treat the configuration as a GUID pool).
  int family = 0;

  /// The range holding `ip`, or nullptr.
  [[nodiscard]] const Range* find(const net::IpAddress& ip) const;
  /// Each range's describe(), joined by ", ".
  [[nodiscard]] std::string describe() const;
};

/// An address or CIDR that is never handed out (ipam.exclude[k]).
struct Exclusion {
  net::IpPrefix prefix;  ///< a bare address is stored as a /32 or /128
  std::string path;      ///< "ipam.exclude[2]"
};

/// The fixed addresses of one pod (ipam.reservations["namespace/name"]): that pod always gets
/// them, nobody else ever does.
struct Reservation {
  std::string pod;                        ///< "namespace/name"
  std::vector<net::IpAddress> addresses;  ///< at most one per range set
  std::string path;                       ///< ipam.reservations["namespace/name"]
};

/// Where a cluster pool's blocks are claimed (ipam.cluster.backend).
enum class ClusterBackend { kKubernetes, kEtcd };

/// Files the DaemonSet's installer writes for cluster mode (deploy/installer/ibcni-install).
inline constexpr std::string_view kDefaultKubeconfig = "/etc/cni/net.d/ibcni.d/ibcni.kubeconfig";
inline constexpr std::string_view kNodeNameFile = "/etc/cni/net.d/ibcni.d/node-name";

/// ipam.cluster.kubernetes: a coordination.k8s.io/v1 Lease per block.
struct KubernetesClusterConf {
  std::string kubeconfig = std::string(kDefaultKubeconfig);
  std::string context;  ///< empty: the kubeconfig's current-context
  std::string leaseNamespace = "kube-system";
};

/// ipam.cluster.etcd: a key per block, through etcd's v3 JSON gateway.
struct EtcdClusterConf {
  std::vector<std::string> endpoints;  ///< "http(s)://host:port", at least one
  std::string prefix = "/ibcni/";      ///< ends in '/'
  std::string caFile;
  std::string certFile;
  std::string keyFile;
};

/// ipam.cluster: one address pool shared by every node; each node claims aligned blocks of the
/// range sets through the backend and allocates inside its own blocks with the node-local store.
struct ClusterConf {
  std::string path = "ipam.cluster";          ///< the object's field path in messages: "guidPool.cluster"
  std::string poolKeysPath = "ipam.cluster";  ///< the object with the pool and blockSize keys: "guidPool"
  ClusterBackend backend = ClusterBackend::kKubernetes;
  std::string pool;                 ///< the network name unless ipam.cluster.pool is given
  std::string poolPath;             ///< "ipam.cluster.pool", or "the network name" when defaulted
  std::uint32_t blockSize = 32;     ///< addresses per block: a power of two
  std::string nodeName;             ///< empty: kNodeNameFile, else the host name
  std::chrono::milliseconds timeout{5000};
  std::chrono::seconds releaseAfter{600};   ///< an empty block is given back after this
  /// How long a hold is good without the backend confirming it: the node's liveness (etcd lease
  /// TTL, Lease leaseDurationSeconds); ADD confirms its holds past it (less a margin).
  std::chrono::seconds leaseDuration{300};
  std::size_t minBlocksPerNode = 0;         ///< empty blocks a node keeps per range set (warm)
  KubernetesClusterConf kubernetes;
  EtcdClusterConf etcd;
};

/// "kubernetes" / "etcd"
[[nodiscard]] std::string_view clusterBackendName(ClusterBackend backend);

/// A Kubernetes node name (a DNS-1123 subdomain: 1-253 of a-z 0-9 '-' '.', starting and ending
/// with a letter or digit): ipam.cluster.nodeName, the node-name file, the host name.
[[nodiscard]] bool isNodeName(std::string_view s);

/// The canonical `ipam` object.
struct IpamConfig {
  std::string type;                 ///< "ibcni-ipam"
  std::vector<RangeSet> rangeSets;  ///< legacy single-range keys first, then `ranges`
  std::vector<cni::Route> routes;
  cni::Dns dns;         ///< ipam.dns as given: each field it sets replaces resolvConf's (resultDns)
  bool dnsDomainSet = false;  ///< ipam.dns.domain was given (an empty domain replaces resolvConf's too)
  std::string dataDir;  ///< empty: the caller's default
  std::vector<Exclusion> exclude;
  std::vector<Reservation> reservations;  ///< sorted by pod
  std::string resolvConf;  ///< ipam.resolvConf's path, read by ADD (resultDns), not by the parse
  std::vector<std::string> warnings;  ///< keys ignored, exclusions outside every range, ...
  /// {"cniVersion", "name", "ipam"} of the request, as JSON: what the pool's directory keeps
  /// (network.json), so that `ibcni reconcile` can reclaim the pool without the runtime's files.
  std::string networkFile;
  /// ipam.cluster: absent = node-local (every node allocates from the whole range on its own).
  std::optional<ClusterConf> cluster;

  /// The reservation of `pod` ("namespace/name"), or nullptr.
  [[nodiscard]] const Reservation* reservationOf(const std::string& pod) const;
};

/// Parses just an embedded IPAM's `ipam` object, given as JSON text.
/// @return error 6 when the text is not a JSON object, 7 naming the field path otherwise.
[[nodiscard]] cni::Result<IpamConfig> parseIpamConfig(std::string_view ipamJson);

/// Parses resolv.conf text the way host-local does (nameserver, domain, search, options).
[[nodiscard]] cni::Dns parseResolvConf(std::string_view text);

}  // namespace ibcni::config
