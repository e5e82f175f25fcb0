// SPDX-License-Identifier: Apache-2.0
// A node's devices as resource.k8s.io/v1 ResourceSlices: one pool named after the node, split
// into as many slices as the API's limits need, each device with the standard attributes a
// scheduler places NICs by (PCIe root, NUMA node, PCI bus ID), ibcni's own, and the taints that
// keep pods off a device that cannot serve them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plugin/dra/ib_devices.h"

namespace ibcni::dra {

/// The driver name ibcni-dra registers and publishes under; also the domain of its attributes.
inline constexpr const char* kDriverName = "ibcni.io";

/// Taint keys (effect NoSchedule).
/// The resource name a VF's `k8s.cni.cncf.io/resourceName` attribute gives Multus (its DRA
/// integration names the device with it, as a device plugin's resource).
inline constexpr const char* kMultusVfResource = "ibcni.io/vf";
inline constexpr const char* kTaintPortDown = "ibcni.io/port-down";    ///< the port is not ACTIVE
inline constexpr const char* kTaintGuidUnset = "ibcni.io/guid-unset";  ///< a VF without a GUID, no guidPool

/// The API's limits (k8s.io/api resource/v1 types.go).
inline constexpr std::size_t kMaxDevicesPerSlice = 128;
inline constexpr std::size_t kMaxDevicesPerSliceWithTaints = 64;
inline constexpr std::size_t kMaxAttributesPerDevice = 32;
inline constexpr std::size_t kMaxAttributeValueLength = 64;

struct SliceOptions {
  std::string driver = kDriverName;
  std::string nodeName;           ///< the Node the slices are for; also the pool's name
  std::string nodeUid;            ///< the Node's uid: the slices are owned by it (go with it); none when ""
  std::int64_t generation = 0;    ///< the pool's generation: raised whenever its devices change
  /// A `guidPool` serves this node's VFs: a VF without a GUID gets one at Prepare and is not tainted.
  bool guidPoolConfigured = false;
};

/// The `devices[]` entry of `d`: name, attributes (at most kMaxAttributesPerDevice; string values
/// at most kMaxAttributeValueLength, a longer value is left out), taints, and for a port
/// `allowMultipleAllocations`.
[[nodiscard]] nlohmann::json sliceDevice(const IbDevice& d, const SliceOptions& options);

/// The ResourceSlices of `devices` (in their order), each at most kMaxDevicesPerSlice devices, or
/// kMaxDevicesPerSliceWithTaints when any of its devices is tainted; named "<node>-<driver>-<i>"
/// (the driver's dots as dashes), all with the pool's generation and count. One slice without
/// devices when there are none, so that the pool says "nothing here" rather than "unknown".
[[nodiscard]] std::vector<nlohmann::json> buildSlices(const std::vector<IbDevice>& devices,
                                                      const SliceOptions& options);

}  // namespace ibcni::dra
