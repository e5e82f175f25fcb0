// SPDX-License-Identifier: Apache-2.0
// The networks of a schedule (NetworkAttachmentDefinitions as the checker models them), the
// configuration changes a step can make to them, and the address arithmetic the invariants need
// (IPv4 only: every range of the schedules is IPv4).
//
//   n1, n2  one pool "shared" over [[10.77.0.0/26]], blockSize 8, exclude 10.77.0.60/30,
//           reservations chaos/sts-0 = 10.77.0.20, chaos/sts-1 = 10.77.0.45
//   n3      its own pool (ipam.cluster.pool left out: the network's name) over [[10.78.0.0/27]],
//           blockSize 4
//   g1, g2  sriov mode's guidPool: one pool "gshared" of VF GUIDs 02:00:00:00:00:c7:00:00-...:1f,
//           blockSize 4 (8 blocks), on the address networks' cluster backend (in 1 of 2 schedules)
//
// Changes (`config change=...`, reverted by `revert net=...`):
//   widen-n1    n1's range set gets a second subnet 10.77.1.0/26 (the pool's shape changes)
//   resv-n2     n2's reservations become {chaos/sts-0: 10.77.0.21} (n1 and n2 then disagree)
//   n3-overlap  n3 draws from a pool "other" over [[10.77.0.0/26]], blockSize 8: two pools over
//               overlapping ranges
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ibcni::chaos {

struct NetworkDef {
  std::string name;         ///< symbolic: "n1"
  std::string pool;         ///< symbolic pool: "shared", "n3", "other"
  bool poolKey = true;      ///< false: ipam.cluster.pool left out (the pool is the network's name)
  std::vector<std::vector<std::string>> rangeSets;  ///< subnets per range set
  int blockSize = 8;
  std::vector<std::string> exclude;
  std::map<std::string, std::string> reservations;  ///< "chaos/sts-0" -> "10.77.0.20"
  bool guid = false;        ///< a guidPool network (sriov mode's VF GUIDs): no address ranges
  std::string guidRange;    ///< guidPool.range "FIRST-LAST"

  auto operator<=>(const NetworkDef&) const = default;
};

/// The network as every schedule starts with it ("n1", "n2", "n3", "g1", "g2").
[[nodiscard]] NetworkDef baseNetwork(const std::string& name);
/// The networks of a schedule with `count` address networks: n1, n2[, n3][, g1, g2 with `guids`].
[[nodiscard]] std::vector<std::string> networkNames(int count, bool guids = false);
/// Every change a `config` step can make, and the network it changes.
[[nodiscard]] const std::map<std::string, std::string>& configChanges();
/// `def` after `change` (which must be one of configChanges() for def's network).
[[nodiscard]] NetworkDef applyChange(const NetworkDef& def, const std::string& change);
/// An address a pod of `net` may ask for with CNI_ARGS IP= (never reserved nor excluded); for a
/// GUID network a GUID of its range (CNI_ARGS GUID=).
[[nodiscard]] std::vector<std::string> requestableAddresses(const std::string& net);

// --- IPv4 arithmetic ---

/// "10.77.0.9" -> host-order value; std::nullopt when not an IPv4 address.
[[nodiscard]] std::optional<std::uint32_t> parseIpv4(const std::string& text);
[[nodiscard]] std::string ipv4Text(std::uint32_t address);

struct Cidr {
  std::uint32_t network = 0;
  int prefix = 32;
  [[nodiscard]] std::uint32_t first() const { return network; }
  [[nodiscard]] std::uint32_t last() const;
  [[nodiscard]] bool contains(std::uint32_t a) const { return a >= first() && a <= last(); }
};
[[nodiscard]] std::optional<Cidr> parseCidr(const std::string& text);

/// Why `address` may not be handed out by `def` at all ("" when it may): outside every range,
/// a network/broadcast/gateway address (gateway = network + 1, host-local's default), excluded.
[[nodiscard]] std::string forbiddenReason(const NetworkDef& def, std::uint32_t address);
/// The addresses `def` hands out to pods without a reservation: its ranges minus network,
/// broadcast, gateway, excluded and reserved addresses.
[[nodiscard]] std::set<std::uint32_t> allocatable(const NetworkDef& def);
/// The GUIDs of a GUID network's range, [first, last].
[[nodiscard]] std::pair<std::uint64_t, std::uint64_t> guidRangeOf(const NetworkDef& def);
/// Why `guid` may not be handed out by the GUID network `def` ("" when it may): not a GUID, outside
/// its range, the all-zero or all-ones GUID.
[[nodiscard]] std::string guidForbiddenReason(const NetworkDef& def, const std::string& guid);
/// Whether two definitions' ranges share an address.
[[nodiscard]] bool rangesOverlap(const NetworkDef& a, const NetworkDef& b);

}  // namespace ibcni::chaos
