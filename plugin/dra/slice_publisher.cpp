// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/slice_publisher.h"

#include <algorithm>
#include <map>
#include <utility>

namespace ibcni::dra {

namespace {

using nlohmann::json;

/// What of a device this driver sets (the server may add to it, such as a taint's timeAdded).
json projectDevice(const json& d) {
  json taints = json::array();
  for (const auto& t : d.value("taints", json::array())) {
    taints.push_back({{"key", t.value("key", "")}, {"value", t.value("value", "")}, {"effect", t.value("effect", "")}});
  }
  return {{"name", d.value("name", "")},
          {"attributes", d.value("attributes", json::object())},
          {"taints", std::move(taints)},
          {"allowMultipleAllocations", d.value("allowMultipleAllocations", false)}};
}

/// A slice's content, generation aside.
json projectSlice(const json& s) {
  const json spec = s.value("spec", json::object());
  const json pool = spec.value("pool", json::object());
  json devices = json::array();
  for (const auto& d : spec.value("devices", json::array())) {
    devices.push_back(projectDevice(d));
  }
  return {{"driver", spec.value("driver", "")},
          {"nodeName", spec.value("nodeName", "")},
          {"pool", pool.value("name", "")},
          {"count", pool.value("resourceSliceCount", 0)},
          {"devices", std::move(devices)}};
}

std::string nameOf(const json& s) { return s.value("metadata", json::object()).value("name", ""); }

std::int64_t generationOf(const json& s) {
  return s.value("spec", json::object()).value("pool", json::object()).value("generation", std::int64_t{0});
}

/// Whether the server's slices say what `wanted` says, slice by slice, in one generation.
bool same(const std::map<std::string, json>& existing, const std::vector<json>& wanted) {
  if (existing.size() != wanted.size() || existing.empty()) {
    return false;
  }
  const std::int64_t generation = generationOf(existing.begin()->second);
  return std::all_of(wanted.begin(), wanted.end(), [&](const json& w) {
    auto it = existing.find(nameOf(w));
    return it != existing.end() && generationOf(it->second) == generation &&
           projectSlice(it->second) == projectSlice(w);
  });
}

}  // namespace

SlicePublisher::SlicePublisher(SliceApi& api, SliceOptions options) : api_(api), options_(std::move(options)) {}

ApiResult<PublishReport> SlicePublisher::publish(const std::vector<IbDevice>& devices) {
  auto listed = api_.list(options_.driver, options_.nodeName);
  if (!listed) {
    return std::unexpected(listed.error());
  }
  std::map<std::string, json> existing;
  std::int64_t newest = 0;
  for (auto& s : *listed) {
    newest = std::max(newest, generationOf(s));
    existing.emplace(nameOf(s), std::move(s));
  }
  PublishReport report;
  SliceOptions options = options_;
  options.generation = newest;
  if (same(existing, buildSlices(devices, options))) {
    report.generation = newest;
    return report;
  }
  options.generation = report.generation = newest + 1;
  for (auto& slice : buildSlices(devices, options)) {
    auto it = existing.find(nameOf(slice));
    ApiResult<void> written;
    if (it == existing.end()) {
      written = api_.create(slice);
      ++report.created;
    } else {
      slice["metadata"]["resourceVersion"] = it->second["metadata"].value("resourceVersion", "");
      written = api_.update(slice);
      ++report.updated;
      existing.erase(it);
    }
    if (!written) {
      return std::unexpected(written.error());
    }
  }
  for (const auto& [name, stale] : existing) {
    if (auto r = api_.remove(name, stale["metadata"].value("uid", "")); !r) {
      return std::unexpected(r.error());
    }
    ++report.deleted;
  }
  return report;
}

}  // namespace ibcni::dra
