// SPDX-License-Identifier: Apache-2.0
#include "plugin/dra/resource_slices.h"

#include <algorithm>
#include <utility>

namespace ibcni::dra {

namespace {

using nlohmann::json;

constexpr const char* kPciBusId = "resource.kubernetes.io/pciBusID";
constexpr const char* kPcieRoot = "resource.kubernetes.io/pcieRoot";
constexpr const char* kNumaNode = "resource.kubernetes.io/numaNode";
constexpr const char* kDranetNumaNode = "dra.net/numaNode";
constexpr const char* kMultusDeviceId = "k8s.cni.cncf.io/deviceID";
constexpr const char* kMultusResourceName = "k8s.cni.cncf.io/resourceName";  // the alias DRANet's and dra-driver-sriov's claims match on

/// A device's attributes as the API spells them, leaving out what is unknown.
class Attributes {
 public:
  void string(const char* name, const std::string& value) {
    if (!value.empty() && value.size() <= kMaxAttributeValueLength) {
      put(name, {{"string", value}});
    }
  }
  template <class Int>
  void integer(const char* name, const std::optional<Int>& value) {
    if (value) {
      put(name, {{"int", static_cast<std::int64_t>(*value)}});
    }
  }
  void boolean(const char* name, bool value) { put(name, {{"bool", value}}); }
  [[nodiscard]] json take() { return std::move(doc_); }

 private:
  void put(const char* name, json value) {
    if (doc_.size() < kMaxAttributesPerDevice) {
      doc_[name] = std::move(value);
    }
  }
  json doc_ = json::object();
};

json taints(const IbDevice& d, const SliceOptions& options) {
  json out = json::array();
  if (d.portState != "ACTIVE") {
    out.push_back({{"key", kTaintPortDown}, {"value", d.portState.empty() ? "UNKNOWN" : d.portState},
                   {"effect", "NoSchedule"}});
  }
  if (d.kind == DeviceKind::kVf && !d.guidSet && !options.guidPoolConfigured) {
    out.push_back({{"key", kTaintGuidUnset}, {"effect", "NoSchedule"}});
  }
  return out;
}

bool tainted(const IbDevice& d, const SliceOptions& options) { return !taints(d, options).empty(); }

/// "<node>-<driver, dots as dashes>-<i>".
std::string sliceName(const SliceOptions& options, std::size_t index) {
  std::string driver = options.driver;
  std::replace(driver.begin(), driver.end(), '.', '-');
  return options.nodeName + "-" + driver + "-" + std::to_string(index);
}

/// The devices of `devices`, cut into slices: each as long as the limit of what it holds allows.
std::vector<std::vector<const IbDevice*>> cut(const std::vector<IbDevice>& devices, const SliceOptions& options) {
  std::vector<std::vector<const IbDevice*>> slices(1);
  bool anyTainted = false;
  for (const auto& d : devices) {
    const bool t = tainted(d, options);
    const std::size_t limit = (anyTainted || t) ? kMaxDevicesPerSliceWithTaints : kMaxDevicesPerSlice;
    if (slices.back().size() + 1 > limit) {
      slices.emplace_back();
      anyTainted = false;
    }
    slices.back().push_back(&d);
    anyTainted = anyTainted || t;
  }
  return slices;
}

}  // namespace

json sliceDevice(const IbDevice& d, const SliceOptions& options) {
  Attributes a;
  a.string(kPciBusId, d.pci.text);
  a.string(kPcieRoot, d.placement.pcieRoot);
  a.integer(kNumaNode, d.placement.numaNode);
  a.integer(kDranetNumaNode, d.placement.numaNode);
  a.string("kind", kindName(d.kind));
  a.string("linkLayer", d.linkLayer);
  a.string("rdmaDevice", d.rdmaDevice);
  a.string("ifName", d.ifName);
  a.string("pfName", d.pfName);
  a.string("pfPciAddress", d.pfPci.text);
  a.integer("vfIndex", d.vfIndex);
  a.integer("port", std::optional(d.port));
  a.string("pciDriver", d.driver);
  a.string("nodeGuid", d.nodeGuid);
  a.string("portGuid", d.portGuid);
  a.boolean("guidSet", d.guidSet);
  a.string("portState", d.portState);
  a.integer("rateGbps", d.rateGbps);
  a.integer("mtu", d.mtu);
  if (d.kind == DeviceKind::kVf) {
    // Multus's DRA integration reads these two: it hands the VF's PCI address to the CNI as
    // deviceID, as with a device plugin, and ibcni's sriov mode attaches it.
    a.string(kMultusDeviceId, d.pci.text);
    a.string(kMultusResourceName, kMultusVfResource);
  }
  json device = {{"name", d.name}, {"attributes", a.take()}};
  if (auto t = taints(d, options); !t.empty()) {
    device["taints"] = std::move(t);
  }
  if (d.kind == DeviceKind::kIpoibPort) {
    device["allowMultipleAllocations"] = true;
  }
  return device;
}

std::vector<json> buildSlices(const std::vector<IbDevice>& devices, const SliceOptions& options) {
  const auto parts = cut(devices, options);
  std::vector<json> slices;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    json list = json::array();
    for (const IbDevice* d : parts[i]) {
      list.push_back(sliceDevice(*d, options));
    }
    json metadata = {{"name", sliceName(options, i)}};
    if (!options.nodeUid.empty()) {
      metadata["ownerReferences"] = json::array({{{"apiVersion", "v1"},
                                                   {"kind", "Node"},
                                                   {"name", options.nodeName},
                                                   {"uid", options.nodeUid},
                                                   {"controller", true}}});
    }
    slices.push_back({
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceSlice"},
        {"metadata", std::move(metadata)},
        {"spec",
         {{"driver", options.driver},
          {"nodeName", options.nodeName},
          {"pool",
           {{"name", options.nodeName},
            {"generation", options.generation},
            {"resourceSliceCount", static_cast<std::int64_t>(parts.size())}}},
          {"devices", std::move(list)}}},
    });
  }
  return slices;
}

}  // namespace ibcni::dra
