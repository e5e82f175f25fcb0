// SPDX-License-Identifier: Apache-2.0
#include "ibcni/os/time_text.h"
#include "ipam/pool_report.h"

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>

namespace ibcni::ipam {

namespace {

using nlohmann::json;

// A count as a JSON number while it is exact in a double, else as its decimal text (IPv6 pools).
json count(const std::string& decimal) {
  if (decimal.size() < 16) {
    return std::stoull(decimal);
  }
  return decimal;
}

json timeOrNull(const std::optional<std::chrono::system_clock::time_point>& t) {
  return t ? json(os::rfc3339(*t)) : json(nullptr);
}

json textOrNull(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

// "3d4h", "5m", "42s"
std::string age(std::chrono::system_clock::time_point then, std::chrono::system_clock::time_point now) {
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(now - then).count();
  if (secs < 0) {
    return "0s";
  }
  if (secs < 120) {
    return std::to_string(secs) + "s";
  }
  if (secs < 2 * 3600) {
    return std::to_string(secs / 60) + "m";
  }
  if (secs < 2 * 86400) {
    return std::to_string(secs / 3600) + "h" + std::to_string(secs % 3600 / 60) + "m";
  }
  return std::to_string(secs / 86400) + "d" + std::to_string(secs % 86400 / 3600) + "h";
}

std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()), 0);
    for (std::size_t i = 0; i < r.size(); ++i) {
      width[i] = std::max(width[i], r[i].size());
    }
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) {
        line += std::string(width[i] - r[i].size() + 2, ' ');
      }
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace


std::string printPoolReport(const PoolReport& r) {
  json blocks = json::array();
  for (const auto& b : r.blocks) {
    blocks.push_back({{"key", b.key},
                      {r.guids ? "range" : "cidr", textOrNull(b.cidr)},
                      {"set", b.set ? json(*b.set) : json(nullptr)},
                      {"holder", textOrNull(b.holder)},
                      {"mine", b.mine},
                      {"size", b.size},
                      {"inUse", b.inUse ? json(*b.inUse) : json(nullptr)},
                      {"claimedAt", timeOrNull(b.claimedAt)},
                      {"renewedAt", timeOrNull(b.renewedAt)},
                      {"ledger", textOrNull(b.ledgerState)},
                      {"emptyForSeconds", b.emptyForSeconds ? json(*b.emptyForSeconds) : json(nullptr)}});
  }
  json addresses = json::array();
  for (const auto& a : r.addresses) {
    addresses.push_back({{r.guids ? "guid" : "address", a.address},
                         {"holder", a.holder},
                         {"owner", textOrNull(a.owner)},
                         {"pod", textOrNull(a.pod)},
                         {"lender", textOrNull(a.lender)},
                         {"claimedAt", timeOrNull(a.claimedAt)}});
  }
  json disagreements = json::array();
  for (const auto& d : r.disagreements) {
    disagreements.push_back({{"block", d.block}, {"ledger", d.ledger}, {"backend", d.backend}});
  }
  json perSet = json::array();
  for (std::size_t i = 0; i < r.rangeSets.size(); ++i) {
    perSet.push_back({{"rangeSet", r.rangeSets[i]}, {"blocks", count(r.setBlocks.at(i))}});
  }
  json perNode = json::object();
  for (const auto& [node, n] : r.perNode) {
    perNode[node] = n;
  }
  std::size_t mine = r.perNode.contains(r.node) ? r.perNode.at(r.node) : 0;
  json out{{"network", r.network},
           {"pool", r.pool},
           {"backend", r.backend},
           {"endpoint", r.endpoint},
           {"node", r.node},
           {"nodeSource", r.nodeSource},
           {"blockSize", r.blockSize},
           {"storeDir", r.storeDir},
           {"rangeSets", perSet},
           {"totals",
            {{"blocks", count(r.totalBlocks)},
             {"claimed", r.claimedBlocks},
             {"free", count(r.freeBlocks)},
             {"mine", mine},
             {"perNode", perNode}}},
           {"blocks", blocks},
           {r.guids ? "guids" : "addresses", addresses},
           {"ledger",
            {{"present", r.ledgerPresent},
             {"confirmedAgoSeconds", r.confirmedAgoSeconds ? json(*r.confirmedAgoSeconds) : json(nullptr)},
             {"disagreements", disagreements}}},
           {"listMs", r.listTime.count()},
           {"warnings", r.warnings}};
  if (r.guids) {
    out["kind"] = "guid";  // an address pool's report stays as it was
  }
  return out.dump(2);
}

