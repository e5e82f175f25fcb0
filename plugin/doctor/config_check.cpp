// SPDX-License-Identifier: Apache-2.0
#include "plugin/doctor/config_check.h"
#include "plugin/doctor/cluster_check.h"
#include "plugin/doctor/guid_pool_check.h"

#include <algorithm>
#include <cstddef>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "plugin/commands/commands.h"
#include "plugin/modes/verbs_check.h"
#include "ibcni/config/net_conf.h"
#include "plugin/invocation.h"
#include "plugin/delegate/exec.h"
#include "plugin/modes/attachment_mode.h"
#include "plugin/modes/sriov_vf.h"
#include "ipam/embedded_ipam.h"

namespace ibcni::doctor {

namespace {

using nlohmann::json;

constexpr const char* kResourceNameAnnotation = "k8s.v1.cni.cncf.io/resourceName";
// Any valid GUID: it only tells whether a VF without one would be accepted when the pod gives one.
constexpr std::uint64_t kStandInGuid = 0x0200000000000001ULL;
constexpr const char* kStandInPci = "0000:00:00.0";

// The ibcni network config inside `text`, and the NAD's resource name.
struct Extracted {
  std::string config;
  std::string resourceName;
};

std::optional<Extracted> extract(std::string_view text, ConfigReport& r) {
  const std::string howTo =
      "give a NetworkAttachmentDefinition as `kubectl get net-attach-def NAME -o json` prints it, or the "
      "network config itself";
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    r.problems.push_back({"the file is not a JSON object (YAML is not read)", howTo});
    return std::nullopt;
  }
  Extracted out;
  if (auto spec = j.find("spec"); spec != j.end() && spec->is_object()) {
    auto cfg = spec->find("config");
    if (cfg == spec->end() || !cfg->is_string()) {
      r.problems.push_back({"the NetworkAttachmentDefinition has no spec.config string", howTo});
      return std::nullopt;
    }
    if (auto md = j.find("metadata"); md != j.end() && md->is_object()) {
      if (auto an = md->find("annotations"); an != md->end() && an->is_object()) {
        if (auto rn = an->find(kResourceNameAnnotation); rn != an->end() && rn->is_string()) {
          out.resourceName = rn->get<std::string>();
        }
      }
    }
    j = json::parse(cfg->get<std::string>(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      r.problems.push_back({"spec.config of the NetworkAttachmentDefinition is not a JSON object",
                            "fix the NAD's spec.config: it must be the network config as a JSON string"});
      return std::nullopt;
    }
  }
  if (auto plugins = j.find("plugins"); plugins != j.end() && plugins->is_array()) {
    // A config list: the ibcni entry, with the list's cniVersion and name (as libcni passes them).
    std::string types;
    for (const auto& p : *plugins) {
      const std::string type = p.is_object() && p.contains("type") && p["type"].is_string() ? p["type"].get<std::string>()
                                                                                            : std::string("?");
      if (type == "ibcni") {
        json one = p;
        for (const char* key : {"cniVersion", "name"}) {
          if (j.contains(key)) {
            one[key] = j[key];
          }
        }
        out.config = one.dump();
        return out;
      }
      types += (types.empty() ? "" : ", ") + type;
    }
    r.problems.push_back({"the config list has no plugin of type ibcni (it has " + (types.empty() ? "none" : types) + ")",
                          "add an ibcni entry to \"plugins\", or check that this is the right network"});
    return std::nullopt;
  }
  const std::string type = j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "";
  if (type != "ibcni") {
    r.problems.push_back({"type = \"" + type + "\": this network is not ibcni's",
                          "set \"type\": \"ibcni\", or check this network with its own plugin"});
    return std::nullopt;
  }
  out.config = j.dump();
  return out;
}

// True when the config names no device: the device plugin hands one out per pod (Multus injects
// deviceID), so every VF it could hand out is a candidate.
bool devicePluginPicks(const std::string& config) {
  json j = json::parse(config, nullptr, false);
  if (j.value("mode", std::string("sriov")) == "ipoib") {
    return false;
  }
  for (const char* key : {"deviceID", "pciBusID", "device"}) {
    if (j.contains(key)) {
      return false;
    }
  }
  auto rc = j.find("runtimeConfig");
  return rc == j.end() || !rc->is_object() || !rc->contains("deviceID");
}

// The verbs check ADD would run for `dev`, from the host: findings as text.
std::vector<std::string> verbsFindings(const ConfigCheckInputs& in, const plugin::Invocation& inv,
                                       const plugin::HostDevice& dev) {
  std::vector<std::string> out;
  const auto& vc = inv.conf.verbsCheck;
  if (vc.mode == config::VerbsCheck::Mode::kOff || in.deps.verbs == nullptr) {
    return out;
  }
  // ADD's rule for a device without an RDMA device (or one the pod could not see), as ADD judges it.
  const auto facts = plugin::rdmaFacts(in.deps, in.host, inv, dev.pciAddress, dev.link,
                                       dev.rdma ? dev.rdma->name : std::string(), dev.rdma && dev.rdma->isolate);
  if (auto absent = plugin::judgeRdmaPresence(facts)) {
    out.push_back(absent->problem + " (fix: " + absent->fix + ")");
    return out;
  }
  if (!dev.rdma) {
    return out;
  }
  plugin::VerbsExpectations want;
  want.device = dev.rdma->name;
  want.port = dev.rdma->port;
  want.pkey = dev.ipoibChild ? std::optional<net::Pkey>(dev.ipoibChild->pkey.partition()) : inv.conf.pkey;
  want.qpProbe = vc.qpProbe;
  verbs::ProbeRequest req;
  req.netnsPath = in.verbsNetnsPath;
  req.device = want.device;
  req.port = want.port;
  req.qpProbe = vc.qpProbe;
  req.timeout = std::chrono::milliseconds(std::max<std::uint32_t>(vc.timeoutMs, 10000));
  auto res = in.deps.verbs->probe(req);
  if (!res) {
    out.push_back("the verbs probe of " + want.device + " did not complete: " + res.error().describe());
    return out;
  }
  for (const auto& f : plugin::evaluateVerbs(*res, want)) {
    out.push_back(f.problem + " (fix: " + f.fix + ")");
  }
  return out;
}

// ADD's verdict on one device: resolve() as ADD runs it, a retry with a GUID when the config gives
// none, then the verbs check.
CandidateReport tryDevice(const ConfigCheckInputs& in, plugin::Invocation inv, std::string label) {
  CandidateReport c;
  c.device = std::move(label);
  plugin::ModeContext ctx{inv, in.deps, in.host};
  auto& mode = plugin::modeFor(ctx);
  auto dev = mode.resolve(ctx);
  const bool guidGiven = inv.conf.runtime.infinibandGuid || inv.conf.argsGuid || !inv.cniArgs.guid.empty();
  if (!dev && inv.conf.mode == config::Mode::kSriov && !guidGiven) {
    plugin::Invocation withGuid = inv;
    withGuid.conf.runtime.infinibandGuid = net::Guid{kStandInGuid};
    plugin::ModeContext ctx2{withGuid, in.deps, in.host};
    if (auto again = mode.resolve(ctx2); again) {
      c.needsGuid = true;
      dev = std::move(again);
    }
  }
  if (!dev) {
    c.problem = errorText(dev.error());
    return c;
  }
  if (inv.conf.mode == config::Mode::kSriov && inv.conf.pkey && dev->rdma) {
    if (auto member = plugin::checkVfPkey(ctx, *dev->rdma, *inv.conf.pkey, dev->pciAddress); !member) {
      if (!guidGiven && !c.needsGuid) {
        c.problem = errorText(member.error());
        return c;
      }
      // ADD checks the table after setting the pod's GUID, by which the subnet manager may place
      // the VF in other partitions: not a verdict yet.
      c.warnings.push_back("now: " + member.error().msg + " (ADD checks again once the pod's GUID is set)");
    }
  }
  // A VF given to a VM has no RDMA device in the host to probe.
  auto findings = mode.givesPodNetdev() ? verbsFindings(in, inv, *dev) : std::vector<std::string>{};
  if (!findings.empty() && inv.conf.verbsCheck.mode == config::VerbsCheck::Mode::kRequire) {
    std::string all;
    for (const auto& f : findings) {
      all += (all.empty() ? "" : "; ") + f;
    }
    c.problem = "verbs check (verbsCheck.mode require) fails: " + all + " [CNI error " +
                std::to_string(static_cast<int>(cni::Errc::kVerbsCheckFailed)) + "]";
    return c;
  }
  c.warnings.insert(c.warnings.end(), findings.begin(), findings.end());
  c.works = true;
  return c;
}

// The VFs a device plugin could hand out: every VF of every SR-IOV PF the node report found.
std::vector<std::pair<net::PciAddress, std::string>> nodeVfs(const ConfigCheckInputs& in) {
  std::vector<std::pair<net::PciAddress, std::string>> out;
  for (const auto& pf : in.node.sriovPfs) {
    auto pci = net::PciAddress::parse(pf.pci);
    if (!pci) {
      continue;
    }
    auto fn = in.deps.devices.pciFunction(*pci);
    if (!fn) {
      continue;
    }
    for (const auto& vf : fn->vfs) {
      out.emplace_back(vf.address, vf.address.text + " (VF " + std::to_string(vf.index) + " of " + pf.netdev + ")");
    }
  }
  return out;
}

// What STATUS checks: the state directory, the IPAM plugin. A delegated IPAM plugin is asked for
// its STATUS only when the config's version has STATUS; otherwise it must only be installed.
void checkStatus(const ConfigCheckInputs& in, const plugin::Invocation& inv, ConfigReport& r) {
  plugin::Invocation st = inv;
  st.args.command = cni::Command::kStatus;
  st.conf.device.clear();  // resolve() judged the device
  const bool delegated = !inv.conf.ipamType.empty() && inv.conf.ipamType != "ibcni-ipam";
  const bool askIpam = !delegated || cni::hasGcAndStatus(inv.conf.version);
  if (!askIpam) {
    st.conf.ipamType.clear();
  }
  if (auto s = plugin::cmdStatus(st, in.deps); !s) {
    r.problems.push_back({"ADD could not be serviced: " + errorText(s.error()),
                          "see the message; `CNI_COMMAND=STATUS ibcni < config` gives the same answer"});
    return;
  }
  r.ok.push_back("stateDir " + inv.conf.stateDir + " is writable");
  if (inv.conf.ipamType.empty()) {
    r.ok.push_back("no IPAM: the interface gets no address (layer 2 only)");
  } else if (!askIpam) {
    if (delegate::findInPath(inv.conf.ipamType, inv.args.path).empty()) {
      std::string dirs;
      for (const auto& d : inv.args.path) {
        dirs += (dirs.empty() ? "" : ":") + d;
      }
      r.problems.push_back({"ipam.type = \"" + inv.conf.ipamType + "\" is not installed in CNI_PATH (" + dirs + ")",
                            "install the IPAM plugin's binary there (its DaemonSet or package), or pass --cni-path"});
      return;
    }
    r.ok.push_back("IPAM plugin " + inv.conf.ipamType + " is installed (its STATUS is not asked: cniVersion " +
                   inv.conf.cniVersion + " predates STATUS)");
  } else {
    r.ok.push_back("IPAM " + inv.conf.ipamType + " is ready (STATUS)");
  }
}

// ipam.cluster: who this node is, whether it can talk to the backend (libcurl, kubeconfig, one
// timed list call), which blocks it holds by its ledger and by the backend, and whether its holds
// are kept confirmed within the lease.
void checkCluster(const ConfigCheckInputs& in, const plugin::Invocation& inv, ConfigReport& r) {
  const auto& parsed = inv.conf.embeddedIpam;
  if (inv.conf.ipamType != config::kEmbeddedIpamType || !parsed || !*parsed || !(**parsed).cluster) {
    return;
  }
  const config::ClusterConf& c = *(**parsed).cluster;
  const std::string poolText =
      "cluster pool " + cni::quoted(c.pool) + " (" + std::string(config::clusterBackendName(c.backend)) + ")";
  PoolLister pools;
  if (in.clusterPools) {
    pools = [&] { return in.clusterPools(ipamRequest(inv)); };
  }
  r.cluster = checkClusterPool(in, c, poolText, pools, r);
}

// The config as ADD parses it (parseNadConfig); a refusal is the report's problem.
std::optional<config::NetConf> parseAsAdd(const std::string& config, ConfigReport& r) {
  auto conf = parseNadConfig(config, cni::Command::kAdd);
  if (!conf) {
    r.problems.push_back({"ADD would refuse the config: " + errorText(conf.error()),
                          "fix the field the message names in the NetworkAttachmentDefinition's config"});
    return std::nullopt;
  }
  return std::move(*conf);
}

// The ADD the doctor imagines for the config.
plugin::Invocation doctorInvocation(const ConfigCheckInputs& in, config::NetConf conf, const std::string& rawConfig) {
  plugin::Invocation inv;
  inv.args.command = cni::Command::kAdd;
  inv.args.containerId = "ibcni-doctor";
  inv.args.ifName = "net1";
  inv.args.path = in.cniPath;
  inv.conf = std::move(conf);
  inv.rawStdin = rawConfig;
  return inv;
}

// Every VF the device plugin could hand out, each tried as ADD would try it.
void tryNodeVfs(const ConfigCheckInputs& in, const plugin::Invocation& inv, ConfigReport& r) {
  auto vfs = nodeVfs(in);
  if (vfs.empty()) {
    r.problems.push_back(
        {"no SR-IOV VF on this node for a device plugin to hand out" +
             (r.resourceName.empty() ? std::string() : " as " + r.resourceName),
         "enable VFs on the InfiniBand PF (echo N > /sys/class/net/<pf>/device/sriov_numvfs, or the NIC "
         "operator's policy) and run the SR-IOV device plugin with a resource for them"});
  }
  for (auto& [pci, label] : vfs) {
    plugin::Invocation one = inv;
    one.conf.deviceId = pci;
    r.candidates.push_back(tryDevice(in, std::move(one), std::move(label)));
  }
  if (!vfs.empty() && r.resourceName.empty()) {
    r.problems.push_back({"the config names no device and no resourceName annotation was found: nothing "
                          "will hand the pod a VF",
                          "add the annotation k8s.v1.cni.cncf.io/resourceName (the device plugin's resource) to "
                          "the NetworkAttachmentDefinition",
                          true});
  }
}

// How the config names its device.
std::string configuredDevice(const config::NetConf& conf) {
  return conf.mode == config::Mode::kIpoib
             ? (conf.master.empty() ? "rdmaDevice " + conf.rdmaDevice + " port " + std::to_string(conf.port)
                                    : "master " + conf.master)
             : (conf.deviceId ? "deviceID " + conf.deviceId->text : "device " + conf.device);
}

// The verdict over the candidates; the number that would be accepted.
std::ptrdiff_t judgeCandidates(bool pick, ConfigReport& r) {
  const auto good = std::count_if(r.candidates.begin(), r.candidates.end(), [](const auto& c) { return c.works; });
  if (!r.candidates.empty() && good == 0) {
    r.problems.push_back({"no device would be accepted: " + r.candidates.front().problem,
                          "each device's line above says why; fix those, or the config"});
  } else if (pick && good > 0) {
    r.ok.push_back(std::to_string(good) + " of " + std::to_string(r.candidates.size()) + " VFs would be accepted");
  }
  return good;
}

}  // namespace

cni::Result<config::NetConf> parseNadConfig(const std::string& config, cni::Command command) {
  const bool pick = devicePluginPicks(config);
  std::string asGiven = config;
  if (pick) {
    json j = json::parse(config);
    j["deviceID"] = kStandInPci;
    asGiven = j.dump();
  }
  auto conf = config::parseNetConf(asGiven, command);
  if (conf && pick) {
    conf->deviceId.reset();
  }
  return conf;
}

cni::Result<std::string> ibcniConfigIn(std::string_view text) {
  ConfigReport scratch;
  auto ex = extract(text, scratch);
  if (!ex) {
    const Problem& p = scratch.problems.front();
    return cni::fail(cni::Errc::kInvalidConfig, p.what + ": " + p.fix);
  }
  return std::move(ex->config);
}

ConfigReport checkConfig(std::string_view text, const std::string& file, const ConfigCheckInputs& in) {
  ConfigReport r;
  r.file = file;
  try {
    auto ex = extract(text, r);
    if (!ex) {
      return r;
    }
    r.resourceName = ex->resourceName;
    const bool pick = devicePluginPicks(ex->config);
    auto conf = parseAsAdd(ex->config, r);
    if (!conf) {
      return r;
    }
    r.name = conf->name;
    r.mode = config::toString(conf->mode);
    r.ok.push_back("the config is valid (cniVersion " + conf->cniVersion + ", mode " + r.mode + ")");

    const plugin::Invocation inv = doctorInvocation(in, std::move(*conf), ex->config);
    if (pick) {
      tryNodeVfs(in, inv, r);
    } else {
      r.candidates.push_back(tryDevice(in, inv, configuredDevice(inv.conf)));
    }
    const auto good = judgeCandidates(pick, r);
    checkStatus(in, inv, r);
    checkCluster(in, inv, r);
    checkGuidPool(in, inv, r);
    r.works = good > 0 && std::none_of(r.problems.begin(), r.problems.end(),
                                       [](const Problem& p) { return !p.informational; });
  } catch (const std::exception& e) {
    r.problems.push_back({std::string("the config check stopped: ") + e.what(), "report this as a bug"});
    r.works = false;
  }
  return r;
}

}  // namespace ibcni::doctor
