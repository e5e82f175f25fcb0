// SPDX-License-Identifier: Apache-2.0
// policyRouting: an interface of a multi-rail pod answers on itself. Its routes live in a table of
// its own, `from <each address> lookup <table>` rules send what leaves from its addresses there,
// and its ARP and reverse-path sysctls suit interfaces that share a subnet (docs/configuration.md
// "Multi-rail pods"). ADD, DEL and CHECK call these steps; each is a no-op without policyRouting.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ibcni/cni/error.h"
#include "ibcni/cni/result.h"
#include "ibcni/config/net_conf.h"
#include "ibcni/os/netns.h"
#include "ibcni/os/rollback.h"
#include "plugin/deps.h"
#include "plugin/invocation.h"

namespace ibcni::plugin {

/// The table of interface `ifName`: policyRouting.table when set, else one derived from the name
/// alone, so that it does not depend on the order a pod's interfaces were added. A name ending in
/// a number n below 100 (net1, ib3) gets 100 + n; any other name a hash of it in 1000-65535.
[[nodiscard]] std::uint32_t policyTable(const config::PolicyRouting& policy, std::string_view ifName);

/// The sysctls policyRouting sets on the interface (net.ipv4.conf.<if>.*), as rdma-core's
/// librdmacm.md and libfabric's multi-NIC guide give them for interfaces that share a subnet:
/// arp_ignore 2, arp_announce 2, rp_filter 2 (loose), accept_local 1.
struct PolicySysctl {
  const char* key;
  const char* value;
};
[[nodiscard]] const std::vector<PolicySysctl>& policySysctls();

/// Before anything changes: error 7 when the interface's table is used in the pod already (a rule
/// looks it up, or a route is in it): another interface's, by configuration or a clash of derived
/// numbers.
[[nodiscard]] cni::Result<void> refuseTakenTable(const Invocation& inv, Deps& deps, const os::Netns& pod);

/// Sets the interface's sysctls (policySysctls), each one's old value put back on rollback.
[[nodiscard]] cni::Result<void> setPolicySysctls(const Invocation& inv, Deps& deps, const os::Netns& pod,
                                                 os::Rollback& rollback);

/// The routes the interface gets in the pod: `ipam`'s routes without policyRouting; with it, its
/// table's: a link route to each address's subnet, the IPAM's routes (in that table unless the
/// IPAM named another), and a default route through each family's gateway unless the IPAM gave
/// one.
[[nodiscard]] std::vector<cni::Route> podRoutes(const Invocation& inv, const cni::AddResult& ipam);

/// Adds a rule for each of `ips` (a host prefix each) at policyRouting's priority, each removed on
/// rollback, and notes the table and priority in `record`.
[[nodiscard]] cni::Result<void> addPolicyRules(const Invocation& inv, Deps& deps, const os::Netns& pod,
                                               const std::vector<cni::IpConfig>& ips, state::AttachmentRecord& record,
                                               os::Rollback& rollback);

/// DEL: deletes the rules that look up the attachment's table at its priority: the record's, else
/// (no record: ADD died or failed half-way) the configuration's. Nothing to delete is success.
[[nodiscard]] cni::Result<void> removePolicyRules(const Invocation& inv, Deps& deps, const os::Netns& pod,
                                                  const std::optional<state::AttachmentRecord>& record);

/// CHECK: the record's rule for each of `ips`, its table's routes and the interface's sysctls are
/// all in the pod (error 107 naming what is missing).
[[nodiscard]] cni::Result<void> checkPolicyRouting(const Invocation& inv, Deps& deps, const os::Netns& pod,
                                                   const state::AttachmentRecord& record,
                                                   const std::vector<net::IpAddress>& ips);

}  // namespace ibcni::plugin
