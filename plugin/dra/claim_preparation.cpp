// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/claim_preparation.h"

#include <algorithm>
#include <utility>

#include "plugin/dra/cdi_spec.h"
#include "plugin/dra/ib_devices.h"

namespace ibcni::dra {

namespace {

using nlohmann::json;

std::string claimText(const ClaimRef& c) { return "claim " + c.ns + "/" + c.name + " (uid " + c.uid + ")"; }

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
  if (auto it = records.find(claim.uid); it != records.end() && it->second.state == ClaimRecord::State::kPrepared) {
    return {it->second.devices, {}};
  }
  const std::string what = claimText(claim);
  auto object = claims_.get(claim.ns, claim.name);
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
  auto plan = planDevices(claim, *allocated);
  if (!plan) {
    return {{}, "prepare " + what + ": " + plan.error()};
  }
  ClaimRecord record{claim, ClaimRecord::State::kPreparing, plan->devices};
  const std::vector<CdiDevice>& cdi = plan->cdi;
  // Ahead of the first host change: a kill from here on is undone by Unprepare.
  records[claim.uid] = record;
  if (auto ok = effects_.store(records); !ok) {
    return {{}, "prepare " + what + ": " + ok.error().describe()};
  }
  if (!cdi.empty()) {
    if (auto ok = effects_.writeSpec(claim.uid, cdi); !ok) {
      return {{}, "prepare " + what + ": " + ok.error().describe()};
    }
  }
  records[claim.uid].state = ClaimRecord::State::kPrepared;
  if (auto ok = effects_.store(records); !ok) {
    return {{}, "prepare " + what + ": " + ok.error().describe()};
  }
  return {record.devices, {}};
}

std::expected<ClaimPreparation::Plan, std::string> ClaimPreparation::planDevices(
    const ClaimRef& claim, const std::vector<Allocated>& allocated) {
  auto present = discoverDevices(devices_, inventory_);
  if (!present) {
    return std::unexpected(present.error().describe());
  }
  auto rdmaCm = inventory_.rdmaCm();
  if (!rdmaCm) {
    return std::unexpected(rdmaCm.error().describe());
  }
  Plan plan;
  for (const auto& a : allocated) {
    auto d = std::find_if(present->begin(), present->end(), [&](const IbDevice& x) { return x.name == a.device; });
    if (d == present->end()) {
      return std::unexpected("device " + a.device + " (request " + a.request +
                             ") is not on this node any more (not in sysfs): was its VF removed?");
    }
    PreparedDevice prepared{{a.request}, options_.nodeName, a.device, {}, d->pci.text};
    if (d->kind == DeviceKind::kVf) {
      if (!d->guidSet) {
        return std::unexpected(unsetGuidProblem(*d, a.request));
      }
      sysfs::RdmaCharDevices chars;
      if (!d->rdmaDevice.empty()) {
        auto c = inventory_.charDevices(d->rdmaDevice);
        if (!c) {
          return std::unexpected(c.error().describe());
        }
        chars = std::move(*c);
      }
      plan.cdi.push_back(vfCdiDevice(claim.uid, a.request, *d, chars, *rdmaCm));
      prepared.cdiDeviceIds.push_back(cdiDeviceId(plan.cdi.back().name));
    }
    plan.devices.push_back(std::move(prepared));
  }
  return plan;
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
  // retried Prepare does again in full and the next Unprepare finishes.
  auto it = records->find(claim.uid);
  if (it != records->end() && it->second.state == ClaimRecord::State::kPrepared) {
    it->second.state = ClaimRecord::State::kPreparing;
    if (auto ok = effects_.store(*records); !ok) {
      return "unprepare " + claimText(claim) + ": " + ok.error().describe();
    }
  }
  // The spec goes even without a record: a record lost with its file leaves no spec behind.
  if (auto ok = effects_.removeSpec(claim.uid); !ok) {
    return "unprepare " + claimText(claim) + ": " + ok.error().describe();
  }
  if (records->erase(claim.uid) == 0) {
    return {};
  }
  if (auto ok = effects_.store(*records); !ok) {
    return "unprepare " + claimText(claim) + ": " + ok.error().describe();
  }
  return {};
}

}  // namespace ibcni::dra
