// SPDX-License-Identifier: Apache-2.0
// ResourceSlices built from devices: attributes, taints, the API's limits and how slices split.
#include "plugin/dra/resource_slices.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "unit/dra/dra_devices.h"

namespace ibcni::dra {
namespace {

using nlohmann::json;

SliceOptions node() {
  SliceOptions o;
  o.nodeName = "gpu-node-7";
  o.generation = 3;
  return o;
}

TEST(SliceDevice, CarriesTheStandardAttributesAndIbcnisOwn) {
  json d = sliceDevice(vf(2), node());
  EXPECT_EQ(d["name"], "vf-0000-3b-00-2");
  const json& a = d["attributes"];
  EXPECT_EQ(a["resource.kubernetes.io/pciBusID"], json({{"string", "0000:3b:00.2"}}));
  EXPECT_EQ(a["resource.kubernetes.io/pcieRoot"], json({{"string", "pci0000:3a"}}));
  EXPECT_EQ(a["resource.kubernetes.io/numaNode"], json({{"int", 1}}));
  EXPECT_EQ(a["dra.net/numaNode"], json({{"int", 1}}));
  EXPECT_EQ(a["kind"], json({{"string", "vf"}}));
  EXPECT_EQ(a["linkLayer"], json({{"string", "InfiniBand"}}));
  EXPECT_EQ(a["rdmaDevice"], json({{"string", "mlx5_3"}}));
  EXPECT_EQ(a["ifName"], json({{"string", "ib3"}}));
  EXPECT_EQ(a["pfName"], json({{"string", "ib0"}}));
  EXPECT_EQ(a["pfPciAddress"], json({{"string", "0000:3b:00.0"}}));
  EXPECT_EQ(a["vfIndex"], json({{"int", 2}}));
  EXPECT_EQ(a["nodeGuid"], json({{"string", "0200:0000:0000:0a01"}}));
  EXPECT_EQ(a["portGuid"], json({{"string", "0200:0000:0000:0a02"}}));
  EXPECT_EQ(a["guidSet"], json({{"bool", true}}));
  EXPECT_EQ(a["portState"], json({{"string", "ACTIVE"}}));
  EXPECT_EQ(a["rateGbps"], json({{"int", 200}}));
  EXPECT_EQ(a["mtu"], json({{"int", 4092}}));
  EXPECT_EQ(a["k8s.cni.cncf.io/deviceID"], json({{"string", "0000:3b:00.2"}}));  // Multus's DRA integration
  EXPECT_EQ(a["k8s.cni.cncf.io/resourceName"], json({{"string", "ibcni.io/vf"}}));
  EXPECT_LE(a.size(), kMaxAttributesPerDevice);
  EXPECT_FALSE(d.contains("taints"));
  EXPECT_FALSE(d.contains("allowMultipleAllocations"));
}

TEST(SliceDevice, LeavesOutWhatIsUnknownAndValuesTooLong) {
  IbDevice d = vf(0);
  d.rdmaDevice.clear();
  d.ifName.clear();
  d.mtu.reset();
  d.placement = {};
  d.driver = std::string(kMaxAttributeValueLength + 1, 'x');
  json a = sliceDevice(d, node())["attributes"];
  for (const char* gone : {"rdmaDevice", "ifName", "mtu", "resource.kubernetes.io/pcieRoot",
                           "resource.kubernetes.io/numaNode", "dra.net/numaNode", "pciDriver"}) {
    EXPECT_FALSE(a.contains(gone)) << gone;
  }
  d.driver = std::string(kMaxAttributeValueLength, 'x');
  EXPECT_TRUE(sliceDevice(d, node())["attributes"].contains("pciDriver"));
}

TEST(SliceDevice, APortThatIsNotActiveIsTainted) {
  IbDevice d = vf(0);
  d.portState = "DOWN";
  EXPECT_EQ(sliceDevice(d, node())["taints"],
            json::parse(R"([{"key": "ibcni.io/port-down", "value": "DOWN", "effect": "NoSchedule"}])"));
}

TEST(SliceDevice, AVfWithoutGuidIsTaintedUnlessAGuidPoolServesIt) {
  IbDevice d = vf(0);
  d.guidSet = false;
  EXPECT_EQ(sliceDevice(d, node())["taints"],
            json::parse(R"([{"key": "ibcni.io/guid-unset", "effect": "NoSchedule"}])"));
  SliceOptions pooled = node();
  pooled.guidPoolConfigured = true;
  EXPECT_FALSE(sliceDevice(d, pooled).contains("taints"));
}

TEST(SliceDevice, AnIpoibPortIsSharedAndNeedsNoGuidOfItsOwn) {
  IbDevice d = vf(0);
  d.kind = DeviceKind::kIpoibPort;
  d.vfIndex.reset();
  d.guidSet = false;
  json out = sliceDevice(d, node());
  EXPECT_EQ(out["allowMultipleAllocations"], true);
  EXPECT_FALSE(out.contains("taints"));
  EXPECT_EQ(out["attributes"]["kind"], json({{"string", "ipoib-port"}}));
  EXPECT_FALSE(out["attributes"].contains("vfIndex"));
  EXPECT_FALSE(out["attributes"].contains("k8s.cni.cncf.io/deviceID"));  // ipoib mode names no deviceID
}

TEST(BuildSlices, OneSliceNamedAfterTheNodeAndDriverWithThePool) {
  auto slices = buildSlices(vfs(3), node());
  ASSERT_EQ(slices.size(), 1U);
  const json& s = slices[0];
  EXPECT_EQ(s["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(s["kind"], "ResourceSlice");
  EXPECT_EQ(s["metadata"]["name"], "gpu-node-7-ibcni-io-0");
  EXPECT_EQ(s["spec"]["driver"], "ibcni.io");
  EXPECT_EQ(s["spec"]["nodeName"], "gpu-node-7");
  EXPECT_EQ(s["spec"]["pool"], json::parse(R"({"name": "gpu-node-7", "generation": 3, "resourceSliceCount": 1})"));
  ASSERT_EQ(s["spec"]["devices"].size(), 3U);
  EXPECT_EQ(s["spec"]["devices"][2]["name"], "vf-0000-3b-00-2");
}

TEST(BuildSlices, TheNodeOwnsThemWhenItsUidIsKnown) {
  EXPECT_FALSE(buildSlices(vfs(1), node())[0]["metadata"].contains("ownerReferences"));
  SliceOptions owned = node();
  owned.nodeUid = "6a1c0f3e-0000-4000-8000-000000000001";
  EXPECT_EQ(buildSlices(vfs(1), owned)[0]["metadata"]["ownerReferences"],
            json::parse(R"([{"apiVersion": "v1", "kind": "Node", "name": "gpu-node-7",
                             "uid": "6a1c0f3e-0000-4000-8000-000000000001", "controller": true}])"));
}

TEST(BuildSlices, NoDeviceIsOneEmptySlice) {
  auto slices = buildSlices({}, node());
  ASSERT_EQ(slices.size(), 1U);
  EXPECT_EQ(slices[0]["spec"]["devices"], json::array());
  EXPECT_EQ(slices[0]["spec"]["pool"]["resourceSliceCount"], 1);
}

/// The device counts of `slices`, checking that every slice names the same pool and count.
std::vector<std::size_t> counts(const std::vector<json>& slices) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < slices.size(); ++i) {
    EXPECT_EQ(slices[i]["metadata"]["name"], "gpu-node-7-ibcni-io-" + std::to_string(i));
    EXPECT_EQ(slices[i]["spec"]["pool"]["resourceSliceCount"], slices.size());
    EXPECT_EQ(slices[i]["spec"]["pool"]["generation"], 3);
    out.push_back(slices[i]["spec"]["devices"].size());
  }
  return out;
}

TEST(BuildSlices, SplitsAt128Devices) {
  EXPECT_THAT(counts(buildSlices(vfs(128), node())), ::testing::ElementsAre(128U));
  EXPECT_THAT(counts(buildSlices(vfs(300), node())), ::testing::ElementsAre(128U, 128U, 44U));
}

TEST(BuildSlices, ASliceWithATaintedDeviceHoldsAt64) {
  auto devices = vfs(200);
  devices[10].portState = "INIT";
  devices[150].guidSet = false;
  // A slice holding 10 or 150 ends at 64 devices; the others may hold 128.
  auto sizes = counts(buildSlices(devices, node()));
  std::size_t total = 0;
  auto slices = buildSlices(devices, node());
  for (std::size_t i = 0; i < slices.size(); ++i) {
    bool anyTaint = false;
    for (const auto& d : slices[i]["spec"]["devices"]) {
      anyTaint = anyTaint || d.contains("taints");
    }
    EXPECT_LE(sizes[i], anyTaint ? kMaxDevicesPerSliceWithTaints : kMaxDevicesPerSlice) << "slice " << i;
    total += sizes[i];
  }
  EXPECT_EQ(total, 200U);
  EXPECT_EQ(sizes[0], 64U);
}

}  // namespace
}  // namespace ibcni::dra
