// SPDX-License-Identifier: Apache-2.0
#include "plugin/commands/policy_routing.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include "lib/log/log.h"

namespace ibcni::plugin {

namespace {

// The interface's table and its rules' priority; nullopt without policyRouting.
struct Policy {
  std::uint32_t table = 0;
  std::uint32_t priority = 0;
};
std::optional<Policy> policyOf(const Invocation& inv) {
  if (!inv.conf.policyRouting) {
    return std::nullopt;
  }
  return Policy{policyTable(*inv.conf.policyRouting, inv.args.ifName), inv.conf.policyRouting->priority};
}

std::string tableText(const Invocation& inv, std::uint32_t table) {
  return "table " + std::to_string(table) +
         (inv.conf.policyRouting->table ? " (policyRouting.table)"
                                        : " (derived from CNI_IFNAME=" + inv.args.ifName + ")");
}

// The address alone, as a rule's source selects it: /32 or /128.
net::IpPrefix hostPrefix(const net::IpAddress& ip) { return net::IpPrefix{ip, ip.isV4() ? 32 : 128}; }

// The rules of the pod's netns (error 102 when they cannot be listed).
cni::Result<std::vector<nl::Rule>> podRules(const Invocation& inv, Deps& deps, const os::Netns& pod) {
  auto rules = deps.netlink.listRules(pod);
  if (!rules) {
    return std::unexpected(sysError(cni::Errc::kNetlinkFailure, "cannot list the rules of netns " + inv.args.netns,
                                    rules.error()));
  }
  return std::move(*rules);
}

// "net.ipv4.conf.<if>.<key>", for messages.
std::string sysctlName(const std::string& ifName, std::string_view key) {
  return "net.ipv4.conf." + ifName + "." + std::string(key);
}

net::IpPrefix defaultRoute(int family) {
  net::IpAddress any;
  any.family = family;
  return net::IpPrefix{any, 0};
}

}  // namespace

std::uint32_t policyTable(const config::PolicyRouting& policy, std::string_view ifName) {
  if (policy.table) {
    return *policy.table;
  }
  // The name's trailing number: "net1" -> 1. None, all of the name, or 100 and above: the hash.
  const std::size_t numberAt = ifName.find_last_not_of("0123456789") + 1;  // 0 when all digits
  const std::string_view number = ifName.substr(numberAt);
  std::uint32_t n = 0;
  if (numberAt > 0 && !number.empty() && number.size() <= 2 &&
      std::from_chars(number.data(), number.data() + number.size(), n).ec == std::errc()) {
    return 100 + n;
  }
  std::uint32_t hash = 2166136261u;  // FNV-1a
  for (const char c : ifName) {
    hash = (hash ^ static_cast<std::uint8_t>(c)) * 16777619u;
  }
  return 1000 + hash % (65536 - 1000);
}

const std::vector<PolicySysctl>& policySysctls() {
  static const std::vector<PolicySysctl> sysctls = {
      {"arp_ignore", "2"},    // answer ARP only for this interface's addresses, from its subnet
      {"arp_announce", "2"},  // ask with this interface's own address
      {"rp_filter", "2"},     // loose: a reply that arrives on another rail is not dropped
      {"accept_local", "1"},  // RDMA loopback between two rails of one pod
  };
  return sysctls;
}

cni::Result<void> refuseTakenTable(const Invocation& inv, Deps& deps, const os::Netns& pod) {
  const auto policy = policyOf(inv);
  if (!policy) {
    return {};
  }
  if (deps.sysctls == nullptr) {
    return cni::fail(cni::Errc::kInvalidConfig, "policyRouting is set, but this ibcni cannot set sysctls");
  }
  // What already uses the table: a rule that looks it up, or a route in it.
  auto taken = [&](const std::string& user) {
    return cni::fail(cni::Errc::kInvalidConfig,
                     "policyRouting: " + tableText(inv, policy->table) + " is used in netns " + inv.args.netns +
                         " already (" + user +
                         "): every interface of a pod needs a table of its own; set policyRouting.table to a free "
                         "one, or rename the interface");
  };
  auto rules = podRules(inv, deps, pod);
  if (!rules) {
    return std::unexpected(rules.error());
  }
  for (const auto& rule : *rules) {
    if (rule.table == policy->table) {
      return taken(nl::describe(rule));
    }
  }
  auto routes = deps.netlink.listRoutes(pod, 0);
  if (!routes) {
    return std::unexpected(sysError(cni::Errc::kNetlinkFailure, "cannot list the routes of netns " + inv.args.netns,
                                    routes.error()));
  }
  for (const auto& route : *routes) {
    if (route.table == policy->table) {
      return taken(nl::describe(route));
    }
  }
  return {};
}

cni::Result<void> setPolicySysctls(const Invocation& inv, Deps& deps, const os::Netns& pod, os::Rollback& rollback) {
  if (!inv.conf.policyRouting) {
    return {};
  }
  auto& sysctls = *deps.sysctls;
  const std::string& ifName = inv.args.ifName;
  for (const auto& [key, value] : policySysctls()) {
    const std::string name = sysctlName(ifName, key);
    auto old = sysctls.get(pod, "ipv4", ifName, key);
    if (!old) {
      return std::unexpected(sysError(cni::Errc::kNetlinkFailure, "cannot read " + name, old.error()));
    }
    if (auto r = sysctls.set(pod, "ipv4", ifName, key, value); !r) {
      return std::unexpected(sysError(cni::Errc::kNetlinkFailure, "cannot set " + name + " to " + value, r.error()));
    }
    rollback.add("put " + name + " back to " + *old, [&sysctls, &pod, ifName, k = std::string(key), v = *old] {
      return sysctls.set(pod, "ipv4", ifName, k, v);
    });
  }
  return {};
}

std::vector<cni::Route> podRoutes(const Invocation& inv, const cni::AddResult& ipam) {
  const auto policy = policyOf(inv);
  if (!policy) {
    return ipam.routes;
  }
  std::vector<cni::Route> routes;
  for (const auto& ip : ipam.ips) {
    cni::Route link;
    link.dst = ip.address.network();
    link.table = policy->table;
    link.scope = RT_SCOPE_LINK;
    if (std::find(routes.begin(), routes.end(), link) == routes.end()) {
      routes.push_back(link);
    }
  }
  for (auto rt : ipam.routes) {
    rt.table = rt.table.value_or(policy->table);
    routes.push_back(rt);
  }
  for (const int family : {AF_INET, AF_INET6}) {
    const auto gateway = std::find_if(ipam.ips.begin(), ipam.ips.end(), [family](const cni::IpConfig& ip) {
      return ip.gateway && ip.address.address.family == family;
    });
    const bool ipamDefault = std::any_of(ipam.routes.begin(), ipam.routes.end(), [family](const cni::Route& rt) {
      return rt.dst.address.family == family && rt.dst.prefixLen == 0;
    });
    if (gateway != ipam.ips.end() && !ipamDefault) {
      cni::Route viaGateway;
      viaGateway.dst = defaultRoute(family);
      viaGateway.gw = gateway->gateway;
      viaGateway.table = policy->table;
      routes.push_back(viaGateway);
    }
  }
  return routes;
}

cni::Result<void> addPolicyRules(const Invocation& inv, Deps& deps, const os::Netns& pod,
                                 const std::vector<cni::IpConfig>& ips, state::AttachmentRecord& record,
                                 os::Rollback& rollback) {
  const auto policy = policyOf(inv);
  if (!policy) {
    return {};
  }
  auto& nl = deps.netlink;
  for (const auto& ip : ips) {
    const nl::Rule rule{hostPrefix(ip.address.address), policy->table, policy->priority};
    if (auto r = nl.addRule(pod, rule); !r) {
      return std::unexpected(sysError(cni::Errc::kNetlinkFailure,
                                      "cannot add the rule " + nl::describe(rule) + " for " + inv.args.ifName,
                                      r.error()));
    }
    rollback.add("delete the rule " + nl::describe(rule), [&nl, &pod, rule] { return nl.deleteRule(pod, rule); });
  }
  record.policyTable = policy->table;
  record.policyPriority = policy->priority;
  return {};
}

cni::Result<void> removePolicyRules(const Invocation& inv, Deps& deps, const os::Netns& pod,
                                    const std::optional<state::AttachmentRecord>& record) {
  std::optional<Policy> policy;
  if (record) {
    if (record->policyTable) {
      policy = Policy{*record->policyTable, record->policyPriority};
    }
  } else {
    policy = policyOf(inv);
  }
  if (!policy) {
    return {};
  }
  auto rules = podRules(inv, deps, pod);
  if (!rules) {
    return std::unexpected(rules.error());
  }
  for (const auto& rule : *rules) {
    if (rule.table != policy->table || rule.priority != policy->priority) {
      continue;
    }
    if (auto r = deps.netlink.deleteRule(pod, rule); !r && r.error().err != ENOENT) {
      return std::unexpected(sysError(cni::Errc::kNetlinkFailure, "cannot delete the rule " + nl::describe(rule),
                                      r.error()));
    }
    log::debug("deleted the rule {}", nl::describe(rule));
  }
  return {};
}

cni::Result<void> checkPolicyRouting(const Invocation& inv, Deps& deps, const os::Netns& pod,
                                     const state::AttachmentRecord& record, const std::vector<net::IpAddress>& ips) {
  if (!record.policyTable) {
    return {};
  }
  auto rules = podRules(inv, deps, pod);
  if (!rules) {
    return std::unexpected(rules.error());
  }
  for (const auto& ip : ips) {
    const nl::Rule rule{hostPrefix(ip), *record.policyTable, record.policyPriority};
    if (std::find(rules->begin(), rules->end(), rule) == rules->end()) {
      return cni::fail(cni::Errc::kCheckFailed, "the rule " + nl::describe(rule) + " of " + inv.args.ifName +
                                                    " is missing from netns " + inv.args.netns);
    }
  }
  if (deps.sysctls == nullptr) {
    return {};
  }
  for (const auto& [key, value] : policySysctls()) {
    auto now = deps.sysctls->get(pod, "ipv4", inv.args.ifName, key);
    if (!now) {
      return std::unexpected(
          sysError(cni::Errc::kCheckFailed, "cannot read " + sysctlName(inv.args.ifName, key), now.error()));
    }
    if (*now != value) {
      return cni::fail(cni::Errc::kCheckFailed,
                       sysctlName(inv.args.ifName, key) + " is " + *now + ", policyRouting set it to " + value);
    }
  }
  return {};
}

}  // namespace ibcni::plugin
