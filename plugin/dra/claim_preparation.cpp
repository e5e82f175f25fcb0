// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/claim_preparation.h"

#include <algorithm>
#include <utility>

#include "plugin/dra/cdi_spec.h"
#include "plugin/dra/ib_devices.h"

namespace ibcni::dra {

namespace {

using nlohmann::json;

/// One allocation result of the claim for this driver and node.
struct Allocated {
  std::string request;
  std::string device;
};

std::string claimText(const ClaimRef& c) { return "claim " + c.ns + "/" + c.name + " (uid " + c.uid + ")"; }

/// status.allocation.devices.results[] of `driver` in pool `pool`, or an error naming what is
/// missing.
std::expected<std::vector<Allocated>, std::string> allocatedTo(const json& claim, const PreparationOptions& o) {
  const json results = claim.value("/status/allocation/devices/results"_json_pointer, json::array());
  std::vector<Allocated> out;
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
  auto present = discoverDevices(devices_, inventory_);
  if (!present) {
    return {{}, "prepare " + what + ": " + present.error().describe()};
  }
  auto rdmaCm = inventory_.rdmaCm();
  if (!rdmaCm) {
    return {{}, "prepare " + what + ": " + rdmaCm.error().describe()};
  }
  ClaimRecord record{claim, ClaimRecord::State::kPreparing, {}};
  std::vector<CdiDevice> cdi;
  for (const auto& a : *allocated) {
    auto d = std::find_if(present->begin(), present->end(), [&](const IbDevice& x) { return x.name == a.device; });
    if (d == present->end()) {
      return {{}, "prepare " + what + ": device " + a.device + " (request " + a.request +
                      ") is not on this node any more (not in sysfs): was its VF removed?"};
    }
    PreparedDevice prepared{{a.request}, options_.nodeName, a.device, {}, d->pci.text};
    if (d->kind == DeviceKind::kVf) {
      sysfs::RdmaCharDevices chars;
      if (!d->rdmaDevice.empty()) {
        auto c = inventory_.charDevices(d->rdmaDevice);
        if (!c) {
          return {{}, "prepare " + what + ": " + c.error().describe()};
        }
        chars = std::move(*c);
      }
      cdi.push_back(vfCdiDevice(claim.uid, a.request, *d, chars, *rdmaCm));
      prepared.cdiDeviceIds.push_back(cdiDeviceId(cdi.back().name));
    }
    record.devices.push_back(std::move(prepared));
  }
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
