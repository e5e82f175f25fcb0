// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ibcni/ipam/ipam.h"

namespace ibcni::testing {

/// An IPAM plugin in memory: hands out a fixed result, tracks allocations per
/// (containerID, ifname), records every call and fails a verb on request.
class FakeIpam final : public ipam::Ipam, public ipam::IpamUpkeep {
 public:
  FakeIpam() {
    result.ips.push_back({*net::IpPrefix::parse("10.1.2.3/24"), net::IpAddress::parse("10.1.2.1"), std::nullopt});
    cni::Route r;
    r.dst = *net::IpPrefix::parse("192.168.0.0/16");
    result.routes.push_back(r);
  }

  cni::AddResult result;
  std::set<std::pair<std::string, std::string>> allocations;
  std::vector<std::string> calls;  ///< "ADD c1 net1"
  std::map<std::string, cni::Error> failures;  ///< verb → error, until cleared

  cni::Result<cni::AddResult> add(const ipam::Request& r) override {
    if (auto e = record("ADD", r)) {
      return std::unexpected(*e);
    }
    allocations.insert({r.args.containerId, r.args.ifName});
    return result;
  }
  cni::Result<void> del(const ipam::Request& r) override {
    if (auto e = record("DEL", r)) {
      return std::unexpected(*e);
    }
    allocations.erase({r.args.containerId, r.args.ifName});
    return {};
  }
  cni::Result<void> check(const ipam::Request& r) override {
    if (auto e = record("CHECK", r)) {
      return std::unexpected(*e);
    }
    if (!allocations.contains({r.args.containerId, r.args.ifName})) {
      return cni::fail(cni::Errc::kInvalidConfig, "no allocation for " + r.args.containerId);
    }
    return {};
  }
  cni::Result<void> gc(const ipam::Request& r) override {
    if (auto e = record("GC", r)) {
      return std::unexpected(*e);
    }
    return {};
  }
  cni::Result<void> status(const ipam::Request& r) override {
    if (auto e = record("STATUS", r)) {
      return std::unexpected(*e);
    }
    return {};
  }
  /// Answers `reclaimed` (a dry run the same), recording "RECLAIM <network> <dataDir> [dry]".
  cni::Result<ipam::ReclaimOutcome> reclaimPool(const ipam::Request& r, bool dryRun) override {
    const auto* parsed = r.settings;
    const std::string dir = parsed && *parsed ? (*parsed)->dataDir : "";
    calls.push_back("RECLAIM " + std::string(r.network) + " " + dir + (dryRun ? " dry" : ""));
    if (auto it = failures.find("RECLAIM"); it != failures.end()) {
      return std::unexpected(it->second);
    }
    return ipam::ReclaimOutcome{reclaimed, std::nullopt};
  }
  std::vector<ipam::ReleasedAllocation> reclaimed;  ///< what reclaimPool() answers

 private:
  std::optional<cni::Error> record(const std::string& verb, const ipam::Request& r) {
    calls.push_back(verb + " " + r.args.containerId + " " + r.args.ifName);
    if (auto it = failures.find(verb); it != failures.end()) {
      return it->second;
    }
    return std::nullopt;
  }
};

}  // namespace ibcni::testing
