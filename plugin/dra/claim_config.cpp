// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/claim_config.h"

#include <algorithm>
#include <array>
#include <string_view>

namespace ibcni::dra {

namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 4> kKeys = {"guid", "guidPool", "linkState", "pkey"};

/// Whether config entry `entry` applies to `request`: no `requests`, or one naming it or its
/// parent request ("req" for "req/subreq").
bool appliesTo(const json& entry, const std::string& request) {
  const json requests = entry.value("requests", json::array());
  if (!requests.is_array() || requests.empty()) {
    return true;
  }
  const std::string parent = request.substr(0, request.find('/'));
  return std::any_of(requests.begin(), requests.end(), [&](const json& r) {
    return r.is_string() && (r.get<std::string>() == request || r.get<std::string>() == parent);
  });
}

/// The parameters of this driver's entries that apply to `request`, merged in order, or what is
/// wrong with one of them.
std::expected<json, std::string> mergedParameters(const json& claim, const std::string& driver,
                                                  const std::string& request) {
  const json entries = claim.value("/status/allocation/devices/config"_json_pointer, json::array());
  json merged = json::object();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const json& entry = entries[i];
    const json opaque = entry.value("opaque", json::object());
    if (opaque.value("driver", "") != driver || !appliesTo(entry, request)) {
      continue;
    }
    const std::string where = "status.allocation.devices.config[" + std::to_string(i) + "].opaque.parameters";
    const json params = opaque.value("parameters", json::object());
    if (!params.is_object()) {
      return std::unexpected(where + " = " + params.dump() + " must be an object of ibcni's VF keys (guid, " +
                             "guidPool, linkState, pkey)");
    }
    for (const auto& [key, value] : params.items()) {
      if (key == "rdmaIsolation") {
        return std::unexpected(where + ".rdmaIsolation: the RDMA device moves into the pod's network namespace " +
                               "when the CNI attaches the VF, so this key belongs in the NetworkAttachmentDefinition; " +
                               "remove it from the claim's configuration");
      }
      if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end()) {
        return std::unexpected(where + "." + key + " is not a key ibcni-dra takes: accepted are guid, guidPool, " +
                               "linkState and pkey");
      }
      merged[key] = value;
    }
  }
  return merged;
}

}  // namespace

std::expected<VfSettings, std::string> vfSettingsFor(const json& claim, const std::string& driver,
                                                     const std::string& request, const std::string& vfPci) {
  auto params = mergedParameters(claim, driver, request);
  if (!params) {
    return std::unexpected(params.error());
  }
  VfSettings out;
  if (params->empty()) {
    return out;
  }
  const std::string where = "the claim's opaque configuration for request " + request;
  if (auto g = params->find("guid"); g != params->end()) {
    auto guid = config::parseVfGuid("guid", g->is_string() ? g->get<std::string>() : g->dump());
    if (!guid) {
      return std::unexpected(where + ": " + guid.error().msg);
    }
    out.guid = *guid;
  }
  // The NAD's parser reads the other keys, as sriov mode's configuration of this VF.
  json doc = *params;
  doc.erase("guid");
  doc.update(json{{"cniVersion", "1.1.0"}, {"name", kDraGuidNetwork}, {"type", "ibcni"}, {"mode", "sriov"},
                  {"deviceID", vfPci}});
  auto conf = config::parseNetConf(doc.dump(), cni::Command::kAdd);
  if (!conf) {
    return std::unexpected(where + ": " + conf.error().msg);
  }
  out.linkState = conf->linkState;
  out.pkey = conf->pkey;
  if (conf->guidPool && *conf->guidPool) {
    out.guidPool = **conf->guidPool;
  }
  return out;
}

}  // namespace ibcni::dra
