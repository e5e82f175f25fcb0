// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/claim_preparation.h"

#include <algorithm>
#include <set>
#include <utility>

#include "plugin/dra/cdi_spec.h"
#include "plugin/dra/ib_devices.h"

namespace ibcni::dra {

namespace {

using nlohmann::json;

/// "req" of a subrequest's result "req/subreq": the request the device metadata is written for.
std::string baseRequest(const std::string& request) { return request.substr(0, request.find('/')); }

/// Why VF `d`, whose GUID is unset, is not prepared: its port would never come up in the pod.
std::string unsetGuidProblem(const IbDevice& d, const std::string& request) {
  return "device " + d.name + " (request " + request + ", VF " + (d.vfIndex ? std::to_string(*d.vfIndex) : "?") +
         " of " + d.pfPci.text + ") has no GUID (node GUID " + (d.nodeGuid.empty() ? "unknown" : d.nodeGuid) +
         "): the subnet manager would never bring its port up. Give the VF a GUID on the node (ip link set " +
         (d.pfName.empty() ? "<pf>" : d.pfName) + " vf N node_guid ... port_guid ...); its slice is tainted " +
         "ibcni.io/guid-unset meanwhile, so only a claim that tolerates that taint gets it";
}

/// status.allocation.devices.results[] of `driver` in pool `pool`, or an error naming what is
/// missing.
std::expected<std::vector<ClaimPreparation::Allocated>, std::string> allocatedTo(const json& claim, const PreparationOptions& o) {
  const json results = claim.value("/status/allocation/devices/results"_json_pointer, json::array());
  std::vector<ClaimPreparation::Allocated> out;
  for (const auto& r : results) {
    if (r.value("driver", "") != o.driver) {
      continue;
    }
    if (r.value("pool", "") != o.nodeName) {
      return std::unexpected("device " + r.value("device", "") + " of pool " + r.value("pool", "") +
                             " is allocated to it, not one of node " + o.nodeName + "'s");
    }
    out.push_back({r.value("request", ""), r.value("device", "")});
  }
  if (out.empty()) {
    return std::unexpected("it has no device of driver " + o.driver + " allocated (status.allocation)");
  }
  return out;
}

}  // namespace

ClaimPreparation::ClaimPreparation(ClaimApi& claims, sysfs::Devices& devices, sysfs::IbInventory& inventory,
                                   ClaimEffects& effects, PreparationOptions options)
    : claims_(claims),
      devices_(devices),
      inventory_(inventory),
      effects_(effects),
      options_(std::move(options)) {}

PrepareOutcome ClaimPreparation::prepare(const ClaimRef& claim) {
  // The kubelet may call for several pods at once, and two processes in a rolling update.
  auto lock = effects_.lock();
  if (!lock) {
    return {{}, lock.error().describe()};
  }
  auto records = effects_.load();
  if (!records) {
    return {{}, records.error().describe()};
  }
  return prepareLocked(claim, *records);
}

PrepareOutcome ClaimPreparation::prepareLocked(const ClaimRef& claim, ClaimRecords& records) {
  // Prepared in an earlier boot (the kubelet prepares its pods' claims again after a reboot): the
  // VFs lost their settings and /run its CDI spec, so it is prepared again in full.
  const bool rebooted = forgetRebootedChanges(claim.uid, records);
  if (auto it = records.find(claim.uid);
      !rebooted && it != records.end() && it->second.state == ClaimRecord::State::kPrepared) {
    return {it->second.devices, {}};
  }
  const std::string what = claimText(claim);
  // A Prepare cut short (killed) left its record: what it changed is put back before it starts again.
  if (auto left = undo(claim.uid, records); !left.empty()) {
    return {{}, "prepare " + what + ": an earlier Prepare's changes could not be undone: " + left};
  }
  auto object = claims_.get(claim.ns, claim.name, Read::kLatest);
  if (!object) {
    return {{}, "prepare " + what + ": " + object.error().message};
  }
  const std::string uid = object->value("/metadata/uid"_json_pointer, std::string());
  if (uid != claim.uid) {
    return {{}, "prepare " + what + ": the API server's claim of that name has uid " + uid +
                    " (deleted and made again?); nothing prepared"};
  }
  auto allocated = allocatedTo(*object, options_);
  if (!allocated) {
    return {{}, "prepare " + what + ": " + allocated.error()};
  }
  auto plan = planDevices(*object, *allocated);
  if (!plan) {
    return {{}, "prepare " + what + ": " + plan.error()};
  }
  if (auto held = heldByAnother(claim.uid, *plan, records); !held.empty()) {
    return {{}, "prepare " + what + ": " + held};
  }
  // Ahead of the first host change: a kill from here on is undone by Unprepare or the next Prepare.
  records[claim.uid] =
      ClaimRecord{claim, ClaimRecord::State::kPreparing, plan->devices, plan->changes, options_.bootId};
  if (auto ok = effects_.store(records); !ok) {
    return {{}, "prepare " + what + ": " + ok.error().describe()};
  }
  if (auto failed = changeNode(claim, *plan, records); !failed.empty()) {
    const std::string left = undo(claim.uid, records);
    return {{}, "prepare " + what + ": " + failed +
                    (left.empty() ? "; what it changed was put back" : "; and undoing it failed: " + left)};
  }
  records[claim.uid].state = ClaimRecord::State::kPrepared;
  if (auto ok = effects_.store(records); !ok) {
    return {{}, "prepare " + what + ": " + ok.error().describe()};
  }
  return {plan->devices, {}};
}

std::string ClaimPreparation::heldByAnother(const std::string& uid, const Plan& plan, const ClaimRecords& records) {
  for (std::size_t i = 0; i < plan.devices.size(); ++i) {
    if (plan.found[i].kind != DeviceKind::kVf) {
      continue;  // an IPoIB port is shared by every claim of it
    }
    for (const auto& [other, record] : records) {
      const bool holds = other != uid && std::any_of(record.devices.begin(), record.devices.end(), [&](const auto& d) {
                           return d.deviceName == plan.devices[i].deviceName;
                         });
      if (holds) {
        return "VF " + plan.devices[i].deviceName + " is still prepared for " + claimText(record.ref) +
               ", which has not been unprepared: it is prepared for this claim once that one is (the kubelet "
               "retries; ibcni-dra undoes a claim the API server no longer has after --gone-grace)";
      }
    }
  }
  return {};
}

std::string ClaimPreparation::changeNode(const ClaimRef& claim, const Plan& plan, ClaimRecords& records) {
  VfSteps steps{effects_, [&] { return effects_.store(records); }};
  for (std::size_t i = 0; i < plan.vfs.size(); ++i) {
    const PlannedVf& vf = plan.vfs[i];
    if (auto failed = applyVfSettings(steps, claim, vf.device, vf.settings, records[claim.uid].changes[i]);
        !failed.empty()) {
      return "device " + vf.device.name + " (request " + vf.request + "): " + failed;
    }
  }
  auto now = vfsNow(claim, plan.vfs);
  if (!now) {
    return now.error();
  }
  if (!now->cdi.empty()) {
    if (auto ok = effects_.writeSpec(claim.uid, now->cdi); !ok) {
      return ok.error().describe();
    }
  }
  if (auto ok = effects_.writeMetadata(claim, plan.podClaimName, metadataOf(plan, *now, records[claim.uid].changes));
      !ok) {
    return ok.error().describe();
  }
  return {};
}

std::vector<RequestMetadata> ClaimPreparation::metadataOf(const Plan& plan, const VfsNow& now,
                                                          const std::vector<VfChange>& changes) const {
  std::vector<RequestMetadata> out;
  for (std::size_t i = 0; i < plan.devices.size(); ++i) {
    const PreparedDevice& p = plan.devices[i];
    const IbDevice* d = &plan.found[i];
    std::string guid = d->nodeGuid;
    for (std::size_t v = 0; v < plan.vfs.size(); ++v) {
      if (plan.vfs[v].device.name == p.deviceName) {
        d = &now.devices[v];
        guid = changes[v].guid.empty() ? d->nodeGuid : changes[v].guid;
      }
    }
    nlohmann::json attributes = {{"resource.kubernetes.io/pciBusID", {{"string", d->pci.text}}}};
    for (const auto& [name, value] : {std::pair{"ibcni.io/rdmaDevice", d->rdmaDevice},
                                      std::pair{"ibcni.io/ifName", d->ifName}, std::pair{"ibcni.io/nodeGuid", guid}}) {
      if (!value.empty()) {
        attributes[name] = {{"string", value}};
      }
    }
    const nlohmann::json device = {
        {"driver", options_.driver}, {"pool", p.poolName}, {"name", p.deviceName}, {"attributes", attributes}};
    const std::string request = baseRequest(p.requestNames.at(0));
    auto it = std::find_if(out.begin(), out.end(), [&](const RequestMetadata& m) { return m.request == request; });
    if (it == out.end()) {
      out.push_back({request, {device}});
    } else {
      it->devices.push_back(device);
    }
  }
  return out;
}

std::expected<ClaimPreparation::Plan, std::string> ClaimPreparation::planDevices(
    const nlohmann::json& object, const std::vector<Allocated>& allocated) {
  std::set<std::string> names;
  for (const auto& a : allocated) {
    names.insert(a.device);
  }
  auto present = discoverDevices(devices_, inventory_, &names);
  if (!present) {
    return std::unexpected(present.error().describe());
  }
  const std::string uid = object.value("/metadata/uid"_json_pointer, std::string());
  Plan plan;
  const auto annotations = object.value("/metadata/annotations"_json_pointer, nlohmann::json::object());
  if (auto it = annotations.find("resource.kubernetes.io/pod-claim-name"); it != annotations.end() && it->is_string()) {
    plan.podClaimName = it->get<std::string>();
  }
  for (const auto& a : allocated) {
    auto d = std::find_if(present->begin(), present->end(), [&](const IbDevice& x) { return x.name == a.device; });
    if (d == present->end()) {
      return std::unexpected("device " + a.device + " (request " + a.request +
                             ") is not on this node any more (not in sysfs): was its VF removed?");
    }
    PreparedDevice prepared{{a.request}, options_.nodeName, a.device, {}, d->pci.text};
    const std::string metadataId = metadataCdiId(uid, baseRequest(a.request));
    if (d->kind == DeviceKind::kVf) {
      auto settings = vfSettingsFor(object, options_.driver, a.request, d->pci.text);
      if (!settings) {
        return std::unexpected(settings.error());
      }
      if (!d->guidSet && !settings->guid && !settings->guidPool) {
        return std::unexpected(unsetGuidProblem(*d, a.request));
      }
      prepared.cdiDeviceIds.push_back(cdiDeviceId(cdiDeviceName(uid, a.device)));
      VfChange change;
      change.device = a.device;
      change.pfName = d->pfName;
      change.vf = d->vfIndex.value_or(0);
      change.pci = d->pci.text;
      plan.changes.push_back(std::move(change));
      plan.vfs.push_back({a.request, *d, std::move(*settings)});
    }
    prepared.cdiDeviceIds.push_back(metadataId);
    plan.devices.push_back(std::move(prepared));
    plan.found.push_back(*d);
  }
  return plan;
}

std::expected<ClaimPreparation::VfsNow, std::string> ClaimPreparation::vfsNow(const ClaimRef& claim,
                                                                             const std::vector<PlannedVf>& vfs) {
  if (vfs.empty()) {
    return VfsNow{};
  }
  auto rdmaCm = inventory_.rdmaCm();
  if (!rdmaCm) {
    return std::unexpected(rdmaCm.error().describe());
  }
  // Read again only when a VF was changed: a rebind makes its RDMA device anew.
  const bool changed = std::any_of(vfs.begin(), vfs.end(), [](const PlannedVf& v) { return v.settings.changesVf(); });
  std::vector<IbDevice> now;
  if (changed) {
    std::set<std::string> names;
    for (const auto& vf : vfs) {
      names.insert(vf.device.name);
    }
    auto present = discoverDevices(devices_, inventory_, &names);
    if (!present) {
      return std::unexpected(present.error().describe());
    }
    now = std::move(*present);
  }
  VfsNow out;
  for (const auto& vf : vfs) {
    const IbDevice* d = &vf.device;
    if (changed) {
      auto it = std::find_if(now.begin(), now.end(), [&](const IbDevice& x) { return x.name == vf.device.name; });
      if (it == now.end()) {
        return std::unexpected("device " + vf.device.name + " did not come back after its VF was changed");
      }
      d = &*it;
    }
    if (auto wrong = pkeyProblem(*d, vf); !wrong.empty()) {
      return std::unexpected(wrong);
    }
    sysfs::RdmaCharDevices chars;
    if (!d->rdmaDevice.empty()) {
      auto c = inventory_.charDevices(d->rdmaDevice);
      if (!c) {
        return std::unexpected(c.error().describe());
      }
      chars = std::move(*c);
    }
    out.cdi.push_back(vfCdiDevice(claim.uid, vf.request, *d, chars, *rdmaCm));
    out.devices.push_back(*d);
  }
  return out;
}

std::string ClaimPreparation::pkeyProblem(const IbDevice& d, const PlannedVf& vf) {
  if (!vf.settings.pkey) {
    return {};
  }
  const std::string want = vf.settings.pkey->hex();
  if (d.rdmaDevice.empty()) {
    return "device " + d.name + ": pkey " + want + " cannot be checked, the VF has no RDMA device (bound to " +
           (d.driver.empty() ? "no driver" : d.driver) + ")";
  }
  auto table = devices_.pkeys(d.rdmaDevice, d.port);
  if (!table) {
    return "device " + d.name + ": read the pkey table of " + d.rdmaDevice + ": " + table.error().describe();
  }
  if (std::none_of(table->begin(), table->end(), [&](const net::Pkey& p) { return p.samePartition(*vf.settings.pkey); })) {
    return "device " + d.name + " (request " + vf.request + "): pkey " + want + " is not in the pkey table of " +
           d.rdmaDevice + " port " + std::to_string(d.port) +
           ": the subnet manager has not made the VF's GUID a member of that partition; add it to the "
           "partition (opensm's partitions.conf, UFM), or ask for a pkey the VF has";
  }
  return {};
}

bool ClaimPreparation::forgetRebootedChanges(const std::string& uid, ClaimRecords& records) const {
  auto it = records.find(uid);
  if (it == records.end() || it->second.bootId == options_.bootId) {
    return false;
  }
  for (auto& c : it->second.changes) {
    c.guid.clear();
    c.oldLinkState.reset();
  }
  return true;
}

std::string ClaimPreparation::undo(const std::string& uid, ClaimRecords& records) {
  auto it = records.find(uid);
  if (it == records.end()) {
    return {};
  }
  std::string errors;
  auto& changes = it->second.changes;
  for (auto c = changes.rbegin(); c != changes.rend(); ++c) {
    if (pending(*c)) {
      if (auto e = undoVfChange(effects_, uid, *c); !e.empty()) {
        errors += (errors.empty() ? "" : "; ") + e;
      }
    }
  }
  // The spec goes even when a VF could not be put back: no container gets a half-undone claim.
  if (auto ok = effects_.removeMetadata(it->second.ref); !ok) {
    errors += (errors.empty() ? "" : "; ") + ok.error().describe();
  }
  if (auto ok = effects_.removeSpec(uid); !ok) {
    errors += (errors.empty() ? "" : "; ") + ok.error().describe();
  }
  if (errors.empty()) {
    records.erase(it);
  }
  if (auto ok = effects_.store(records); !ok) {
    errors += (errors.empty() ? "" : "; ") + ok.error().describe();
  }
  return errors;
}

std::string ClaimPreparation::unprepare(const ClaimRef& claim) {
  auto lock = effects_.lock();
  if (!lock) {
    return lock.error().describe();
  }
  auto records = effects_.load();
  if (!records) {
    return records.error().describe();
  }
  // Marked incomplete ahead of the first change: a kill from here on leaves a record that a
  // retried Prepare undoes and does again in full, and the next Unprepare finishes.
  auto it = records->find(claim.uid);
  if (it != records->end() && it->second.state == ClaimRecord::State::kPrepared) {
    it->second.state = ClaimRecord::State::kPreparing;
    if (auto ok = effects_.store(*records); !ok) {
      return "unprepare " + claimText(claim) + ": " + ok.error().describe();
    }
  }
  forgetRebootedChanges(claim.uid, *records);
  if (it == records->end()) {
    // No record: nothing to put back, but a spec and metadata lost with their record go too.
    if (auto ok = effects_.removeMetadata(claim); !ok) {
      return "unprepare " + claimText(claim) + ": " + ok.error().describe();
    }
    if (auto ok = effects_.removeSpec(claim.uid); !ok) {
      return "unprepare " + claimText(claim) + ": " + ok.error().describe();
    }
    return {};
  }
  if (auto left = undo(claim.uid, *records); !left.empty()) {
    return "unprepare " + claimText(claim) + ": " + left + " (kept in the checkpoint: the next Unprepare tries again)";
  }
  return {};
}

}  // namespace ibcni::dra
