// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/claim_checkpoint.h"

#include <cerrno>
#include <chrono>
#include <nlohmann/json.hpp>
#include <utility>

#include "ibcni/os/file_io.h"

namespace ibcni::dra {

namespace {

using nlohmann::json;

constexpr int kFormat = 1;
constexpr std::size_t kMaxBytes = 16U << 20U;

const char* stateName(ClaimRecord::State s) {
  return s == ClaimRecord::State::kPrepared ? "prepared" : "preparing";
}

json toJson(const ClaimRecord& r) {
  json devices = json::array();
  for (const auto& d : r.devices) {
    devices.push_back({{"requests", d.requestNames}, {"pool", d.poolName}, {"device", d.deviceName},
                       {"cdiDeviceIds", d.cdiDeviceIds}, {"pci", d.pciAddress}});
  }
  json changes = json::array();
  for (const auto& c : r.changes) {
    json j = {{"device", c.device}, {"pf", c.pfName}, {"vf", c.vf}, {"pci", c.pci}, {"guid", c.guid},
              {"oldNodeGuid", c.oldNodeGuid}, {"oldPortGuid", c.oldPortGuid}, {"guidPool", c.guidPool},
              {"guidPoolDir", c.guidPoolDir}};
    if (c.oldLinkState) {
      j["oldLinkState"] = *c.oldLinkState;
    }
    changes.push_back(std::move(j));
  }
  return {{"namespace", r.ref.ns}, {"name", r.ref.name}, {"state", stateName(r.state)}, {"devices", devices},
          {"changes", changes}, {"boot", r.bootId}};
}

VfChange changeFromJson(const json& j) {
  VfChange c{j.at("device").get<std::string>(), j.at("pf").get<std::string>(), j.at("vf").get<std::uint32_t>(),
             j.at("pci").get<std::string>(), j.value("guid", ""), j.value("oldNodeGuid", ""),
             j.value("oldPortGuid", ""), std::nullopt, j.value("guidPool", ""), j.value("guidPoolDir", "")};
  if (j.contains("oldLinkState")) {
    c.oldLinkState = j.at("oldLinkState").get<std::uint32_t>();
  }
  return c;
}

ClaimRecord fromJson(const std::string& uid, const json& j) {
  ClaimRecord r;
  r.ref = {j.at("namespace").get<std::string>(), uid, j.at("name").get<std::string>()};
  r.state = j.at("state").get<std::string>() == "prepared" ? ClaimRecord::State::kPrepared
                                                           : ClaimRecord::State::kPreparing;
  for (const auto& d : j.at("devices")) {
    r.devices.push_back({d.at("requests").get<std::vector<std::string>>(), d.at("pool").get<std::string>(),
                         d.at("device").get<std::string>(), d.at("cdiDeviceIds").get<std::vector<std::string>>(),
                         d.value("pci", "")});
  }
  r.bootId = j.value("boot", "");
  for (const auto& c : j.value("changes", json::array())) {
    r.changes.push_back(changeFromJson(c));
  }
  return r;
}

}  // namespace

ClaimCheckpoint::ClaimCheckpoint(std::string path) : path_(std::move(path)) {}

os::SysResult<ClaimRecords> ClaimCheckpoint::load() const {
  auto text = os::readFile(path_, kMaxBytes);
  if (!text) {
    if (text.error().err == ENOENT) {
      return ClaimRecords{};
    }
    return std::unexpected(text.error());
  }
  const auto doc = json::parse(*text, nullptr, false);
  ClaimRecords records;
  try {
    if (!doc.is_object() || doc.at("format").get<int>() != kFormat) {
      return os::sysFail(EINVAL, "read the claim checkpoint " + path_ + ": not a checkpoint of format " +
                                     std::to_string(kFormat));
    }
    for (const auto& [uid, claim] : doc.at("claims").items()) {
      records.emplace(uid, fromJson(uid, claim));
    }
  } catch (const json::exception& e) {
    return os::sysFail(EINVAL, "read the claim checkpoint " + path_ + ": " + e.what());
  }
  return records;
}

os::SysResult<os::FileLock> ClaimCheckpoint::lock() const {
  constexpr std::chrono::seconds kWait{30};
  return os::FileLock::acquire(path_ + ".lock", kWait);
}

os::SysResult<void> ClaimCheckpoint::store(const ClaimRecords& records) const {
  json claims = json::object();
  for (const auto& [uid, r] : records) {
    claims[uid] = toJson(r);
  }
  return os::writeFileAtomic(path_, json{{"format", kFormat}, {"claims", claims}}.dump(1) + "\n");
}

}  // namespace ibcni::dra
