// SPDX-License-Identifier: Apache-2.0
// `ibcni pools`: wiring only, like doctor_main.cpp. The reports are ibcni-ipam's (pool_report.h).
#include "plugin/cli/pools_main.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ibcni/config/net_conf.h"
#include "ibcni/os/file_io.h"
#include "plugin/invocation.h"
#include "ipam/backends/production_backends.h"
#include "ipam/embedded_ipam.h"
#include "ipam/embedded_ipam_guids.h"
#include "lib/result/result_json.h"
#include "plugin/cli/production_http.h"
#include "plugin/doctor/config_check.h"
#include "plugin/modes/sriov_vf_guid_pool.h"

namespace ibcni::plugin {

namespace {

using nlohmann::json;

// The network's parsed configuration; nullopt (said on stderr) when the file cannot be read or holds
// no ibcni network, or the configuration is refused.
std::optional<config::NetConf> readPoolsNetwork(const std::string& path) {
  auto text = os::readFile(path, std::size_t{1} << 20);
  if (!text) {
    std::fprintf(stderr, "ibcni pools: cannot read %s: %s\n", path.c_str(), text.error().describe().c_str());
    return std::nullopt;
  }
  auto config = doctor::ibcniConfigIn(*text);
  auto conf = config ? doctor::parseNadConfig(*config, cni::Command::kCheck)
                     : cni::Result<config::NetConf>(std::unexpected(config.error()));
  if (!conf) {
    std::fprintf(stderr, "ibcni pools: %s: %s [CNI error %d]\n", path.c_str(), conf.error().msg.c_str(),
                 static_cast<int>(conf.error().code));
    return std::nullopt;
  }
  return std::move(*conf);
}

// What `ibcni pools` found: each report, or the first error.
struct PoolsFound {
  std::optional<ipam::PoolReport> ipam;
  std::optional<ipam::PoolReport> guidPool;
  std::optional<std::vector<ipam::ReleasedAllocation>> guids;
};

cni::Result<PoolsFound> collectPools(const config::NetConf& conf) {
  const ipam::EmbeddedIpamOptions options = clusterCapable(productionHttpClient());
  PoolsFound found;
  if (conf.embeddedIpam && *conf.embeddedIpam && (**conf.embeddedIpam).cluster) {
    ipam::EmbeddedIpam ipam(options);
    const cni::CmdArgs args;
    const cni::CniArgs cniArgs;
    auto report = ipam.pools(ipamRequest(conf, args, cniArgs));
    if (!report) {
      return std::unexpected(report.error());
    }
    found.ipam = std::move(*report);
  }
  if (const config::GuidPoolConf* pool = guidPoolOf(conf)) {
    ipam::EmbeddedGuidPools guids(options);
    if (pool->cluster) {
      auto report = guids.pools(*pool, conf.name);
      if (!report) {
        return std::unexpected(report.error());
      }
      found.guidPool = std::move(*report);
    }
    auto held = guids.holders(guids.storeDirOf(*pool));
    if (!held) {
      return std::unexpected(held.error());
    }
    found.guids = std::move(*held);
  }
  return found;
}

json guidHoldersJson(const std::vector<ipam::ReleasedAllocation>& guids) {
  json out = json::array();
  for (const auto& a : guids) {
    out.push_back({{"guid", a.addresses.empty() ? "" : a.addresses.front()},
                   {"network", a.network},
                   {"containerID", a.containerId},
                   {"ifname", a.ifName},
                   {"pod", a.pod}});
  }
  return out;
}

std::string renderPools(const config::NetConf& conf, const PoolsFound& f, bool asJson) {
  const auto now = std::chrono::system_clock::now();
  if (asJson) {
    auto report = [](const std::optional<ipam::PoolReport>& r) {
      return r ? json::parse(ipam::printPoolReport(*r)) : json(nullptr);
    };
    return json{{"network", conf.name},
                {"ipam", report(f.ipam)},
                {"guidPool", report(f.guidPool)},
                {"guids", f.guids ? guidHoldersJson(*f.guids) : json(nullptr)}}
               .dump(2) +
           "\n";
  }
  std::string out;
  if (f.ipam) {
    out += "ipam.cluster:\n" + ipam::renderPoolReport(*f.ipam, now) + "\n";
  }
  if (f.guidPool) {
    out += "guidPool.cluster:\n" + ipam::renderPoolReport(*f.guidPool, now) + "\n";
  }
  if (f.guids) {
    out += "GUIDs this node hands out from guidPool " + guidPoolOf(conf)->pool + ": " +
           std::to_string(f.guids->size()) + "\n";
    for (const auto& a : *f.guids) {
      out += "  " + (a.addresses.empty() ? std::string("?") : a.addresses.front()) + "  network " + a.network +
             "  " + a.containerId + "/" + a.ifName + (a.pod.empty() ? "" : "  pod " + a.pod) + "\n";
    }
  }
  return out;
}

}  // namespace

int runPools(const CommandLine& line) {
  const std::string& file = line.operands.front();
  const bool asJson = line.has(kPoolsJsonFlag);
  try {
    const auto conf = readPoolsNetwork(file);
    if (!conf) {
      return 2;
    }
    const bool ipCluster = conf->embeddedIpam && *conf->embeddedIpam && (**conf->embeddedIpam).cluster;
    if (!ipCluster && guidPoolOf(*conf) == nullptr) {
      std::fprintf(stderr,
                   "ibcni pools: network %s in %s has neither ipam.cluster nor guidPool: there is no pool to list "
                   "(a node-local ibcni-ipam pool's allocations are under its dataDir; `ibcni-ipam gc` frees the "
                   "dead ones)\n",
                   conf->name.c_str(), file.c_str());
      return 2;
    }
    auto found = collectPools(*conf);
    if (!found) {
      const auto& e = found.error();
      if (asJson) {
        std::printf("%s\n", result::printError(e, "").c_str());
      } else {
        std::fprintf(stderr, "ibcni pools: %s%s [CNI error %d]\n", e.msg.c_str(),
                     e.details.empty() ? "" : (" (" + e.details + ")").c_str(), static_cast<int>(e.code));
      }
      return 1;
    }
    const std::string out = renderPools(*conf, *found, asJson);
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ibcni pools: %s\n", e.what());
    return 1;
  }
}

}  // namespace ibcni::plugin
