// SPDX-License-Identifier: Apache-2.0
#include "plugin/doctor/config_check.h"

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
#include "ipam/backends/kubeconfig.h"

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

std::string errorText(const cni::Error& e) {
  return e.msg + (e.details.empty() ? "" : " (" + e.details + ")") + " [CNI error " +
         std::to_string(static_cast<int>(e.code)) + "]";
}

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
  auto& mode = plugin::modeFor(inv.conf.mode);
  plugin::ModeContext ctx{inv, in.deps, in.host};
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
  auto findings = verbsFindings(in, inv, *dev);
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

// A node hands out only from holds confirmed within leaseDurationSeconds (ipam/README.md "Cluster
// safety", I2): the agent's passes must confirm them well within it, or ADDs pay a backend call.
void checkLease(const ConfigCheckInputs& in, const config::ClusterConf& c, const ipam::PoolReport& report,
                const std::string& poolText, ConfigReport& r) {
  const auto lease = c.leaseDuration.count();
  if (in.agentInterval && *in.agentInterval == 0) {
    r.problems.push_back({poolText + ": no node agent runs (" + in.agentIntervalSource +
                              " is 0): nothing confirms this node's holds between ADDs, and its liveness lapses",
                          "set reconcileInterval (the chart) or IBCNI_RECONCILE_INTERVAL to a few times less than "
                          "ipam.cluster.leaseDurationSeconds (" + std::to_string(lease) + " s)",
                          true});
  } else if (in.agentInterval && lease < 3 * *in.agentInterval) {
    r.problems.push_back({poolText + ": ipam.cluster.leaseDurationSeconds " + std::to_string(lease) +
                              " is less than 3 x the node agent's interval (" + std::to_string(*in.agentInterval) +
                              " s, " + in.agentIntervalSource + "): one late pass lets the node's liveness lapse, and "
                              "ADDs must confirm the node's holds with the backend between passes",
                          "set ipam.cluster.leaseDurationSeconds to at least " + std::to_string(3 * *in.agentInterval) +
                              ", or run the agent more often",
                          true});
  }
  const bool holds = std::any_of(report.blocks.begin(), report.blocks.end(),
                                 [](const auto& b) { return b.ledgerState == "owned"; });
  const auto ago = report.confirmedAgoSeconds;
  if (holds && (!ago || *ago > lease)) {
    r.problems.push_back(
        {poolText + ": this node's holds were last confirmed by the backend " +
             (ago ? std::to_string(*ago) + " s ago" : std::string("never on this boot")) +
             ", longer than ipam.cluster.leaseDurationSeconds (" + std::to_string(lease) + " s)",
         "check that the node agent runs (`ibcni reconcile` every reconcileInterval); until it does, each ADD past "
         "the lease confirms them first (one backend call) and fails with 11 when the backend cannot",
         true});
  } else if (holds) {
    r.ok.push_back("this node's holds were confirmed by the backend " + std::to_string(*ago) + " s ago (lease " +
                   std::to_string(lease) + " s)");
  }
}

// Who this node claims blocks as (ipam.cluster.nodeName, or the installer's file).
void checkNodeIdentity(const ConfigCheckInputs& in, const config::ClusterConf& c, const std::string& poolText,
                       ClusterCheckReport& k, ConfigReport& r) {
  if (auto id = ipam::clusterNodeIdentity(c, in.nodeNameFile); id) {
    k.node = id->name;
    k.nodeSource = id->source;
    r.ok.push_back(poolText + ": this node claims blocks as " + cni::quoted(k.node) + " (from " + k.nodeSource + ")");
  } else {
    r.problems.push_back({errorText(id.error()), "set ipam.cluster.nodeName, or let the installer write " +
                                                     std::string(config::kNodeNameFile) + " (spec.nodeName)"});
  }
}

// Whether libcurl loads, when the inputs can tell.
void checkLibcurl(const ConfigCheckInputs& in, ClusterCheckReport& k, ConfigReport& r) {
  if (!in.libcurlProblem) {
    return;
  }
  const std::string why = in.libcurlProblem();
  k.libcurl = why.empty() ? "loads" : why;
  if (why.empty()) {
    r.ok.push_back("libcurl loads (cluster mode talks to the backend through it)");
  } else {
    r.problems.push_back({"libcurl cannot be loaded: " + why + "; cluster mode cannot reach the backend",
                          "install libcurl (Debian/Ubuntu: libcurl4; RHEL: libcurl)"});
  }
}

// Where the backend is: the kubeconfig's server (and whether the kubeconfig reads), or etcd's endpoints.
void checkBackendEndpoint(const config::ClusterConf& c, ClusterCheckReport& k, ConfigReport& r) {
  if (c.backend != config::ClusterBackend::kKubernetes) {
    for (const auto& e : c.etcd.endpoints) {
      k.endpoint += (k.endpoint.empty() ? "" : ",") + e;
    }
    return;
  }
  auto kc = ipam::loadKubeconfig(c.kubernetes.kubeconfig, c.kubernetes.context);
  if (kc) {
    k.kubeconfig = "reads";
    k.endpoint = kc->server;
    r.ok.push_back("kubeconfig " + c.kubernetes.kubeconfig + " reads (context " + kc->context + ", server " +
                   kc->server + ", user " + kc->user + ")");
  } else {
    k.kubeconfig = kc.error().describe();
    r.problems.push_back({"ipam.cluster.kubernetes.kubeconfig: " + kc.error().describe(),
                          "the ibcni DaemonSet's installer writes " + std::string(config::kDefaultKubeconfig) +
                              " from its ServiceAccount; check that it runs, or point kubeconfig at a readable one"});
  }
}

