// SPDX-License-Identifier: Apache-2.0
// The CDI spec of a prepared claim (Container Device Interface, cncf-tags/container-device-interface
// SPEC.md): for each of its VFs, the RDMA device's character devices under /dev/infiniband and
// rdma_cm, and env naming the RDMA device and netdev, so that a CDI-enabled runtime (containerd,
// CRI-O, podman) gives the container what verbs need. One spec file per claim in the runtime's
// dynamic spec folder (/var/run/cdi), removed when the claim is unprepared.
#pragma once

#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ibcni/os/sys_error.h"
#include "ibcni/sysfs/ib_inventory.h"
#include "plugin/dra/ib_devices.h"

namespace ibcni::dra {

inline constexpr const char* kCdiKind = "ibcni.io/vf";
/// deviceNodes with major and minor need 0.3.0; 0.5.0 is the newest the CDI library 0.5 that
/// podman 4.3 vendors knows, and podman 4.3 takes such a spec (tests/kernel-lab: dra_cdi).
inline constexpr const char* kCdiVersion = "0.5.0";
inline constexpr const char* kCdiDir = "/var/run/cdi";

/// One device of a claim's spec.
struct CdiDevice {
  std::string name;                       ///< "<claim uid>-<device name>"
  std::vector<sysfs::CharDevice> nodes;   ///< made as /dev/infiniband/<name> in the container
  std::vector<std::string> env;           ///< "NAME=value"
};

/// The CDI device of VF `d`, prepared for request `request` of claim `claimUid`: its RDMA device's
/// uverbs, umad and issm nodes and rdma_cm (those that exist), and env
/// IBCNI_<REQUEST>_RDMA_DEVICE / _NETDEV / _PCI_ADDRESS (the request's name upper-cased, '-' as '_').
[[nodiscard]] CdiDevice vfCdiDevice(const std::string& claimUid, const std::string& request, const IbDevice& d,
                                    const sysfs::RdmaCharDevices& chars, const std::optional<sysfs::CharDevice>& rdmaCm);

/// The spec holding `devices`.
[[nodiscard]] nlohmann::json cdiSpec(const std::vector<CdiDevice>& devices);

/// "<claim uid>-<device name>": the CDI device of a claim's VF.
[[nodiscard]] std::string cdiDeviceName(const std::string& claimUid, const std::string& deviceName);

/// "ibcni.io/vf=<name>": what the kubelet hands the runtime.
[[nodiscard]] std::string cdiDeviceId(const std::string& name);

/// "<dir>/ibcni.io-vf-<claim uid>.json"
[[nodiscard]] std::string cdiSpecPath(const std::string& dir, const std::string& claimUid);

/// Writes claim `claimUid`'s spec into `dir` in one step (a reader sees the old file or the new).
[[nodiscard]] os::SysResult<void> writeCdiSpec(const std::string& dir, const std::string& claimUid,
                                               const std::vector<CdiDevice>& devices);
/// Removes claim `claimUid`'s spec from `dir`; one that is not there is success.
[[nodiscard]] os::SysResult<void> removeCdiSpec(const std::string& dir, const std::string& claimUid);

}  // namespace ibcni::dra
