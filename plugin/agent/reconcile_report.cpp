// SPDX-License-Identifier: Apache-2.0
#include "plugin/agent/reconcile_report.h"

#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "ibcni/os/text.h"

namespace ibcni::doctor {

std::string renderReconcileText(const plugin::ReconcileReport& report, const std::string& stamp) {
  std::string out;
  std::size_t alive = 0;
  std::size_t undone = 0;
  for (const auto& a : report.attachments) {
    if (a.action == "alive") {
      ++alive;
      continue;
    }
    undone += a.action == "undone" ? 1 : 0;
    out += fmt::format("{} ibcni reconcile: {} network={} containerID={} ifname={} netns={} device={}: {}\n", stamp,
                       a.action, a.network, a.containerId, a.ifName, a.netns, a.device, a.detail);
  }
  for (const auto& a : report.allocations) {
    std::string addresses;
    for (const auto& ip : a.addresses) {
      addresses += (addresses.empty() ? "" : ",") + ip;
    }
    if (a.kind == "guid") {
      out += fmt::format("{} ibcni reconcile: {} GUID {} of network={} containerID={} ifname={}: no ibcni record "
                         "holds it\n",
                         stamp, a.action, addresses, a.network, a.containerId, a.ifName);
      continue;
    }
    out += fmt::format("{} ibcni reconcile: {} {} of network={} containerID={} ifname={}: netns {} is gone\n", stamp,
                       a.action, addresses, a.network, a.containerId, a.ifName, a.netns);
  }
  auto joined = [](const std::vector<std::string>& v) { return v.empty() ? std::string("none") : os::joinText(v, ","); };
  const auto part = [&joined](const char* what, const std::vector<std::string>& v) {
    return v.empty() ? std::string() : std::string("; ") + what + ": " + joined(v);
  };
  for (const auto& o : report.pools) {
    const auto& p = o.upkeep;
    const bool dry = o.action != "maintained";
    out += fmt::format(
        "{} ibcni reconcile: {} cluster {}pool={} node={}: {}{}; blocks {}: {}{}{}{}{}{}{}{}\n", stamp, o.action,
        o.kind == "guid" ? "GUID " : "", p.pool,
        p.node, dry ? "claims not renewed (dry run)" : (p.renewed ? "claims renewed" : "claims NOT all renewed"),
        p.livenessRenewed ? " (WARNING: the node's liveness had lapsed: its agent did not run for a lease)" : "",
        dry ? "that would be given back" : "given back", joined(p.releasedBlocks),
        part("claims lost to other nodes", p.lostBlocks), part("claims adopted", p.adoptedBlocks),
        part("addresses given back", p.releasedAddresses), part("claims gone and claimed again", p.reclaimedBlocks),
        part("claims of gone nodes taken", p.takenOver), part("addresses lent", p.lent),
        part("loans given back", p.loansReturned));
  }
  for (const auto& d : report.restoredPools) {
    out += fmt::format("{} ibcni reconcile: {} pool directory {} from the pool index (its store was wiped: a "
                       "reboot?)\n",
                       stamp, report.dryRun ? "would give back" : "gave back", d);
  }
  for (const auto& e : report.errors) {
    out += fmt::format("{} ibcni reconcile: error: {}\n", stamp, e);
  }
  out += fmt::format("{} ibcni reconcile: {} attachments seen, {} alive, {} undone; {} allocations {}\n", stamp,
                     report.attachments.size(), alive, undone, report.allocations.size(),
                     report.allocations.empty() || report.allocations.front().action == "released"
                         ? "released"
                         : "would be released");
  return out;
}

std::string printReconcileReport(const plugin::ReconcileReport& report) {
  using nlohmann::json;
  json attachments = json::array();
  for (const auto& a : report.attachments) {
    attachments.push_back({{"action", a.action},
                           {"stateDir", a.stateDir},
                           {"network", a.network},
                           {"containerID", a.containerId},
                           {"ifname", a.ifName},
                           {"netns", a.netns},
                           {"device", a.device},
                           {"detail", a.detail}});
  }
  json allocations = json::array();
  for (const auto& a : report.allocations) {
    allocations.push_back({{"action", a.action},
                           {"dataDir", a.dataDir},
                           {"network", a.network},
                           {"containerID", a.containerId},
                           {"ifname", a.ifName},
                           {"netns", a.netns},
                           {"addresses", a.addresses},
                           {"kind", a.kind}});
  }
  json pools = json::array();
  for (const auto& o : report.pools) {
    const auto& p = o.upkeep;
    pools.push_back({{"action", o.action},
                     {"dataDir", o.dataDir},
                     {"pool", p.pool},
                     {"network", o.network},
                     {"node", p.node},
                     {"renewed", p.renewed},
                     {"livenessRenewed", p.livenessRenewed},
                     {"releasedBlocks", p.releasedBlocks},
                     {"lostBlocks", p.lostBlocks},
                     {"adoptedBlocks", p.adoptedBlocks},
                     {"releasedAddresses", p.releasedAddresses},
                     {"reclaimedBlocks", p.reclaimedBlocks},
                     {"takenOver", p.takenOver},
                     {"lent", p.lent},
                     {"loansReturned", p.loansReturned},
                     {"kind", o.kind}});
  }
  return json{{"attachments", attachments},
              {"allocations", allocations},
              {"pools", pools},
              {"restoredPools", report.restoredPools},
              {"errors", report.errors}}
      .dump(2);
}

}  // namespace ibcni::doctor
