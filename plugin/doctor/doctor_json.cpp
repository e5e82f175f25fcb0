// SPDX-License-Identifier: Apache-2.0
#include "plugin/doctor/doctor_json.h"

#include <nlohmann/json.hpp>

namespace ibcni::doctor {

namespace {

using nlohmann::json;

json orNull(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

json pkeys(const std::vector<net::Pkey>& keys) {
  json a = json::array();
  for (auto k : keys) {
    a.push_back(k.hex());
  }
  return a;
}

json problemList(const std::vector<doctor::Problem>& list) {
  json a = json::array();
  for (const auto& p : list) {
    a.push_back({{"what", p.what}, {"fix", p.fix}, {"informational", p.informational}});
  }
  return a;
}

json devicesJson(const std::vector<doctor::DeviceReport>& list) {
  json devices = json::array();
  for (const auto& d : list) {
    json ports = json::array();
    for (const auto& p : d.ports) {
      ports.push_back({{"port", p.port},
                       {"queried", p.queried},
                       {"state", orNull(p.state)},
                       {"physState", orNull(p.physState)},
                       {"linkLayer", orNull(p.linkLayer)},
                       {"lid", p.lid},
                       {"smLid", p.smLid},
                       {"portGuid", orNull(p.portGuid)},
                       {"pkeys", pkeys(p.pkeys)},
                       {"netdev", orNull(p.netdev)},
                       {"netdevIndex", p.netdevIndex}});
    }
    devices.push_back({{"name", d.name}, {"index", d.index}, {"nodeGuid", orNull(d.nodeGuid)}, {"ports", ports}});
  }
  return devices;
}

json ipoibJson(const std::vector<doctor::IpoibLinkReport>& links) {
  json ipoib = json::array();
  for (const auto& l : links) {
    ipoib.push_back({{"name", l.name},
                     {"index", l.index},
                     {"role", l.parentIndex == 0 ? "parent" : "child"},
                     {"pkey", l.pkey.hex()},
                     {"mode", orNull(l.mode)},
                     {"parentIndex", l.parentIndex},
                     {"parent", orNull(l.parent)},
                     {"up", l.adminUp},
                     {"mtu", l.mtu}});
  }
  return ipoib;
}

json sriovJson(const std::vector<doctor::PfReport>& list) {
  json pfs = json::array();
  for (const auto& pf : list) {
    json vfs = json::array();
    for (const auto& v : pf.vfs) {
      vfs.push_back({{"vf", v.vf},
                     {"pci", orNull(v.pci)},
                     {"driver", orNull(v.driver)},
                     {"linkState", orNull(v.linkState)},
                     {"nodeGuid", orNull(v.nodeGuid)},
                     {"portGuid", orNull(v.portGuid)}});
    }
    pfs.push_back({{"pci", pf.pci},
                   {"netdev", pf.netdev},
                   {"ifIndex", pf.ifIndex},
                   {"driver", orNull(pf.driver)},
                   {"rdmaDevices", pf.rdmaDevices},
                   {"vfs", vfs}});
  }
  return pfs;
}

json clusterJson(const doctor::ClusterCheckReport& k) {
  return {{"pool", k.pool},
          {"backend", k.backend},
          {"endpoint", orNull(k.endpoint)},
          {"node", orNull(k.node)},
          {"nodeSource", orNull(k.nodeSource)},
          {"libcurl", orNull(k.libcurl)},
          {"kubeconfig", orNull(k.kubeconfig)},
          {"reachable", k.reachable},
          {"listMs", k.listMs < 0 ? json(nullptr) : json(k.listMs)},
          {"error", orNull(k.error)},
          {"backendBlocks", k.backendBlocks},
          {"ledgerBlocks", k.ledgerBlocks},
          {"agree", k.agree}};
}

json guidPoolJson(const doctor::GuidPoolCheckReport& g) {
  json vfs = json::array();
  for (const auto& v : g.vfs) {
    vfs.push_back({{"vf", v.vf},
                   {"attachment", v.attachment},
                   {"recorded", v.recorded},
                   {"portGuid", orNull(v.portGuid)},
                   {"poolHolds", orNull(v.poolHolds)},
                   {"ok", v.ok}});
  }
  return {{"pool", g.pool},
          {"range", g.range},
          {"blockSize", g.blockSize},
          {"assign", g.assign},
          {"storeDir", orNull(g.storeDir)},
          {"cluster", g.cluster ? clusterJson(*g.cluster) : json(nullptr)},
          {"vfs", vfs}};
}

json configJson(const doctor::ConfigReport& c) {
  json candidates = json::array();
  for (const auto& d : c.candidates) {
    candidates.push_back({{"device", d.device},
                          {"works", d.works},
                          {"needsGuid", d.needsGuid},
                          {"problem", orNull(d.problem)},
                          {"warnings", d.warnings}});
  }
  json out = {{"file", c.file},
              {"name", orNull(c.name)},
              {"mode", orNull(c.mode)},
              {"resourceName", orNull(c.resourceName)},
              {"works", c.works},
              {"ok", c.ok},
              {"candidates", candidates},
              {"problems", problemList(c.problems)}};
  if (c.cluster) {
    out["cluster"] = clusterJson(*c.cluster);
  }
  if (c.guidPool) {
    out["guidPool"] = guidPoolJson(*c.guidPool);
  }
  return out;
}

}  // namespace

std::string printDoctorReport(const doctor::DoctorReport& r) {
  json out = {{"rdmaNetnsMode", r.rdmaNetnsMode},
              {"libibverbs", {{"available", r.verbsAvailable}, {"reason", orNull(r.verbsUnavailableReason)}}},
              {"uverbsDevices", r.uverbsDevices},
              {"gpuDirect", r.gpuDirect},
              {"devices", devicesJson(r.devices)},
              {"ipoibLinks", ipoibJson(r.ipoibLinks)},
              {"sriovPfs", sriovJson(r.sriovPfs)},
              {"problems", problemList(r.problems)}};
  if (r.config) {
    out["config"] = configJson(*r.config);
  }
  return out.dump(2);
}

}  // namespace ibcni::doctor
