// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/claim_status.h"

#include <algorithm>
#include <utility>

namespace ibcni::dra {

namespace {

using nlohmann::json;

/// The attachment of VF `pci` (ibcni's sriov mode), or null.
const state::AttachmentRecord* attachmentOf(const std::string& pci,
                                            const std::vector<state::AttachmentRecord>& attachments) {
  auto it = std::find_if(attachments.begin(), attachments.end(), [&](const state::AttachmentRecord& a) {
    return a.mode == "sriov" && a.pciAddress && a.pciAddress->text == pci;
  });
  return it == attachments.end() ? nullptr : &*it;
}

/// networkData of attachment `a`: the pod's interface, its addresses (CIDR) and hardware address
/// (an IPoIB interface's is 20 bytes).
json networkData(const state::AttachmentRecord& a) {
  json ips = json::array();
  for (const auto& ip : a.result.ips) {
    ips.push_back(ip.address.toString());
  }
  std::string mac = a.podMac;
  for (const auto& i : a.result.interfaces) {
    if (mac.empty() && i.name == a.ifName && !i.sandbox.empty()) {
      mac = i.mac;
    }
  }
  json data = {{"interfaceName", a.ifName}, {"ips", ips}};
  if (!mac.empty()) {
    data["hardwareAddress"] = mac;
  }
  return data;
}

}  // namespace

json deviceStatuses(const ClaimRecord& record, const std::vector<state::AttachmentRecord>& attachments,
                    const std::string& driver) {
  json out = json::array();
  for (const auto& d : record.devices) {
    const auto* a = d.pciAddress.empty() ? nullptr : attachmentOf(d.pciAddress, attachments);
    json condition = {{"type", "Ready"}, {"status", "True"}};
    if (a != nullptr) {
      condition["reason"] = "Attached";
      condition["message"] = "ibcni attached " + d.pciAddress + " to the pod as " + a->ifName;
    } else {
      condition["reason"] = "Prepared";
      condition["message"] = "prepared on the node; not attached to a pod by ibcni yet";
    }
    json entry = {{"driver", driver}, {"pool", d.poolName}, {"device", d.deviceName}, {"conditions", {condition}}};
    if (a != nullptr) {
      entry["networkData"] = networkData(*a);
    }
    out.push_back(std::move(entry));
  }
  return out;
}

std::vector<std::string> StatusReporter::report(const ClaimRecords& records,
                                                const std::vector<state::AttachmentRecord>& attachments,
                                                const std::string& now) {
  std::vector<std::string> errors;
  std::map<std::string, json> kept;
  for (const auto& [uid, r] : records) {
    if (r.state != ClaimRecord::State::kPrepared) {
      continue;
    }
    json statuses = deviceStatuses(r, attachments, driver_);
    if (auto it = applied_.find(uid); it != applied_.end() && it->second == statuses) {
      kept.emplace(uid, std::move(it->second));
      continue;
    }
    json stamped = statuses;
    for (auto& s : stamped) {
      s["conditions"][0]["lastTransitionTime"] = now;
    }
    if (auto ok = api_.applyStatus(r.ref.ns, r.ref.name, uid, stamped); !ok) {
      // 404, or 409 for the uid (a claim made again under the name): the recorded claim is gone,
      // its undoing the kubelet's or the sweep's. Not tried again while its statuses stay the same.
      if (ok.error().kind != ApiError::Kind::kOther) {
        kept.emplace(uid, std::move(statuses));
        continue;
      }
      errors.push_back("status of claim " + r.ref.ns + "/" + r.ref.name + ": " + ok.error().message);
      continue;
    }
    kept.emplace(uid, std::move(statuses));
  }
  applied_ = std::move(kept);  // claims no longer prepared are forgotten
  return errors;
}

}  // namespace ibcni::dra
