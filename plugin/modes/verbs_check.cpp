// SPDX-License-Identifier: Apache-2.0
#include "modes/verbs_check.h"

#include <algorithm>

#include "log/log.h"

namespace ibcni::plugin {

namespace {

constexpr int kPortActive = 4;
constexpr int kPortActiveDefer = 5;
constexpr int kPhysLinkUp = 5;
constexpr int kPhysDisabled = 3;
// 0xffff is the permissive LID: a port reports it when no subnet manager has given it one.
constexpr std::uint16_t kPermissiveLid = 0xffff;

const char* portStateName(int s) {
  switch (s) {
    case 1:
      return "DOWN";
    case 2:
      return "INIT";
    case 3:
      return "ARMED";
    case 4:
      return "ACTIVE";
    case 5:
      return "ACTIVE_DEFER";
    default:
      return "NOP";
  }
}

const char* physStateName(int s) {
  switch (s) {
    case 1:
      return "Sleep";
    case 2:
      return "Polling";
    case 3:
      return "Disabled";
    case 4:
      return "PortConfigurationTraining";
    case 5:
      return "LinkUp";
    case 6:
      return "LinkErrorRecovery";
    case 7:
      return "PhyTest";
    default:
      return "unknown";
  }
}

// The RoCE v2 GID of an address: IPv4 as ::ffff:a.b.c.d, IPv6 as itself.
std::array<std::uint8_t, 16> gidOf(const net::IpAddress& ip) {
  std::array<std::uint8_t, 16> g{};
  if (ip.isV4()) {
    g[10] = 0xff;
    g[11] = 0xff;
    for (int i = 0; i < 4; ++i) {
      g[static_cast<std::size_t>(12 + i)] = ip.bytes[static_cast<std::size_t>(i)];
    }
  } else {
    for (std::size_t i = 0; i < 16; ++i) {
      g[i] = ip.bytes[i];
    }
  }
  return g;
}

}  // namespace

std::vector<VerbsFinding> evaluateVerbs(const verbs::ProbeResult& result, const VerbsExpectations& want) {
  std::vector<VerbsFinding> out;
  const std::string where = want.device + " port " + std::to_string(want.port);
  if (!result.available) {
    out.push_back({"libibverbs", "verbs check unavailable: libibverbs.so.1 cannot be loaded (" +
                                     result.unavailableReason + ")",
                   "install rdma-core's libibverbs1 and ibverbs-providers on the node, or set verbsCheck.mode to "
                   "\"off\""});
    return out;
  }
  if (std::find(result.devices.begin(), result.devices.end(), want.device) == result.devices.end()) {
    std::string seen;
    for (const auto& d : result.devices) {
      seen += (seen.empty() ? "" : ", ") + d;
    }
    out.push_back({"device", "RDMA device " + want.device + " is not visible in the pod's network namespace (it sees " +
                                 (seen.empty() ? std::string("none") : seen) + ")",
                   "in exclusive RDMA netns mode the device must move with the interface (rdmaIsolation); in shared "
                   "mode check that the RDMA driver (mlx5_ib, ib_uverbs) is loaded; a software device (rxe, siw) "
                   "is removed when its netdev changes namespace: create it again on the pod's interface"});
    return out;
  }
  if (!result.opened || !result.port) {
    out.push_back({"open", "cannot open " + want.device + (result.openError.empty() ? "" : ": " + result.openError),
                   "the pod needs its /dev/infiniband/uverbsN (given by the RDMA device plugin); check that ib_uverbs "
                   "is loaded"});
    return out;
  }
  const verbs::PortFacts& p = *result.port;
  if (p.state != kPortActive && p.state != kPortActiveDefer) {
    std::string fix = p.state == 2
                          ? "the port is up but no subnet manager has activated it: run OpenSM or UFM on the fabric "
                            "(with virtualization enabled for VFs) and give the VF a valid GUID"
                          : p.state == 3 ? "the subnet manager has not finished configuring the port; wait, or check the "
                                           "SM's log"
                                         : "no link: check the cable and switch port, the netdev's carrier, and "
                                           "linkState (disable forces it down)";
    out.push_back({"port state", where + " is " + portStateName(p.state) + ", not ACTIVE", fix});
  }
  if (p.physState != 0 && p.physState != kPhysLinkUp) {
    out.push_back({"physical state", where + " physical state is " + physStateName(p.physState) + ", not LinkUp",
                   p.physState == kPhysDisabled
                       ? "the port is disabled: enable it (ibportstate, or the switch side); for a VF, linkState "
                         "\"disable\" does this"
                       : "check the cable, the switch port and the HCA firmware"});
  }
  if (p.linkLayer == verbs::LinkLayer::kInfiniband) {
    if (p.lid == 0 || p.lid == kPermissiveLid) {
      out.push_back({"LID", where + " has LID " + std::to_string(p.lid) + ": no subnet manager has assigned it an address",
                     "run OpenSM or UFM on the fabric"});
    }
    if (p.smLid == 0) {
      out.push_back({"SM", where + " knows no subnet manager (SM LID 0)",
                     "start a subnet manager (opensm, UFM) reachable on this fabric"});
    }
    if (p.portGuid == 0) {
      out.push_back({"GUID", where + " has port GUID 0",
                     "give the VF a GUID (runtimeConfig.infinibandGUID / network-selection \"infiniband-guid\")"});
    }
  }
  if (want.pkey) {
    const bool member =
        std::any_of(p.pkeys.begin(), p.pkeys.end(), [&](net::Pkey k) { return k.samePartition(*want.pkey); });
    if (!member) {
      std::string table;
      for (auto k : p.pkeys) {
        table += (table.empty() ? "" : ", ") + k.hex();
      }
      out.push_back({"pkey",
                     "pkey " + want.pkey->hex() + " is not in the pkey table of " + where + " (" +
                         (table.empty() ? std::string("empty") : table) + ")",
                     "add the port's GUID to that partition in the subnet manager (OpenSM partitions.conf, UFM)"});
    }
  }
  if (p.linkLayer == verbs::LinkLayer::kEthernet) {
    for (const auto& ip : want.ips) {
      auto g = gidOf(ip);
      const bool found = std::any_of(p.gids.begin(), p.gids.end(), [&](const verbs::Gid& gid) {
        return gid.raw == g && (gid.type.empty() || gid.type == "RoCE v2");
      });
      if (!found) {
        out.push_back({"RoCE GID", "no RoCE v2 GID of " + where + " carries " + ip.toString(),
                       "the GID table follows the addresses of the RDMA device's netdev: is the address on that "
                       "netdev, and is RoCE v2 enabled?"});
      }
    }
  }
  if (want.qpProbe && result.qpProbeOk && !*result.qpProbeOk) {
    out.push_back({"QP probe", "a UD QP on " + where + " did not reach RTS: " + result.qpProbeError,
                   "check the pod's access to /dev/infiniband, its memlock limit (ulimit -l) and the port state"});
  }
  return out;
}

cni::Result<void> runVerbsCheck(const Invocation& inv, Deps& deps, const std::string& netnsPath,
                                const VerbsExpectations& want) {
  const auto& vc = inv.conf.verbsCheck;
  if (vc.mode == config::VerbsCheck::Mode::kOff || want.device.empty() || deps.verbs == nullptr) {
    return {};
  }
  verbs::ProbeRequest req;
  req.netnsPath = netnsPath;
  req.device = want.device;
  req.port = want.port;
  req.qpProbe = vc.qpProbe;
  req.timeout = std::chrono::milliseconds(vc.timeoutMs);
  std::vector<VerbsFinding> findings;
  if (auto r = deps.verbs->probe(req); !r) {
    findings.push_back({"probe", "the verbs check did not complete: " + r.error().describe(),
                        r.error().err == ETIMEDOUT ? "raise verbsCheck.timeoutMs, or look for a hung RDMA driver"
                                                   : "see the log"});
  } else {
    findings = evaluateVerbs(*r, want);
  }
  if (findings.empty()) {
    log::info("verbs check: {} port {} is usable from {}", want.device, want.port, netnsPath);
    return {};
  }
  std::string msg;
  for (const auto& f : findings) {
    msg += (msg.empty() ? "" : "; ") + f.problem + " (fix: " + f.fix + ")";
  }
  if (vc.mode == config::VerbsCheck::Mode::kWarn) {
    log::warn("verbs check: {}", msg);
    return {};
  }
  return cni::fail(cni::Errc::kVerbsCheckFailed, "verbs check failed: " + msg);
}

}  // namespace ibcni::plugin