// The pool's blocks could not be listed: why, and what to check.
void unlistedBlocks(const cni::Error& e, const std::string& poolText, ClusterCheckReport& k, ConfigReport& r) {
  k.error = errorText(e);
  const bool down = e.code == cni::Errc::kTryAgainLater;
  r.problems.push_back({"this node cannot list " + poolText + "'s blocks: " + k.error,
                        down ? "check that " + (k.endpoint.empty() ? std::string("the backend") : k.endpoint) +
                                   " is reachable from this node (address, port, firewall) and up; ADDs that "
                                   "need a new block fail until it is"
                             : "fix what the message names (credentials, CA, endpoint, configuration)"});
}

// The pool's blocks as listed: the backend's view, this node's holds by the backend and by its
// ledger, and where the two disagree.
void listedBlocks(const ipam::PoolReport& report, const std::string& poolText, ClusterCheckReport& k,
                  ConfigReport& r) {
  k.reachable = true;
  k.listMs = report.listTime.count();
  if (!report.endpoint.empty()) {
    k.endpoint = report.endpoint;
  }
  for (const auto& b : report.blocks) {
    if (b.mine) {
      k.backendBlocks.push_back(b.cidr.empty() ? b.key : b.cidr);
    }
    if (b.ledgerState == "owned") {
      k.ledgerBlocks.push_back(b.cidr.empty() ? b.key : b.cidr);
    }
  }
  k.agree = report.disagreements.empty();
  r.ok.push_back("reaches " + k.endpoint + ": the pool's blocks listed in " + std::to_string(k.listMs) + " ms (" +
                 report.totalBlocks + " blocks of " + std::to_string(report.blockSize) + ", " +
                 std::to_string(report.claimedBlocks) + " claimed by " + std::to_string(report.perNode.size()) +
                 " node(s), " + report.freeBlocks + " free)");
  std::string held;
  for (const auto& b : k.backendBlocks) {
    held += (held.empty() ? "" : ", ") + b;
  }
  if (k.agree) {
    r.ok.push_back(k.backendBlocks.empty()
                       ? "this node holds no block of the pool yet (its first ADD claims one)"
                       : "this node holds " + std::to_string(k.backendBlocks.size()) + " block(s): " + held +
                             " (its ledger and the backend agree)");
  }
  for (const auto& d : report.disagreements) {
    r.problems.push_back({"claim " + d.block + " of " + poolText + ": this node's ledger says " + d.ledger +
                              ", the backend says " + d.backend,
                          "the next `ibcni reconcile` pass (or ADD) settles it: a block the backend gives another "
                          "node is no longer used here, one it lists as this node's is adopted",
                          true});
  }
  for (const auto& w : report.warnings) {
    r.problems.push_back({poolText + ": " + w, "see the message", true});
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
  ClusterCheckReport k;
  k.pool = c.pool;
  k.backend = std::string(config::clusterBackendName(c.backend));
  const std::string poolText = "cluster pool " + cni::quoted(c.pool) + " (" + k.backend + ")";
  checkNodeIdentity(in, c, poolText, k, r);
  checkLibcurl(in, k, r);
  checkBackendEndpoint(c, k, r);
  if (in.clusterPools) {
    auto report = in.clusterPools(ipam::Request{inv.conf, inv.args, inv.cniArgs, inv.rawStdin});
    if (!report) {
      unlistedBlocks(report.error(), poolText, k, r);
    } else {
      listedBlocks(*report, poolText, k, r);
      checkLease(in, c, *report, poolText, r);
    }
  }
  r.cluster = std::move(k);
}

// The config as ADD parses it; when the device plugin picks the device (`pick`), with a stand-in
// deviceID where Multus would put the one it picked, taken out again once parsed.
std::optional<config::NetConf> parseAsAdd(const std::string& config, bool pick, ConfigReport& r) {
  std::string asAdd = config;
  if (pick) {
    json j = json::parse(config);
    j["deviceID"] = kStandInPci;
    asAdd = j.dump();
  }
  auto conf = config::parseNetConf(asAdd, cni::Command::kAdd);
  if (!conf) {
    r.problems.push_back({"ADD would refuse the config: " + errorText(conf.error()),
                          "fix the field the message names in the NetworkAttachmentDefinition's config"});
    return std::nullopt;
  }
  if (pick) {
    conf->deviceId.reset();
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
    auto conf = parseAsAdd(ex->config, pick, r);
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
    r.works = good > 0 && std::none_of(r.problems.begin(), r.problems.end(),
                                       [](const Problem& p) { return !p.informational; });
  } catch (const std::exception& e) {
    r.problems.push_back({std::string("the config check stopped: ") + e.what(), "report this as a bug"});
    r.works = false;
  }
  return r;
}

}  // namespace ibcni::doctor
