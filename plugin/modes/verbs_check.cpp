// SPDX-License-Identifier: Apache-2.0
#include "plugin/modes/verbs_check.h"

#include <algorithm>
#include <initializer_list>

#include "ibcni/os/text.h"
#include "lib/log/log.h"
#include "plugin/modes/sriov_vf_guid_pool.h"

namespace ibcni::plugin {

namespace {

constexpr int kPortActive = 4;
constexpr int kPortActiveDefer = 5;
constexpr int kPhysLinkUp = 5;
constexpr int kPhysDisabled = 3;
// 0xffff is the permissive LID: a port reports it when no subnet manager has given it one.
constexpr std::uint16_t kPermissiveLid = 0xffff;

// names[s - 1] for a state s from 1 to the number of names, else `other`.
const char* stateName(std::initializer_list<const char*> names, int s, const char* other) {
  if (s < 1 || static_cast<std::size_t>(s) > names.size()) {
    return other;
  }
  return names.begin()[s - 1];
}

const char* portStateName(int s) { return stateName({"DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}, s, "NOP"); }

const char* physStateName(int s) {
  return stateName(
      {"Sleep", "Polling", "Disabled", "PortConfigurationTraining", "LinkUp", "LinkErrorRecovery", "PhyTest"}, s,
      "unknown");
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

constexpr const char* kSharedModeHowTo =
    "put the node in shared RDMA netns mode (`rdma system set netns shared` while no other network namespace "
    "exists, or \"options ib_core netns_mode=1\" in /etc/modprobe.d/ib_core.conf and a reboot)";

// "deviceID = \"0000:3b:00.3\" (netdev ibp59s0v2, driver mlx5_core)"
std::string described(const RdmaFacts& f) {
  std::string what;
  if (!f.netdev.empty()) {
    what += "netdev " + f.netdev;
  }
  if (f.pciAddress) {
    what += (what.empty() ? "" : ", ") + std::string("PCI ") + f.pciAddress->text + ", driver " +
            (f.driver.empty() ? std::string("none") : f.driver);
  } else {
    what += (what.empty() ? "" : ", ") + std::string("no PCI function");
  }
  return f.subject + " (" + what + ")";
}

}  // namespace

RdmaFacts rdmaFacts(Deps& deps, const os::Netns& host, const Invocation& inv,
                    const std::optional<net::PciAddress>& pciAddress, const nl::Link& netdev, const std::string& rdmaDevice, bool rdmaMoved) {
  const auto& conf = inv.conf;
  RdmaFacts f;
  f.mode = conf.mode;
  f.netdev = netdev.name;
  f.infiniband = netdev.arpType == nl::kArphrdInfiniband;
  f.pciAddress = pciAddress;
  f.rdmaDevice = rdmaDevice;
  f.rdmaMoved = rdmaMoved;
  if (conf.mode == config::Mode::kIpoib) {
    f.subject = conf.master.empty() ? "the IPoIB parent of rdmaDevice = \"" + conf.rdmaDevice + "\", port = " +
                                          std::to_string(conf.port)
                                    : "the IPoIB parent master = \"" + conf.master + "\"";
  } else {
    f.subject = conf.deviceId ? "deviceID = \"" + conf.deviceId->text + "\""
                : !conf.device.empty() ? "device = \"" + conf.device + "\""
                                       : "the pod's device";
  }
  // Only what judgeRdmaPresence reads is looked up: an ADD whose RDMA device the pod sees pays
  // nothing more, one whose device stays in the host only the netns mode query.
  if (!rdmaDevice.empty()) {
    if (rdmaMoved) {
      return f;
    }
    if (auto m = deps.rdma.netnsMode(host); m) {
      f.netnsMode = *m;
    }
    if (f.netnsMode != rdma::NetnsMode::kExclusive) {
      return f;
    }
  }
  // A finding follows: what it names (the function, its driver, its PF).
  if (conf.mode == config::Mode::kIpoib && !f.pciAddress && !netdev.name.empty()) {
    if (auto pci = deps.devices.pciOfNetdev(netdev.name, netdev.index); pci) {
      f.pciAddress = *pci;
    }
  }
  if (f.pciAddress) {
    if (auto fn = deps.devices.pciFunction(*f.pciAddress); fn) {
      f.driver = fn->driver;
      if (fn->physfn) {
        f.pfPci = fn->physfn;
        if (auto pf = deps.devices.pciFunction(*fn->physfn); pf) {
          f.pfRdmaDevices = pf->rdmaDevices;
          for (const auto& n : pf->netdevs) {
            if (auto l = deps.netlink.linkByName(host, n); l && l->arpType == nl::kArphrdInfiniband) {
              f.pfInfiniband = true;
            }
          }
        }
      }
    }
  }
  return f;
}

std::optional<VerbsFinding> judgeRdmaPresence(const RdmaFacts& f) {
  const bool ipoib = f.mode == config::Mode::kIpoib;
  if (!f.rdmaDevice.empty()) {
    if (f.netnsMode != rdma::NetnsMode::kExclusive || f.rdmaMoved) {
      return std::nullopt;
    }
    if (ipoib) {
      return VerbsFinding{"netns", "RDMA device " + f.rdmaDevice + " of " + described(f) +
                                       " stays in the host's network namespace, and the node's RDMA subsystem is in "
                                       "exclusive netns mode, where a pod sees no RDMA device of the host (an IPoIB "
                                       "child cannot take its HCA's device along: every child shares it)",
                          std::string(kSharedModeHowTo) + "; or give RDMA pods a VF (sriov mode, rdmaIsolation)"};
    }
    return VerbsFinding{"netns", "RDMA device " + f.rdmaDevice + " of " + described(f) +
                                     " stays in the host's network namespace: the node's RDMA subsystem is in "
                                     "exclusive netns mode, where a pod sees only the RDMA devices moved into its "
                                     "namespace, and rdmaIsolation is false",
                        "set rdmaIsolation to \"auto\" (the default) or true, so that ADD moves " + f.rdmaDevice +
                            " into the pod with the interface; or " + kSharedModeHowTo};
  }
  if (ipoib) {
    return VerbsFinding{"no RDMA device",
                        described(f) + " has no RDMA device ibcni can find: the config sets no rdmaDevice and the "
                                       "parent's PCI function lists none",
                        "set rdmaDevice and port to the HCA port behind the parent (`rdma link` shows each port's "
                        "netdev), and check that the HCA's RDMA driver (mlx5_ib) is loaded"};
  }
  const bool pfRdma = f.pfPci && (f.pfInfiniband || !f.pfRdmaDevices.empty());
  if (f.infiniband || pfRdma) {
    std::string why;
    if (f.pfPci) {
      why = "it is a VF of PF " + f.pfPci->text + ", which is " +
            (f.pfInfiniband ? std::string("InfiniBand") : std::string("RDMA-capable")) +
            (f.pfRdmaDevices.empty() ? std::string() : " (RDMA device " + os::joinText(f.pfRdmaDevices, ", ") + ")") +
            ", so the VF should have an RDMA device of its own";
    } else {
      why = "its netdev is IPoIB, which an HCA's RDMA device always backs";
    }
    return VerbsFinding{
        "no RDMA device",
        described(f) + " has no RDMA device: " + why,
        "load the VF's RDMA driver (`modprobe mlx5_ib`; for other HCAs their *_ib driver) and bind the VF to its "
        "vendor driver (mlx5 VFs: mlx5_core" +
            (f.driver.empty() || f.driver == "mlx5_core" ? std::string() : "; it is bound to " + f.driver) +
            "); `rdma dev` must then list a device for " + (f.pciAddress ? f.pciAddress->text : f.netdev)};
  }
  return VerbsFinding{
      "no RDMA device",
      described(f) + " is not an RDMA-capable device: it has no RDMA device" +
          (f.pfPci ? ", and neither has its PF " + f.pfPci->text : std::string()),
      "the pod was given the wrong device: point the network's resourceName at the device plugin's RDMA resource, "
      "and set \"isRdma\": true in that resource's selectors (SR-IOV network device plugin) so that it hands out "
      "RDMA functions and mounts their /dev/infiniband devices into the pod"};
}

namespace {

// Why the probe could not look at the port at all: libibverbs cannot be loaded, the pod does not
// see the device, or the device cannot be opened. nullopt: it could.
std::optional<VerbsFinding> unreachablePort(const verbs::ProbeResult& result, const VerbsExpectations& want) {
  if (!result.available) {
    return VerbsFinding{"libibverbs", "verbs check unavailable: libibverbs.so.1 cannot be loaded (" +
                                          result.unavailableReason + ")",
                        "install rdma-core's libibverbs1 and ibverbs-providers on the node, or set verbsCheck.mode to "
                        "\"off\""};
  }
  if (std::find(result.devices.begin(), result.devices.end(), want.device) == result.devices.end()) {
    std::string seen;
    for (const auto& d : result.devices) {
      seen += (seen.empty() ? "" : ", ") + d;
    }
    return VerbsFinding{"device",
                        "RDMA device " + want.device + " is not visible in the pod's network namespace (it sees " +
                            (seen.empty() ? std::string("none") : seen) + ")",
                        "in exclusive RDMA netns mode the device must move with the interface (rdmaIsolation); in "
                        "shared mode check that the RDMA driver (mlx5_ib, ib_uverbs) is loaded; a software device "
                        "(rxe, siw) is removed when its netdev changes namespace: create it again on the pod's "
                        "interface"};
  }
  if (!result.opened || !result.port) {
    return VerbsFinding{"open", "cannot open " + want.device + (result.openError.empty() ? "" : ": " + result.openError),
                        "the pod needs its /dev/infiniband/uverbsN (given by the RDMA device plugin); check that "
                        "ib_uverbs is loaded"};
  }
  return std::nullopt;
}

// The port is ACTIVE, and its physical link up.
void judgePortState(const verbs::PortFacts& p, const std::string& where, std::vector<VerbsFinding>& out) {
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
}

// InfiniBand: the subnet manager has given the port a LID, it knows the SM, and it has a GUID.
void judgeInfiniband(const verbs::PortFacts& p, const std::string& where, std::vector<VerbsFinding>& out) {
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

// The port is a member of partition `pkey`.
void judgePkey(const verbs::PortFacts& p, const VerbsExpectations& want, const std::string& where,
               std::vector<VerbsFinding>& out) {
  const net::Pkey pkey = *want.pkey;
  const bool member = std::any_of(p.pkeys.begin(), p.pkeys.end(), [&](net::Pkey k) { return k.samePartition(pkey); });
  if (!member) {
    std::string table;
    for (auto k : p.pkeys) {
      table += (table.empty() ? "" : ", ") + k.hex();
    }
    out.push_back({"pkey",
                   "pkey " + pkey.hex() + " is not in the pkey table of " + where + " (" +
                       (table.empty() ? std::string("empty") : table) + ")",
                   want.poolGuid.empty()
                       ? "add the port's GUID to that partition in the subnet manager (OpenSM partitions.conf, UFM)"
                       : pkeyFixForPoolGuid(want.poolGuid, want.guidPool)});
  }
}

// RoCE: each of the pod's addresses has its RoCE v2 GID.
void judgeRoceGids(const verbs::PortFacts& p, const std::vector<net::IpAddress>& ips, const std::string& where,
                   std::vector<VerbsFinding>& out) {
  for (const auto& ip : ips) {
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

}  // namespace

std::vector<VerbsFinding> evaluateVerbs(const verbs::ProbeResult& result, const VerbsExpectations& want) {
  std::vector<VerbsFinding> out;
  if (auto unreachable = unreachablePort(result, want)) {
    out.push_back(std::move(*unreachable));
    return out;
  }
  const std::string where = want.device + " port " + std::to_string(want.port);
  const verbs::PortFacts& p = *result.port;
  judgePortState(p, where, out);
  if (p.linkLayer == verbs::LinkLayer::kInfiniband) {
    judgeInfiniband(p, where, out);
  }
  if (want.pkey) {
    judgePkey(p, want, where, out);
  }
  if (p.linkLayer == verbs::LinkLayer::kEthernet) {
    judgeRoceGids(p, want.ips, where, out);
  }
  if (want.qpProbe && result.qpProbeOk && !*result.qpProbeOk) {
    out.push_back({"QP probe", "a UD QP on " + where + " did not reach RTS: " + result.qpProbeError,
                   "check the pod's access to /dev/infiniband, its memlock limit (ulimit -l) and the port state"});
  }
  return out;
}

namespace {

// The probe of `want` from inside `netnsPath`, judged.
std::vector<VerbsFinding> probeFindings(Deps& deps, const std::string& netnsPath, const config::VerbsCheck& vc,
                                        const VerbsExpectations& want) {
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
  return findings;
}

}  // namespace

cni::Result<void> runVerbsCheck(const Invocation& inv, Deps& deps, const std::string& netnsPath,
                                const RdmaFacts& facts, const VerbsExpectations& want) {
  const auto& vc = inv.conf.verbsCheck;
  if (vc.mode == config::VerbsCheck::Mode::kOff || deps.verbs == nullptr) {
    return {};
  }
  std::vector<VerbsFinding> findings;
  if (auto absent = judgeRdmaPresence(facts)) {
    findings.push_back(std::move(*absent));
  } else {
    if (want.device.empty()) {
      return {};
    }
    findings = probeFindings(deps, netnsPath, vc, want);
    if (findings.empty()) {
      log::info("verbs check: {} port {} is usable from {}", want.device, want.port, netnsPath);
      return {};
    }
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