std::string renderPoolReport(const PoolReport& r, std::chrono::system_clock::time_point now) {
  std::string out = "pool " + r.pool + " (network " + r.network + "): " + r.backend + " at " + r.endpoint +
                    ", blocks of " + std::to_string(r.blockSize) + (r.guids ? " GUIDs" : " addresses") +
                    " (list took " +
                    std::to_string(r.listTime.count()) + " ms)\n";
  out += "this node: " + r.node + " (from " + r.nodeSource + "); store " + r.storeDir +
         (r.ledgerPresent ? "" : " (no ledger yet: this node holds no block)") + "\n";
  for (std::size_t i = 0; i < r.rangeSets.size(); ++i) {
    out += "range set " + std::to_string(i) + ": " + r.rangeSets[i] + ", " + r.setBlocks.at(i) + " blocks\n";
  }
  out += "\n";
  std::vector<std::vector<std::string>> rows{
      {"BLOCK", "SET", "HOLDER", "IN USE", "CLAIMED", "AGE", "RENEWED", "LEDGER", "EMPTY FOR"}};
  for (const auto& b : r.blocks) {
    rows.push_back({b.cidr.empty() ? b.key + " (not in these ranges)" : b.cidr, b.set ? std::to_string(*b.set) : "-",
                    b.holder.empty() ? "(none)" : b.holder + (b.mine ? " *" : ""),
                    (b.inUse ? std::to_string(*b.inUse) : std::string("?")) + "/" + std::to_string(b.size),
                    b.claimedAt ? os::rfc3339(*b.claimedAt) : "-", b.claimedAt ? age(*b.claimedAt, now) : "-",
                    b.renewedAt ? age(*b.renewedAt, now) + " ago" : "-", b.ledgerState.empty() ? "-" : b.ledgerState,
                    b.emptyForSeconds ? std::to_string(*b.emptyForSeconds) + "s" : "-"});
  }
  if (r.blocks.empty()) {
    out += "no block of the pool is claimed\n";
  } else {
    out += table(rows);
    out += "(* this node; IN USE is known only for this node's blocks: other nodes keep theirs locally)\n";
  }
  if (!r.addresses.empty()) {
    out += std::string(r.guids ? "\nGUIDs" : "\naddresses") + " claimed one by one (named by pods, or lent):\n";
    std::vector<std::vector<std::string>> arows{
        {r.guids ? "GUID" : "ADDRESS", "HOLDER", "OWNER", "POD", "LENT BY", "CLAIMED"}};
    for (const auto& a : r.addresses) {
      arows.push_back({a.address, a.holder, a.owner.empty() ? "-" : a.owner, a.pod.empty() ? "-" : a.pod,
                       a.lender.empty() ? "-" : a.lender, a.claimedAt ? os::rfc3339(*a.claimedAt) : "-"});
    }
    out += table(arows);
  }
  std::string nodes;
  for (const auto& [node, n] : r.perNode) {
    nodes += (nodes.empty() ? "" : ", ") + node + " " + std::to_string(n);
  }
  out += "\nblocks: " + r.totalBlocks + " in the pool, " + std::to_string(r.claimedBlocks) + " claimed, " +
         r.freeBlocks + " free; " + std::to_string(r.perNode.size()) + " node(s) hold blocks" +
         (nodes.empty() ? "" : " (" + nodes + ")") + "\n";
  if (r.ledgerPresent) {
    out += "this node's holds were last confirmed by the backend " +
           (r.confirmedAgoSeconds ? std::to_string(*r.confirmedAgoSeconds) + " s ago" : std::string("never on this boot")) +
           "\n";
  }
  for (const auto& d : r.disagreements) {
    out += "ledger and backend disagree on " + d.block + ": ledger " + d.ledger + ", backend " + d.backend +
           " (the next periodic pass or ADD settles it)\n";
  }
  for (const auto& w : r.warnings) {
    out += "warning: " + w + "\n";
  }
  return out;
}

}  // namespace ibcni::ipam
